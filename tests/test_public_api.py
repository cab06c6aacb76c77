"""The public surface: what `from dws_dagster import …` offers, kept in one list.

`dws_dagster/__init__.py` names each export three times — the lazy table that imports it on
first use, the literal `__all__` type checkers and readers see, and the imports under
`TYPE_CHECKING` — so they are checked against each other here, and every error the
documentation tells users to catch must be importable from the package.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import dws_dagster
import dws_dagster.lineage
from dws_dagster.cli.main import build_parser
from tests.support.docstring_examples import (
    code_blocks,
    console_steps,
    examples_section,
    public_names,
)

ROOT = Path(__file__).resolve().parent.parent
INIT = ROOT / "dws_dagster" / "__init__.py"


def _type_checking_imports() -> set[str]:
    tree = ast.parse(INIT.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in stmt.names)
    return names


def _literal_all() -> list[str]:
    tree = ast.parse(INIT.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, ast.List), "__all__ must be a literal list"
            return [ast.literal_eval(item) for item in node.value.elts]
    raise AssertionError("no __all__ in dws_dagster/__init__.py")


def test_all_is_a_literal_list_of_the_lazy_table_and_the_typing_imports() -> None:
    exported = _literal_all()
    assert exported == sorted(exported)
    assert set(exported) == set(dws_dagster._EXPORTS) == _type_checking_imports()
    assert dws_dagster.__all__ == exported


def test_every_export_is_the_object_its_module_defines() -> None:
    for name, module in dws_dagster._EXPORTS.items():
        assert getattr(dws_dagster, name) is getattr(importlib.import_module(module), name)


def test_every_error_the_documentation_names_is_exported() -> None:
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    documented = set(re.findall(r"`(\w+(?:Error|Warning))`", text)) - set(dir(builtins))
    assert documented, "the documentation names no errors"
    missing = sorted(documented - set(dws_dagster.__all__))
    assert missing == [], f"documented but not importable from dws_dagster: {missing}"
    for name in documented:
        value = getattr(dws_dagster, name)
        assert issubclass(value, (dws_dagster.DwsError, Warning)), name


def test_the_package_declares_its_type_hints() -> None:
    assert (ROOT / "dws_dagster" / "py.typed").is_file()


def test_importing_the_package_imports_neither_dagster_nor_spark() -> None:
    code = (
        "import sys, dws_dagster; from dws_dagster import ResourceRef, DwsError; "
        "print(sorted(m for m in ('dagster', 'pyspark') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_every_dws_metadata_key_is_named_in_the_contract_module_only() -> None:
    """`dws/...` keys are the contract between writers and readers of metadata: spelled once,
    in dws_dagster/metadata_keys.py, so a writer and a reader can never disagree on one."""
    from dws_dagster import metadata_keys

    named = {
        value
        for name, value in vars(metadata_keys).items()
        if name.isupper() and isinstance(value, str)
    }
    spelled = []
    for path in sorted((ROOT / "dws_dagster").rglob("*.py")):
        if path.name == "metadata_keys.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""["']dws/""", line):
                spelled.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert spelled == [], "spell dws/ keys through dws_dagster.metadata_keys"
    assert all(key.startswith(metadata_keys.PREFIX) for key in named)
    assert len(named) == len([n for n in vars(metadata_keys) if n.isupper()])  # no key twice


# ------------------------------------------------------------------------ docstring examples

#: Every public name, for parametrizing without importing Dagster or Spark at collection.
PUBLIC = sorted(set(dws_dagster.__all__) | set(dws_dagster.lineage.__all__))


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_has_an_examples_section_whose_code_is_valid(name: str) -> None:
    """Dagster's API docs are built from Google-style docstrings; each public name shows its
    typical use in an `Examples:` section. Its Python compiles, its YAML parses, and the
    command lines of its console examples are ones `dws-dagster` accepts (tests/
    test_docstring_examples.py runs the examples)."""
    obj = public_names()[name]
    section = examples_section(obj)
    assert section is not None, f"the docstring of {name} has no Examples: section"
    blocks = code_blocks(section)
    assert blocks, f"the Examples: section of {name} has no '.. code-block::'"
    for block in blocks:
        assert block.lang in ("python", "yaml", "console"), (name, block.lang)
        if block.lang == "python":
            compile(block.code, f"<example of {name}>", "exec", dont_inherit=True)
        elif block.lang == "yaml":
            assert isinstance(yaml.safe_load(block.code), dict), (name, block.code)
        else:
            steps = console_steps(block.code)
            assert steps, (name, block.code)
            for step in steps:
                try:
                    build_parser().parse_args(step.argv)
                except SystemExit:
                    raise AssertionError(f"{name}: dws-dagster refuses {step.argv}") from None


def test_the_examples_reader_finds_what_is_missing_or_broken() -> None:
    """The check above can fail: a docstring without the section, a section without code,
    code that does not compile."""

    def without() -> None:
        """Nothing to show.

        Returns:
            None.
        """

    def broken() -> None:
        """Broken.

        Examples:
            .. code-block:: python

                with open("x") as f
                    pass
        """

    assert examples_section(without) is None
    (block,) = code_blocks(examples_section(broken) or "")
    assert block.lang == "python"
    with pytest.raises(SyntaxError):
        compile(block.code, "<broken>", "exec")
    assert code_blocks("Shown in words only.") == []
