"""Step parameters that cannot be recorded are refused with InvalidParameterError naming the
parameter, never RecursionError or TypeError (issue 17, class 4): deep nesting, cycles,
containers that are not mappings; an argparse.Namespace is taken as its vars(), as in Data
Workspaces. The Dagster side (asset config) is in test_redaction_dagster.py."""

from __future__ import annotations

import argparse
import datetime as dt
import enum
import math
from pathlib import Path, PurePosixPath
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import InvalidParameterError, LineageBuilder, Workspace
from dws_dagster.lineage import (
    CmdLineParameter,
    ResourceRef,
    add_lineage_parameters_to_arg_parser,
    get_lineage_parameter_values,
)
from dws_dagster.workspace.records import (
    MAX_PARAMETER_DEPTH,
    REDACTED,
    sanitize,
    sanitize_parameters,
)
from tests.conftest import tree_state, write


def nested(levels: int, kind: str = "dict") -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value} if kind == "dict" else [value]
    return value


def builder(ws: Workspace, params: Any) -> LineageBuilder:
    return (
        LineageBuilder()
        .with_step_name("train")
        .with_parameters(params)
        .with_workspace_directory(ws.root)
        .with_no_inputs()
    )


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_ten_thousand_levels_are_refused_naming_the_parameter_and_the_limit(kind: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        sanitize_parameters({"grid": nested(10_000, kind)})
    message = str(info.value)
    assert "'grid" in message and f"{MAX_PARAMETER_DEPTH} levels" in message
    assert len(message) < 400  # the path inside is shortened, not 10,000 segments long


def test_the_depth_limit_is_exact() -> None:
    assert sanitize_parameters({"p": nested(MAX_PARAMETER_DEPTH)})["p"] is not None
    with pytest.raises(InvalidParameterError, match=f"deeper than {MAX_PARAMETER_DEPTH}"):
        sanitize_parameters({"p": nested(MAX_PARAMETER_DEPTH + 1)})


def cycles() -> list[tuple[str, Any]]:
    a: dict[str, Any] = {"x": 1}
    a["me"] = a
    b: list[Any] = [1]
    b.append(b)
    c: dict[str, Any] = {"items": []}
    c["items"].append({"parent": c})
    return [("dict", a), ("list", b), ("through a list", c)]


@pytest.mark.parametrize(("name", "value"), cycles())
def test_cycles_are_refused_naming_the_parameter(name: str, value: Any) -> None:
    with pytest.raises(InvalidParameterError, match=r"'cfg.*cycle"):
        sanitize_parameters({"cfg": value})


def test_shared_values_that_are_no_cycle_are_recorded() -> None:
    shared = {"lr": 0.1}
    assert sanitize_parameters({"a": [shared, shared], "b": shared}) == {
        "a": [{"lr": 0.1}, {"lr": 0.1}],
        "b": {"lr": 0.1},
    }


@pytest.mark.parametrize(
    "params", [[1, 2], {1, 2}, ("a", 1), Opaque(), "gamma=0.1", 3, None, b"bytes"]
)
def test_parameters_that_are_not_a_mapping_are_refused(params: Any, ws: Workspace) -> None:
    before = tree_state(ws.root)
    with pytest.raises(InvalidParameterError, match="dict of name -> value"):
        builder(ws, params).eval()
    with pytest.raises(InvalidParameterError, match="dict of name -> value"):
        sanitize_parameters(params if params is not None else [])
    assert tree_state(ws.root) == before


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (Opaque(), "Opaque"),
        (b"x", "bytes"),
        ({("a", 1): 2}, "key of type tuple"),
        (2**70, "beyond 64 bits"),
        ("bad \ud800 text", "not valid Unicode"),
        ([{"k": {"v": object()}}], "object"),
        # a named tuple, yet not recorded as [name, subpath]
        (ResourceRef("src", "a"), "ResourceRef"),
        ([ResourceRef("src")], "ResourceRef"),
    ],
)
def test_values_that_cannot_be_recorded_name_where_they_are(value: Any, what: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        sanitize_parameters({"cfg": value})
    assert "'cfg" in str(info.value) and what in str(info.value)


@pytest.mark.parametrize("mode", ["builder", "add_param", "metrics"])
def test_the_script_api_refuses_before_anything_is_written(ws: Workspace, mode: str) -> None:
    deep = nested(10_000)
    a: dict[str, Any] = {}
    a["a"] = a
    write(ws.root / "data/src/x.csv", "a\n1\n")
    ws.store  # noqa: B018 - opened before the snapshot of the tree
    if mode == "builder":
        before = tree_state(ws.root)
        with pytest.raises(InvalidParameterError, match="'deep"):
            builder(ws, {"deep": deep, "ok": 1}).eval()
        assert tree_state(ws.root) == before
        return
    with builder(ws, {"ok": 1}).as_results_step(ws.root / "results/exp").eval() as lineage:
        if mode == "add_param":
            with pytest.raises(InvalidParameterError, match="'cyclic.*cycle"):
                lineage.add_param("cyclic", a)
            lineage.add_param("fine", {"x": [1, 2]})
            lineage.write_results({"mae": 1.0})
        else:
            with pytest.raises(InvalidParameterError, match="metric 'mae"):
                lineage.write_results({"mae": deep})
            lineage.write_results({"mae": 1.0})
    record = ws.store.get("results/exp").record
    assert record["status"] == "ok"
    if mode == "add_param":
        assert record["parameters"] == {"ok": 1, "fine": {"x": [1, 2]}}


def test_an_argparse_namespace_is_taken_as_its_vars(ws: Workspace) -> None:
    parser = argparse.ArgumentParser()
    add_lineage_parameters_to_arg_parser(
        parser,
        [
            CmdLineParameter("gamma", 0.1, float, "gamma"),
            CmdLineParameter("db_password", "", str, "password"),
        ],
    )
    args = parser.parse_args(["--gamma", "0.5", "--db-password", "hunter2"])
    write(ws.root / "results/exp/out.txt", "x")
    with builder(ws, args).as_results_step(ws.root / "results/exp").eval():
        pass
    assert ws.store.get("results/exp").record["parameters"] == {
        "gamma": 0.5,
        "db_password": REDACTED,
    }
    assert get_lineage_parameter_values([], args) == {}


# --------------------------------------------------------------------------- properties


class Colour(enum.Enum):
    RED = "red"


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2),
    st.datetimes(),
    st.dates(),
    st.just(Colour.RED),
    st.just(PurePosixPath("/data/x")),
    st.binary(max_size=4),
    st.just(Opaque()),
    st.just(math.nan),
    st.complex_numbers(),
)
keys = st.one_of(
    st.text(max_size=10),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.tuples(st.integers()),
    st.none(),
)
values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(keys, children, max_size=4),
        st.frozensets(st.one_of(st.integers(), st.text(max_size=5)), max_size=4),
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=st.dictionaries(st.text(max_size=10), values, max_size=5))
def test_any_value_is_recorded_as_json_or_refused_cleanly(params: dict[str, Any]) -> None:
    try:
        clean = sanitize_parameters(params)
    except InvalidParameterError:
        return
    orjson.dumps(clean, option=orjson.OPT_SORT_KEYS)  # storable as the store stores it
    assert sanitize_parameters(clean) == clean  # and stable when read back


@settings(max_examples=100, deadline=None)
@given(
    depth=st.integers(min_value=1, max_value=300),
    kind=st.sampled_from(["dict", "list"]),
    wrap=st.sampled_from([list, tuple, dict]),
)
def test_any_depth_is_recorded_or_refused_by_the_limit(depth: int, kind: str, wrap: Any) -> None:
    value = nested(depth, kind)
    value = {"w": value} if wrap is dict else wrap([value])
    if depth + 1 <= MAX_PARAMETER_DEPTH:
        sanitize(value, path="p")
    else:
        with pytest.raises(InvalidParameterError, match=f"{MAX_PARAMETER_DEPTH} levels"):
            sanitize(value, path="p")


def test_dates_paths_and_enums_are_recorded_as_text(tmp_path: Path) -> None:
    assert sanitize_parameters(
        {"d": dt.date(2024, 1, 2), "p": PurePosixPath("/a/b"), "c": Colour.RED, "s": {3, 1, 2}}
    ) == {"d": "2024-01-02", "p": "/a/b", "c": "red", "s": [1, 2, 3]}
