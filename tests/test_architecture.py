"""The import rules each package's `__init__` states (docs/architecture.md), checked: by
importing every module of a package in a fresh interpreter and looking at what got loaded
(which catches indirect imports too), and by reading every module's imports (which catches
the lazy ones inside functions)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dws_dagster"

_LIBRARIES = ["dagster", "pyspark", "py4j", "openlineage"]
_DAGSTER_SIDE = [
    "dws_dagster.assets",
    "dws_dagster.sensor",
    "dws_dagster.checks",
    "dws_dagster.components",
    "dws_dagster.ol",
    "dws_dagster.spark",
    "dws_dagster.cli",
    "dws_dagster._compat",
]
#: The workspace's layers, lowest first: each imports only those below it.
_LAYERS = [
    "dws_dagster.workspace",
    "dws_dagster.store",
    "dws_dagster.snapshots",
    "dws_dagster.replay",
    "dws_dagster.views",
    "dws_dagster.lineage_api",
]


def _above(layer: str) -> list[str]:
    return _LAYERS[_LAYERS.index(layer) + 1 :]


#: Per package: libraries that importing any of its modules must not load.
NOT_LOADED = {
    **dict.fromkeys(_LAYERS, _LIBRARIES),
    "dws_dagster.spark": ["dagster"],
    "dws_dagster.ol": ["dagster", "pyspark"],
    "dws_dagster.sensor": ["pyspark", "py4j"],
    "dws_dagster.cli": ["dagster", "pyspark", "openlineage"],
    "dws_dagster._compat": ["pyspark"],
    "dws_dagster.checks": ["pyspark", "py4j"],
}

#: Per package: libraries and dws_dagster packages its modules may not import, even inside a
#: function.
NOT_IMPORTED = {
    **{layer: [*_LIBRARIES, *_DAGSTER_SIDE, *_above(layer)] for layer in _LAYERS},
    # views draw what a replay recorded, never run one
    "dws_dagster.views": [
        *_LIBRARIES,
        *_DAGSTER_SIDE,
        *_above("dws_dagster.views"),
        "dws_dagster.replay.dagster_runner",
    ],
    "dws_dagster.spark": [
        "dagster",
        "dws_dagster.assets",
        "dws_dagster.sensor",
        "dws_dagster.ol",
        "dws_dagster.cli",
        "dws_dagster._compat",
    ],
    # The Connect walker is one of the two `column_lineage` picks between: it never reaches
    # back to the classic walker or to the dispatcher.
    "dws_dagster.spark.connect": ["dws_dagster.spark.plan", "dws_dagster.spark.column_lineage"],
    # Neither does the classic walker reach the Connect one.
    "dws_dagster.spark.plan": ["dws_dagster.spark.connect", "dws_dagster.spark.column_lineage"],
    "dws_dagster.ol": [
        "dagster",
        "pyspark",
        "dws_dagster.assets",
        "dws_dagster.sensor",
        "dws_dagster.spark",
        "dws_dagster.cli",
    ],
    # the write path keeps versions aside and prunes them by the store's word, never through
    # snapshots, which are built on what it writes
    "dws_dagster.assets": [
        "dws_dagster.sensor",
        "dws_dagster.ol",
        "dws_dagster.cli",
        "dws_dagster.snapshots",
        "dws_dagster.views",
    ],
    "dws_dagster.sensor": [
        "pyspark",
        "py4j",
        "dws_dagster.spark",
        "dws_dagster.cli",
        "dws_dagster.assets.io_manager",
    ],
    "dws_dagster.checks": [
        "pyspark",
        "py4j",
        "dws_dagster.sensor",
        "dws_dagster.ol",
        "dws_dagster.spark",
        "dws_dagster.cli",
    ],
    "dws_dagster._compat": [
        *_LAYERS,
        "dws_dagster.spark",
        "dws_dagster.assets",
        "dws_dagster.sensor",
        "dws_dagster.ol",
        "dws_dagster.cli",
    ],
}

#: Modules whose package's rule makes one named exception, with the imports it allows.
EXCEPTIONS = {
    # the workspace as a whole opens its store; the store is given what it needs of the
    # workspace (`store.transactions.StoreWorkspace`) and never imports it
    "dws_dagster.workspace.definition": ["dws_dagster.store"],
    # replays Dagster asset steps as Dagster runs; only the `replay` command loads it
    "dws_dagster.replay.dagster_runner": ["dagster", "dws_dagster.metadata_keys"],
}

#: Library internals: only the compatibility module of that library may import them.
INTERNALS = {
    "dagster": "dws_dagster._compat.dagster",
    "dagster_shared": "dws_dagster._compat.dagster",
    "openlineage": "dws_dagster._compat.openlineage",
}


def _modules(package: str) -> list[str]:
    folder = PACKAGE.parent.joinpath(*package.split("."))
    if folder.with_suffix(".py").is_file():
        return [package]  # a module with a rule of its own
    names = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "migrations" in parts or parts[-1] == "__main__":
            continue  # Alembic loads revisions itself; __main__ runs the CLI
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, at any depth, `TYPE_CHECKING` blocks left out."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _module_path(module: str) -> Path:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def test_no_module_takes_a_name_from_the_package_root() -> None:
    """`from dws_dagster import X` in the package itself only for a submodule: the root's
    names are lazy exports for users, and importing them from inside goes through the root
    (the version, for one, has a module of its own: `_version`)."""
    offending = []
    for module in _modules("dws_dagster"):
        if module == "dws_dagster":
            continue
        tree = ast.parse(_module_path(module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module == "dws_dagster"
            ):
                for alias in node.names:
                    path = PACKAGE / alias.name
                    if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
                        offending.append(f"{module} imports {alias.name} from dws_dagster")
    assert offending == []


@pytest.mark.parametrize("package", sorted(NOT_LOADED))
def test_importing_a_package_loads_none_of_its_forbidden_libraries(package: str) -> None:
    modules = [module for module in _modules(package) if module not in EXCEPTIONS]
    assert len(modules) > 1, package
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
        check=True,
    )
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "dws_dagster" in loaded  # the imports ran, so the check means something
    assert loaded.isdisjoint(NOT_LOADED[package]), (package, loaded & set(NOT_LOADED[package]))


@pytest.mark.parametrize("package", sorted(NOT_IMPORTED))
def test_a_package_imports_no_layer_its_rule_forbids(package: str) -> None:
    offending = []
    for module in _modules(package):
        allowed = EXCEPTIONS.get(module, [])
        for imported in _imports(_module_path(module)):
            if any(imported == name or imported.startswith(name + ".") for name in allowed):
                continue
            for forbidden in NOT_IMPORTED[package]:
                if imported == forbidden or imported.startswith(forbidden + "."):
                    offending.append(f"{module} imports {imported}")
    assert offending == []


def test_library_internals_are_imported_only_by_their_compatibility_module() -> None:
    offending = []
    for module in _modules("dws_dagster"):
        for imported in _imports(_module_path(module)):
            parts = imported.split(".")
            library = parts[0]
            private = library == "dagster_shared" or any(
                part.startswith("_") and not part.endswith("__") for part in parts[1:]
            )
            owner = INTERNALS.get(library)
            if owner is not None and private and module != owner:
                offending.append(f"{module} imports {imported}")
    assert offending == []


def _private_library_uses(source: str, library: str) -> list[str]:
    """Each `._name` (not a dunder) read from what `source` takes from `library`: a name it
    imports from it (`RunEvent._get_schema()`, `parent_run.ParentRunFacet._get_schema()`),
    or an argument annotated with one (`transport: FileTransport` ... `transport._handler`)."""
    tree = ast.parse(source)
    imported: set[str] = set()
    for node in ast.walk(tree):  # `TYPE_CHECKING` imports too: annotations name them
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == library:
                    imported.add(alias.asname or alias.name.split(".")[0])
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == library
        ):
            imported.update(alias.asname or alias.name for alias in node.names)
    found: list[tuple[int, int, str]] = []

    def names_library(annotation: ast.expr | None) -> bool:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            annotation = ast.parse(annotation.value, mode="eval").body
        return annotation is not None and any(
            isinstance(name, ast.Name) and name.id in imported for name in ast.walk(annotation)
        )

    def visit(node: ast.AST, bound: frozenset[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
            shadowed = {arg.arg for arg in every}
            bound = (bound - shadowed) | {arg.arg for arg in every if names_library(arg.annotation)}
        elif isinstance(node, ast.Attribute):
            base = node.value
            while isinstance(base, ast.Attribute | ast.Call | ast.Subscript):
                base = base.func if isinstance(base, ast.Call) else base.value
            private = node.attr.startswith("_") and not node.attr.endswith("__")
            if private and isinstance(base, ast.Name) and base.id in bound:
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, bound)

    visit(tree, frozenset(imported))
    return [f"line {line}: {use}" for line, _column, use in sorted(found)]


def test_the_private_use_check_sees_names_modules_and_annotated_arguments() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from openlineage.client.event_v2 import RunEvent\n"
        "from openlineage.client.facet_v2 import parent_run as parents\n"
        "import openlineage.client.serde\n"
        "if TYPE_CHECKING:\n"
        "    from openlineage.client.transport.file import FileTransport\n"
        "URL = RunEvent._get_schema()\n"
        "PARENT = parents.ParentRunFacet._get_schema()\n"
        "SERDE = openlineage.client.serde._private\n"
        "def path(transport: FileTransport, other: 'FileTransport | None') -> str:\n"
        "    return transport._get_file_path(other._file_handler)\n"
        "def fine(transport: object) -> object:\n"
        "    return RunEvent.__name__, transport._x, RunEvent.eventTime\n"
    )
    assert _private_library_uses(source, "openlineage") == [
        "line 7: RunEvent._get_schema",
        "line 8: parents.ParentRunFacet._get_schema",
        "line 9: openlineage.client.serde._private",
        "line 11: transport._get_file_path",
        "line 11: other._file_handler",
    ]


def test_library_internals_are_used_only_by_their_compatibility_module() -> None:
    """No private attribute of what a module takes from openlineage, outside its compatibility
    module: imports alone would miss `RunEvent._get_schema()`."""
    offending = []
    for module in _modules("dws_dagster"):
        if module == INTERNALS["openlineage"]:
            continue
        source = _module_path(module).read_text(encoding="utf-8")
        offending.extend(f"{module}, {use}" for use in _private_library_uses(source, "openlineage"))
    assert offending == []


def test_every_package_states_its_import_rule() -> None:
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if "migrations" in init.parts:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "import" in doc.lower(), f"{init.relative_to(PACKAGE.parent)} states no rule"


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports, inside functions
    too (`TYPE_CHECKING` imports left out: they never run). `from package import name` is an
    import of `package.name` when that is a module, else of `package` itself."""
    modules = set(_modules("dws_dagster"))

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module in modules:
        edges: set[str] = set()

        def visit(node: ast.AST, edges: set[str] = edges) -> None:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                return
            if isinstance(node, ast.Import):
                edges.update(filter(None, (owner(alias.name) for alias in node.names)))
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    target = full if full in modules else owner(node.module)
                    if target:
                        edges.add(target)
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(ast.parse(_module_path(module).read_text(encoding="utf-8")))
        edges.discard(module)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle anywhere in the package, imports inside functions included: a cycle
    held together by a late import breaks the day someone moves that import."""
    assert _cycles(_import_graph()) == []


def test_every_module_is_at_most_500_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}


#: The command line's command modules are named by the verb they implement (`cli/commands/diff.py`
#: runs `dws-dagster diff` over `snapshots/diff.py`), as DVC names `dvc/commands/<verb>.py`.
VERB_MODULES = PACKAGE / "cli" / "commands"


def test_no_two_modules_share_a_name() -> None:
    """A module's name alone says which it is (in a traceback, a search, an import)."""
    seen: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py") or "migrations" in path.parts:
            continue
        if path.parent == VERB_MODULES:
            continue
        seen.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE.parent)))
    for folder in sorted(p for p in PACKAGE.rglob("*") if (p / "__init__.py").exists()):
        if "migrations" not in folder.parts:
            seen.setdefault(folder.name, []).append(str(folder.relative_to(PACKAGE.parent)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_every_error_is_declared_in_the_errors_package() -> None:
    """A reader finds every refusal in `dws_dagster.errors`: no `DwsError` subclass elsewhere."""
    import importlib
    import inspect

    from dws_dagster.errors import DwsError

    elsewhere = []
    for module in _modules("dws_dagster"):
        if module.startswith("dws_dagster.errors"):
            continue
        tree = ast.parse(_module_path(module).read_text(encoding="utf-8"))
        if not any(isinstance(node, ast.ClassDef) for node in ast.walk(tree)):
            continue
        loaded = importlib.import_module(module)
        for name, value in vars(loaded).items():
            if (
                inspect.isclass(value)
                and issubclass(value, DwsError)
                and value.__module__ == module
            ):
                elsewhere.append(f"{module}.{name}")
    assert elsewhere == []


def test_the_example_project_uses_no_library_internals() -> None:
    """The example is what users copy: public Dagster and OpenLineage API only."""
    offending = []
    for path in sorted((PACKAGE.parent / "example_project").rglob("*.py")):
        for imported in _imports(path):
            parts = imported.split(".")
            private = parts[0] == "dagster_shared" or any(
                part.startswith("_") and not part.endswith("__") for part in parts[1:]
            )
            if parts[0] in INTERNALS and private:
                offending.append(f"{path.name} imports {imported}")
    assert offending == []
