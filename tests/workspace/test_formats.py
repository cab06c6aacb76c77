"""The formats of what dws_dagster reads back (`workspace/formats.py`), each declared once and
compiled into its check (`workspace/typed_checks.py`), against bad input.

The samples are what a real workspace holds: its config and resources files, and its store's
rows read with a plain sqlite3 connection (record bodies, refs, the snapshot index with tags,
results copies and the code's git state). Each is damaged in one place (a value replaced by
another JSON value, deleted, or nested in a list). Then either its format refuses it, with a
`WorkspaceConfigError` naming the file, a field on the way to the damage and what to do; or
its format accepts it, and the code that reads it afterwards works on it (nothing but a
`DwsError` escapes) and every name in it that becomes a path stays inside its folder.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import DwsError, LineageBuilder, Workspace, WorkspaceConfigError
from dws_dagster.snapshots.index import SnapshotInfo
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace import formats
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.resources import Resource
from dws_dagster.workspace.shapes import SNAPSHOT_HASH, results_folder_ok
from dws_dagster.workspace.swap import kept_version_path
from dws_dagster.workspace.typed_checks import AtLeast, Items, Rule, compile_check
from dws_dagster.workspace.versions import MARKER_SCHEME, checked_marker
from tests.bad_inputs.json_damage import json_values, paths_in, replaced
from tests.conftest import run_step, write
from tests.replay.replay_steps import make_git_ws

Sample = tuple[str, formats.Format, Any]


def build(root: Path) -> Workspace:
    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    ws.add_resource("code", "code", path="code")
    make_git_ws(ws)  # the code's git state goes into each snapshot
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"}, {"scale": 2})
    run_step(
        ws,
        "train",
        ["inter/prep"],
        {},
        {"gamma": 0.1},
        results={"mae": 1.5},
        results_dir="results/exp",
    )
    # A script step: its command line, the folder it ran in and its code are recorded.
    with contextlib.chdir(ws.root / "code"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", [str(ws.root / "code/prep.py"), "--seed", "1"])
        builder = (
            LineageBuilder()
            .as_script_step()
            .with_parameters({})
            .with_workspace_directory(ws.root)
            .with_input_ref("inter/prep")
            .with_code_ref("code/prep.py")
        )
        with builder.eval() as lineage:
            lineage.add_output_ref("inter/feat")
            write(ws.local_path("inter/feat") / "part-0.csv", "f\n")
    take_snapshot(ws, "v1", "first")
    take_snapshot(ws, "v1b")  # a second tag of the same snapshot
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "B\n2\n"}, {"scale": 3})
    with (
        contextlib.suppress(RuntimeError),
        LineageBuilder()
        .with_step_name("broken")
        .with_parameters({})
        .with_workspace_directory(ws.root)
        .with_no_inputs()
        .eval() as lineage,
    ):
        lineage.add_output_ref("inter/broken")
        raise RuntimeError("the step failed")
    take_snapshot(ws, "v2", "second")
    return ws


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> list[Sample]:
    ws = build(tmp_path_factory.mktemp("formats") / "ws")
    meta = ws.meta_dir
    found: list[Sample] = [
        ("config.json", formats.CONFIG, orjson.loads((meta / "config.json").read_bytes())),
        ("resources.json", formats.RESOURCES, orjson.loads((meta / "resources.json").read_bytes())),
    ]
    connection = sqlite3.connect(meta / "store.db")
    try:
        bodies = [
            orjson.loads(body) for (body,) in connection.execute("SELECT body FROM dws_records")
        ]
        refs = [ref for (ref,) in connection.execute("SELECT ref FROM dws_refs")]
        tags: dict[str, list[str]] = {}
        for digest, tag in connection.execute(
            "SELECT hash, tag FROM dws_snapshot_tags ORDER BY position, tag"
        ):
            tags.setdefault(digest, []).append(tag)
        rows = [
            {
                "hash": digest,
                "tags": tags.get(digest, []),
                "message": message,
                "created": created,
                "metrics": None if metrics is None else orjson.loads(metrics),
                "results": orjson.loads(results),
                "resources": None if resources is None else orjson.loads(resources),
            }
            for digest, message, created, metrics, results, resources in connection.execute(
                "SELECT hash, message, created, metrics, results, resources FROM dws_snapshots "
                "ORDER BY position"
            )
        ]
    finally:
        connection.close()
    found += [("store record", formats.RECORD, body) for body in bodies]
    found += [("store ref", formats.REF, ref) for ref in refs]
    found += [("store snapshot", formats.SNAPSHOT_ROW, row) for row in rows]
    # The marker Spark data gets (no Spark here): the version and the record a write leaves.
    found.append(
        (
            "_dws_version.json",
            formats.MARKER,
            {
                "format": 1,
                "scheme": MARKER_SCHEME,
                "version": "0" * 32,
                "rows": 2,
                "columns": [["a", "bigint"]],
                "lineage": bodies[0],
            },
        )
    )
    return found


def test_the_samples_hold_every_part_of_each_format(samples: list[Sample]) -> None:
    """Fields the damage below reaches: without them, the fuzzing would never test them."""
    keys = {key for _, _, data in samples if isinstance(data, dict) for key in data}
    records = [data for name, _, data in samples if name == "store record"]
    steps = [record["step"] for record in records if record.get("step")]
    rows = [data for name, _, data in samples if name == "store snapshot"]
    assert {"format", "resources", "ref", "version", "provenance", "inputs", "step"} <= keys
    assert any(record.get("status") == "failed" for record in records)
    assert any(record.get("metrics") for record in records)
    assert any(
        step.get("working_folder") == "code" and step.get("command_line") and step.get("code")
        for step in steps
    )
    assert any(len(row["tags"]) == 2 and row["results"] and row["resources"] for row in rows)


def test_each_format_accepts_what_dws_dagster_writes(samples: list[Sample]) -> None:
    for name, fmt, data in samples:
        assert fmt.problem(data) is None, (name, data)
        assert formats.check(fmt, data, name) is data  # nothing copied
        read_back(name, data)


def read_back(name: str, data: Any) -> None:
    """What dws_dagster does with an accepted value; names that become paths are followed."""
    base = Path("/resource")
    if name == "store ref":
        ResourceRef.parse(data)
    elif name == "store record":
        record = LineageRecord.from_json(data)
        refs = [record.ref, *(ref for ref, _ in record.inputs), *record.provenance]
        if record.step is not None:
            refs += [ref for ref, _ in record.step.code]
            folder = record.step.working_folder
            if folder is not None:
                assert (base / folder).resolve().is_relative_to(base), folder
        for ref in refs:
            ResourceRef.parse(ref)
        if record.version is not None:
            kept_version_path(base, "a", record.version)
    elif name == "store snapshot":
        info = SnapshotInfo(**data)
        assert SNAPSHOT_HASH.fullmatch(info.hash) and info.name
        orjson.dumps(info.to_json())
        for entry in info.results:
            ResourceRef.parse(entry["ref"])
            assert results_folder_ok(entry["folder"])
            assert (base / entry["folder"]).resolve().is_relative_to(base / "snapshots")
    elif name == "_dws_version.json":
        marker = checked_marker(data)
        if marker is not None:
            kept_version_path(base, "a", marker["version"])
            if marker.get("lineage") is not None:
                read_back("store record", marker["lineage"])
    elif name == "resources.json":
        for item in data["resources"]:
            with contextlib.suppress(DwsError):  # checked further by `make_resource`
                Resource.from_json(item, source=Path(name))
    elif name == "config.json":
        replay = data.get("replay_of")
        assert replay is None or SNAPSHOT_HASH.fullmatch(replay["snapshot"])
        assert data.get("name") is None or isinstance(data["name"], str)


#: Names that would lead a read, write or delete out of their folder, or that no writer makes.
BAD_NAMES = [
    "",
    ".",
    "..",
    "../../outside",
    "/etc/passwd",
    "a/../b",
    "a//b",
    "a\\b",
    "a\x00b",
    "x" * 300,
    "snapshots/../..",
    "snapshots",
    "has space",
    "current",
    "src/" + "é" * 200,
]

#: What a ref may be although it is in `BAD_NAMES`: a resource's name alone.
REF_OK = {"snapshots", "current"}
#: Every field of each sample whose value becomes a path ("*": each key of that mapping), with
#: what of `BAD_NAMES` it may hold: a version is one file name (`@<version>` names a kept
#: copy), a working folder any relative folder inside the workspace.
NAME_FIELDS: dict[str, list[tuple[tuple[Any, ...], set[str]]]] = {
    "store ref": [((), REF_OK)],
    "store record": [
        (("ref",), REF_OK),
        (("version",), {".", "..", "has space", "current", "snapshots"}),
        (("inputs", 0, "ref"), REF_OK),
        (("provenance", "*"), REF_OK),
        (("step", "code", 0, "ref"), REF_OK),
        (
            ("step", "working_folder"),
            {".", "snapshots", "has space", "current", "x" * 300, "src/" + "é" * 200},
        ),
    ],
    "store snapshot": [
        (("hash",), set()),
        (("tags", 0), {"snapshots"}),
        (("results", 0, "ref"), REF_OK),
        (("results", 0, "folder"), set()),
    ],
    # Its `lineage` is checked as a record by `checked_marker`, apart: a damaged record drops
    # the record, not the data's version.
    "_dws_version.json": [(("version",), {".", "..", "has space", "current", "snapshots"})],
}


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def with_name(value: Any, path: tuple[Any, ...], name: str) -> tuple[Any, tuple[Any, ...]]:
    """`value` with `name` at `path` (for "*", instead of the first key of that mapping), and
    where it is."""
    if path[-1:] == ("*",):
        mapping = dict(at(value, path[:-1]))
        mapping[name] = mapping.pop(next(iter(mapping)))
        return replaced(value, path[:-1], mapping, "replace"), (*path[:-1], name)
    return replaced(value, path, name, "replace"), path


def holds(value: Any, path: tuple[Any, ...]) -> bool:
    try:
        found = at(value, path[:-1] if path[-1:] == ("*",) else path)
    except (KeyError, IndexError, TypeError):
        return False
    return bool(found) if path[-1:] == ("*",) else found is not None


@pytest.mark.parametrize("name", sorted(NAME_FIELDS))
def test_every_name_that_becomes_a_path_is_refused_where_it_is(
    samples: list[Sample], name: str
) -> None:
    fields = NAME_FIELDS[name]
    # The sample holding every such field (for records, the script step's).
    _, fmt, value = next(
        sample
        for sample in samples
        if sample[0] == name and all(holds(sample[2], path) for path, _ in fields)
    )
    for path, allowed in fields:
        for bad in BAD_NAMES:
            damaged, where = with_name(value, path, bad)
            problem = fmt.problem(damaged)
            if bad in allowed:
                assert problem is None, (name, path, bad, problem)
            else:
                assert problem is not None and problem[0] == where, (name, path, bad, problem)


@pytest.fixture(scope="module")
def sites(samples: list[Sample]) -> dict[str, list[tuple[int, tuple[Any, ...]]]]:
    """Every (sample, path into it) the damage may reach, by the samples' names."""
    found: dict[str, list[tuple[int, tuple[Any, ...]]]] = {}
    for i, (name, _, data) in enumerate(samples):
        found.setdefault(name, []).extend((i, path) for path in paths_in(data))
    return found


@settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_damage_is_refused_where_it_is_or_read_safely(
    samples: list[Sample],
    sites: dict[str, list[tuple[int, tuple[Any, ...]]]],
    data: st.DataObject,
) -> None:
    kind = data.draw(st.sampled_from(sorted(sites)))  # each format as often as the others
    index, path = data.draw(st.sampled_from(sites[kind]))
    name, fmt, value = samples[index]
    new = data.draw(json_values() | st.sampled_from(BAD_NAMES) | st.text(max_size=8))
    renames = bool(path) and isinstance(path[-1], str)
    action = data.draw(
        st.sampled_from(["replace", "delete", "nest", "rename"][: 4 if renames else 3])
        if path
        else st.just("replace")
    )
    if action == "rename":
        if not isinstance(new, str):
            new = str(new)
        mapping = dict(at(value, path[:-1]))
        mapping[new] = mapping.pop(path[-1])
        damaged = replaced(value, path[:-1], mapping, "replace")
        places = [path, (*path[:-1], new)]
    else:
        damaged = replaced(value, path, new, action)
        places = [path]
    problem = fmt.problem(damaged)
    if problem is None:
        read_back(name, damaged)
        return
    location, message = problem
    # The one damaged place is on the way to what is reported, or inside it.
    assert any(list(location[: len(place)]) == list(place[: len(location)]) for place in places), (
        places,
        problem,
    )
    with pytest.raises(WorkspaceConfigError) as refused:
        formats.check(fmt, damaged, name, advice="do this")
    text = str(refused.value)
    assert text.startswith(f"{name} is corrupt") and text.endswith(f"{message}; do this")
    assert formats.field_path(list(location)) in text and "\n" not in text


# -------------------------------------------------------------- the compiler itself


Name = Annotated[str, Rule(lambda v: v.isalpha(), lambda v: f"{v!r} is not a name")]


class Inner(TypedDict):
    name: Name
    size: NotRequired[Annotated[int, AtLeast(0)]]


class Outer(TypedDict):
    format: Literal[1]
    kind: NotRequired[Literal["a", "b"]]
    inner: NotRequired[Inner | None]
    items: NotRequired[list[Inner]]
    names: NotRequired[dict[Name, str]]
    pair: NotRequired[Annotated[list[str], Items(2)]]
    anything: NotRequired[Any]
    obj: NotRequired[dict[str, Any]]


OUTER = compile_check(Outer)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"format": 1}, None),
        ({"format": 1, "anything": object(), "unknown": 1}, None),
        ({"format": 1, "inner": None, "names": {}, "pair": ["x", "y"], "obj": {1: 2}}, None),
        ([], ((), "Input should be a valid dictionary")),
        ({}, (("format",), "Field required")),
        ({"format": True}, (("format",), "Input should be 1")),
        ({"format": 1, "kind": "c"}, (("kind",), "Input should be 'a' or 'b'")),
        ({"format": 1, "inner": {"name": "x1"}}, (("inner", "name"), "'x1' is not a name")),
        (
            {"format": 1, "inner": {"name": 7}},
            (("inner", "name"), "Input should be a valid string"),
        ),
        (
            {"format": 1, "inner": {"name": "x", "size": -1}},
            (("inner", "size"), "Input should be greater than or equal to 0"),
        ),
        (
            {"format": 1, "items": [{"name": "a"}, {}]},
            (("items", 1, "name"), "Field required"),
        ),
        ({"format": 1, "names": {"a": "x", "b2": "y"}}, (("names", "b2"), "'b2' is not a name")),
        ({"format": 1, "names": {"a": 1}}, (("names", "a"), "Input should be a valid string")),
        ({"format": 1, "pair": ["x"]}, (("pair",), "List should have 2 items, not 1")),
        ({"format": 1, "pair": ["x", None]}, (("pair", 1), "Input should be a valid string")),
        ({"format": 1, "obj": []}, (("obj",), "Input should be a valid dictionary")),
    ],
)
def test_a_compiled_check_names_the_first_problem(value: Any, problem: Any) -> None:
    assert OUTER(value) == problem


def test_known_good_values_are_accepted_in_bulk_and_a_bad_one_still_found() -> None:
    calls: list[str] = []

    def alpha(value: str) -> bool:
        calls.append(value)
        return value.isalpha()

    known = {"a", "b"}
    names = compile_check(dict[Annotated[str, Rule(alpha, repr, known=known)], int])
    assert names({"a": 1, "b": 2}) is None and calls == []  # no call per key
    assert names({"a": 1, "c": 2}) is None and "c" in calls
    assert names({"a": 1, "d2": 2, "e3": 3}) == (("d2",), "'d2'")


@pytest.mark.parametrize(
    "declaration",
    [float, tuple[str, str], Literal[1, "a"], str | int, Annotated[str, AtLeast(1)], set[str]],
)
def test_a_form_the_compiler_does_not_know_is_refused_when_declared(declaration: Any) -> None:
    with pytest.raises(TypeError):
        compile_check(declaration)
