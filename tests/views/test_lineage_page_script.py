"""The lineage page's script as front-end code: its modules joined in the declared order (each
using only the modules before it), the npm tooling that checks them pinned, and the typed
contract between `page_content.page_data` and the script, the JSDoc typedefs of
`views/page/assets/data.js`, checked against the data of real pages so that neither can drift.
ESLint and the type check themselves run in `./dev test` (`npm run check`)."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from dws_dagster.views.graph import build_graph
from dws_dagster.views.page import document as lineage_page
from dws_dagster.views.page.content import page_data
from dws_dagster.views.page.document import PAGE_MODULES, page_script, render_page
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import LineageRecord, StepInfo
from tests.views.lineage_page_graphs import FORECAST_REF, replayed_forecast, version_of
from tests.views.test_render import tricky

ROOT = Path(__file__).resolve().parents[2]
ASSETS = Path(lineage_page.__file__).parent / "assets"
ENTRY = "lineage_page.js"


# --------------------------------------------------------------------------- modules


def _declared(text: str, kind: str) -> set[str]:
    """The names of a module's `/* global A, B */` or `/* exported A */` comments."""
    found = re.findall(rf"/\*\s*{kind}\s+(.*?)\*/", text, re.DOTALL)
    return {name.strip() for names in found for name in names.split(",") if name.strip()}


def _namespace(module: str) -> str:
    """The one name a module defines: its file's name in PascalCase (`pan_zoom.js`: PanZoom)."""
    return "".join(part.capitalize() for part in module.removesuffix(".js").split("_"))


def test_each_module_uses_only_modules_joined_before_it() -> None:
    assert sorted(PAGE_MODULES) == sorted(path.name for path in ASSETS.glob("*.js"))
    assert len(set(PAGE_MODULES)) == len(PAGE_MODULES) and PAGE_MODULES[-1] == ENTRY
    defined = {"dagre"}  # the vendored library, inlined before the page's script
    for module in PAGE_MODULES:
        text = (ASSETS / module).read_text(encoding="utf-8")
        assert text.startswith("// @ts-check\n"), module
        uses = _declared(text, "global")
        assert uses <= defined, f"{module} uses {sorted(uses - defined)}, joined after it"
        body = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
        for name in uses:  # no stale declaration
            assert re.search(rf"\b{name}\b", body), f"{module} declares {name} but never uses it"
        exported = _declared(text, "exported")
        top_level = re.findall(r"^(?:const|let|var|function|class)\s+(\w+)", text, re.MULTILINE)
        expected = set() if module == ENTRY else {_namespace(module)}
        assert exported == set(top_level) == expected, module
        defined |= exported


def test_the_page_joins_every_module_once_in_order() -> None:
    script = page_script()
    markers = [script.index(f"// ---- assets/{module}\n") for module in PAGE_MODULES]
    assert markers == sorted(markers)
    for module in PAGE_MODULES:
        assert script.count((ASSETS / module).read_text(encoding="utf-8")) == 1, module
    assert script.startswith('(() => {\n"use strict";\n') and script.endswith("})();")
    page = render_page(tricky())
    assert page.count("<script>") == 2 and f"<script>{script}</script>" in page


def test_every_module_is_packaged() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["dws_dagster.views.page"]
    for module in PAGE_MODULES:
        assert any(Path("assets", module).match(p) for p in patterns), module


def test_the_npm_tools_are_pinned_and_dagres_types_are_the_vendored_version() -> None:
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    tools = package["devDependencies"]
    assert package["private"] is True and "dependencies" not in package
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", version) for version in tools.values()), tools
    assert lock["packages"][""]["devDependencies"] == tools  # the lock file is up to date
    for name, version in tools.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, name
    vendored = (ASSETS.parent / "_vendor" / "dagre.min.js").read_text(encoding="utf-8")
    assert f"@dagrejs/dagre {tools['@dagrejs/dagre']} from npm" in vendored


# --------------------------------------------------------------------------- data contract


@dataclass
class Typedef:
    """A JSDoc typedef: an object's properties (name -> (type, optional)), or another type."""

    name: str
    type: str
    properties: dict[str, tuple[str, bool]] = field(default_factory=dict)


def _braced(text: str, start: int) -> tuple[str, int]:
    """The text inside the braces opening at `start`, and the index after them."""
    assert text[start] == "{", text[start:]
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start + 1 : index].strip(), index + 1
    raise AssertionError(f"unbalanced braces: {text[start:]}")


def typedefs(source: str) -> dict[str, Typedef]:
    """The `@typedef`s of a script, with their `@property` lines."""
    found: dict[str, Typedef] = {}
    for block in re.findall(r"/\*\*(.*?)\*/", source, re.DOTALL):
        text = re.sub(r"^\s*\* ?", "", block, flags=re.MULTILINE)
        at = text.find("@typedef {")
        if at < 0:
            continue
        kind, end = _braced(text, at + len("@typedef "))
        name = text[end:].split()[0]
        typedef = found[name] = Typedef(name, kind)
        for match in re.finditer(r"@property \{", text):
            kind, end = _braced(text, match.end() - 1)
            prop = re.match(r"\s*(\[?)(\w+)\]?", text[end:])
            assert prop is not None, text[end:]
            typedef.properties[prop.group(2)] = (kind, prop.group(1) == "[")
    return found


def _split(kind: str, separator: str) -> list[str]:
    """`kind` split at `separator` outside brackets."""
    parts, depth, current = [], 0, ""
    for char in kind:
        depth += {"(": 1, "[": 1, "<": 1, ")": -1, "]": -1, ">": -1}.get(char, 0)
        if char == separator and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()]


class Contract:
    """Checks values against the typedefs, and records which properties real data had."""

    def __init__(self, defs: dict[str, Typedef]) -> None:
        self.defs = defs
        self.seen: dict[str, set[str]] = {name: set() for name in defs}

    def problems(self, value: Any, kind: str, where: str) -> list[str]:
        kind = kind.strip()
        alternatives = _split(kind, "|")
        if len(alternatives) > 1:
            for alternative in alternatives:
                before = {name: set(keys) for name, keys in self.seen.items()}
                if not self.problems(value, alternative, where):
                    return []
                self.seen = before  # what a failed alternative saw is not evidence
            return [f"{where}: {value!r:.80} is none of {kind}"]
        if kind.startswith("(") and kind.endswith(")"):
            return self.problems(value, kind[1:-1], where)
        if kind.endswith("[]"):
            if not isinstance(value, list):
                return [f"{where}: not a list"]
            return [
                p
                for i, v in enumerate(value)
                for p in self.problems(v, kind[:-2], where + f"[{i}]")
            ]
        if kind.startswith("[") and kind.endswith("]"):
            items = _split(kind[1:-1], ",")
            if not isinstance(value, list) or len(value) != len(items):
                return [f"{where}: {value!r:.80} is not a tuple of {len(items)}"]
            return [
                p
                for i, (v, k) in enumerate(zip(value, items, strict=True))
                for p in self.problems(v, k, where + f"[{i}]")
            ]
        if kind.startswith("Record<string,"):
            if not isinstance(value, dict):
                return [f"{where}: not an object"]
            inner = kind.removeprefix("Record<string,").removesuffix(">")
            return [p for k, v in value.items() for p in self.problems(v, inner, f"{where}.{k}")]
        if kind in self.defs:
            return self._typedef(value, self.defs[kind], where)
        if " & " in kind:
            return self._object(value, [self.defs[part] for part in _split(kind, "&")], where)
        simple = {
            "null": lambda v: v is None,
            "string": lambda v: isinstance(v, str),
            "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
            "unknown": lambda v: True,
        }
        assert kind in simple, f"{where}: the test does not understand the type {kind!r}"
        return [] if simple[kind](value) else [f"{where}: {value!r:.80} is not a {kind}"]

    def _typedef(self, value: Any, typedef: Typedef, where: str) -> list[str]:
        if typedef.properties:
            return self._object(value, [typedef], where)
        return self.problems(value, typedef.type, where)

    def _object(self, value: Any, parts: list[Typedef], where: str) -> list[str]:
        """An object of `parts` (one typedef, or the typedefs of an intersection)."""
        if not isinstance(value, dict):
            return [f"{where}: {value!r:.80} is not an object"]
        properties = {k: p for part in parts for k, p in part.properties.items()}
        problems = [f"{where}.{key}: not in the typedef" for key in value if key not in properties]
        for key, (kind, optional) in properties.items():
            if key not in value:
                if not optional:
                    problems.append(f"{where}.{key}: missing")
                continue
            problems += self.problems(value[key], kind, f"{where}.{key}")
        if not problems:
            for part in parts:
                self.seen[part.name] |= set(value) & set(part.properties)
        return problems


@pytest.fixture
def pages(ws: Workspace) -> list[dict[str, Any]]:
    """The data of real pages: a replayed snapshot's (every verdict), the same lineage now,
    one whose focus has a git commit, and a graph without records."""
    replayed = page_data(replayed_forecast(ws))
    roles = {name: res.role for name, res in ws.resources.items()}
    forecast = build_graph(ws.store, FORECAST_REF, roles)
    step = StepInfo(name="report", run_id="run-report", code_version="3", git_commit="0a1b2c3d")
    ws.store.commit(
        [
            LineageRecord(
                ref="results/report",
                version=version_of("results/report"),
                step=step,
                inputs=((FORECAST_REF, forecast.nodes[forecast.focus].version or ""),),
            )
        ]
    )
    report = build_graph(ws.store, "results/report", roles)
    # The page reads the data back from JSON: compare what it reads, not Python's types.
    return [
        orjson.loads(orjson.dumps(data))
        for data in (replayed, page_data(forecast), page_data(report), page_data(tricky()))
    ]


def test_the_typedefs_name_exactly_the_keys_of_a_real_pages_data(
    pages: list[dict[str, Any]],
) -> None:
    defs = typedefs((ASSETS / "data.js").read_text(encoding="utf-8"))
    contract = Contract(defs)
    for index, data in enumerate(pages):
        assert contract.problems(data, "PageData", f"page{index}") == []
    # Every property a typedef names is one some real page carries.
    for name, typedef in defs.items():
        assert contract.seen[name] == set(typedef.properties), name
    assert "replay" in pages[0] and "replay" not in pages[1]


def test_a_drifted_key_is_caught() -> None:
    """The check above can fail: a key page_content adds, or one it drops."""
    defs = typedefs((ASSETS / "data.js").read_text(encoding="utf-8"))
    data = orjson.loads(orjson.dumps(page_data(tricky())))
    data["groups"][0]["parts"]["extra"] = []
    del data["counts"]["edges"]
    problems = Contract(defs).problems(data, "PageData", "page")
    assert problems == [
        "page.groups[0].parts.extra: not in the typedef",
        "page.counts.edges: missing",
    ]
