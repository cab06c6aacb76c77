"""A refusal changes nothing: a step refused for any one of its outputs or inputs leaves no claim
of its other outputs and no observation of its inputs, so it blocks no other step.

Each case below starts a step with a good output (`inter/good`) and a source input never seen
before (`src/fresh.csv`, which a started step would observe), plus one bad output or input. The
step is refused; the lineage store's files are byte for byte as before (journal included) and a
fresh reader sees the same lineage; then another step writes `inter/good` and reads the source.
Script API here; the Dagster IO manager (real Spark, real materializations) at the end.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import (
    DwsError,
    InvalidResourceRefError,
    LineageBuilder,
    LineageConflictError,
    LineageConsistencyError,
    ResourceRef,
    UnknownRefStateError,
    UnknownResourceError,
    Workspace,
)
from dws_dagster.errors import DataNotFoundError
from dws_dagster.workspace.definition import Workspace as WorkspaceClass
from dws_dagster.workspace.records import LineageRecord, StepInfo
from tests.conftest import run_step, tree_state, write

GOOD = "inter/good"
FRESH = "src/fresh.csv"


def lineage_state(ws: Workspace) -> dict[str, Any]:
    """The lineage as a new process reads it: every ref's owner, record, attempt, unknown."""
    return {ref: state.to_json() for ref, state in Workspace.open(ws.root).store.items()}


def store_files(ws: Workspace) -> dict[str, str]:
    return tree_state(ws.meta_dir / "lineage")


@pytest.fixture
def busy(ws: Workspace, tmp_path: Path) -> Workspace:
    """Lineage to refuse against: `prep` writes inter/prep from src/a.csv; `old_view` and
    `new_view` are built from two versions of src/a.csv; `broken` failed leaving partial data
    (unknown); `inter/link` is a symlink out of the resource."""
    write(ws.root / "data/src/a.csv", "a\n1\n")
    run_step(ws, "prep", ["src/a.csv"], {"inter/prep": "A\n1\n"})
    run_step(ws, "old_view", ["src/a.csv"], {"inter/old_view": "old\n"})
    write(ws.root / "data/src/a.csv", "a\n2\n")
    run_step(ws, "new_view", ["src/a.csv"], {"inter/new_view": "new\n"})
    write(ws.local_path("inter/broken") / "part-0.csv", "half")
    ws.store.fail(
        [
            LineageRecord(
                ref="inter/broken", version=None, status="failed", step=StepInfo(name="broken")
            )
        ],
        unknown=["inter/broken"],
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.resource_root("inter") / "link").symlink_to(outside, target_is_directory=True)
    write(ws.root / "data/src/fresh.csv", "f\n1\n")
    return ws


def step(
    ws: Workspace, *, inputs: list[Any] = (), outputs: list[Any] = (), results: str | None = None
) -> LineageBuilder:
    builder = (
        LineageBuilder()
        .with_step_name("refused")
        .with_parameters({})
        .with_workspace_directory(ws.root)
        .with_input_ref(FRESH)
        .with_output_ref(GOOD)
    )
    for item in inputs:
        builder = (
            builder.with_input_ref(item)
            if not isinstance(item, Path)
            else builder.with_input_path(item)
        )
    for item in outputs:
        builder = (
            builder.with_output_ref(item)
            if not isinstance(item, Path)
            else builder.with_output_path(item)
        )
    if results is not None:
        builder = builder.as_results_step(ws.root / results)
    return builder


#: (id, error, fragment of its message, the step: inputs and outputs beside the good ones)
CASES: list[tuple[str, type[DwsError], str, Callable[[Workspace], LineageBuilder]]] = [
    (
        "output through a symlink out of its resource",
        InvalidResourceRefError,
        "leaves resource 'inter' through the symlink",
        lambda ws: step(ws, outputs=["inter/link/out"]),
    ),
    (
        "results folder through a symlink",
        UnknownResourceError,
        "not inside any local resource",
        lambda ws: step(ws, results="data/inter/link/exp"),
    ),
    (
        "results folder another step writes",
        LineageConflictError,
        "step 'prep' writes",
        lambda ws: step(ws, results="data/inter/prep"),
    ),
    (
        "output another step writes",
        LineageConflictError,
        "step 'prep' writes inter/prep",
        lambda ws: step(ws, outputs=["inter/prep"]),
    ),
    (
        "output inside another step's ref",
        LineageConflictError,
        "(which contains it)",
        lambda ws: step(ws, outputs=["inter/prep/sub"]),
    ),
    (
        "output in an unknown resource",
        UnknownResourceError,
        "nosuch",
        lambda ws: step(ws, outputs=[ResourceRef("nosuch", "x")]),
    ),
    (
        "output outside every resource",
        UnknownResourceError,
        "not inside any local resource",
        lambda ws: step(ws, outputs=[ws.root / "elsewhere"]),
    ),
    (
        "output in the results snapshot folder",
        InvalidResourceRefError,
        "snapshot copies",
        lambda ws: step(ws, outputs=["results/snapshots/x"]),
    ),
    (
        "input in an unknown resource",
        UnknownResourceError,
        "nosuch",
        lambda ws: step(ws, inputs=[ResourceRef("nosuch", "y")]),
    ),
    (
        "input with no data",
        DataNotFoundError,
        "inter/nothing",
        lambda ws: step(ws, inputs=["inter/nothing"]),
    ),
    (
        "input of unknown state",
        UnknownRefStateError,
        "inter/broken",
        lambda ws: step(ws, inputs=["inter/broken"]),
    ),
    (
        "inputs of two versions of one ref",
        LineageConsistencyError,
        "two versions of ref src/a",
        lambda ws: step(ws, inputs=["inter/old_view", "inter/new_view"]),
    ),
]


@pytest.mark.parametrize(
    ("error", "fragment", "make"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_refused_step_leaves_no_claim_and_no_observation(
    busy: Workspace,
    error: type[DwsError],
    fragment: str,
    make: Callable[[Workspace], LineageBuilder],
) -> None:
    ws = busy
    files, lineage = store_files(ws), lineage_state(ws)
    with pytest.raises(error) as info:
        make(ws).eval()
    assert fragment in str(info.value)
    assert store_files(ws) == files
    assert lineage_state(ws) == lineage
    assert ws.store.get(GOOD) is None and ws.store.get(FRESH) is None
    # Nothing blocks the step that writes the good ref, nor changes what it reads.
    run_step(ws, "writer", [FRESH], {GOOD: "g\n"})
    good = ws.store.get(GOOD)
    assert good.owner == "writer" and good.status == "ok"
    assert ws.store.get(FRESH).status == "source"


def test_a_claim_made_while_the_step_is_checked_refuses_it_whole(
    busy: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another step claims the second output while this one is being checked (injected at
    the check of each output's path, the seam where the race opens): the step is refused and
    holds no claim of its first output."""
    ws = busy
    rival_ref = "inter/contested"
    real = WorkspaceClass.check_writable

    def check_writable(self: Workspace, ref: Any) -> ResourceRef:
        if str(ref) == rival_ref and Workspace.open(ws.root).store.get(rival_ref) is None:
            Workspace.open(ws.root).store.claim("rival", [rival_ref])  # another store object
        return real(self, ref)

    monkeypatch.setattr(WorkspaceClass, "check_writable", check_writable)
    with pytest.raises(LineageConflictError, match="step 'rival' writes inter/contested"):
        step(ws, outputs=[rival_ref]).eval()
    monkeypatch.undo()
    assert ws.store.get(GOOD) is None and ws.store.get(FRESH) is None
    assert Workspace.open(ws.root).store.get(rival_ref).owner == "rival"
    run_step(ws, "writer", [FRESH], {GOOD: "g\n"})
    assert ws.store.get(GOOD).owner == "writer"


def test_a_refused_addition_to_a_running_step_writes_nothing(busy: Workspace) -> None:
    """Inputs and outputs added while the step runs are checked the same way: a refused one
    adds nothing, and the step still completes with what it had."""
    ws = busy
    with (
        LineageBuilder()
        .with_step_name("adder")
        .with_parameters({})
        .with_workspace_directory(ws.root)
        .with_no_inputs()
        .eval() as lineage
    ):
        files = store_files(ws)
        for action, error in (
            (lambda: lineage.add_output_ref("inter/link/x"), InvalidResourceRefError),
            (lambda: lineage.add_output_ref("inter/prep"), LineageConflictError),
            (lambda: lineage.add_input_ref("inter/broken"), UnknownRefStateError),
        ):
            with pytest.raises(error):
                action()
            assert store_files(ws) == files
        lineage.add_output_ref(GOOD)
        write(ws.local_path(GOOD) / "part-0.csv", "g\n")
    assert ws.store.get(GOOD).owner == "adder"
    assert json.loads(json.dumps(ws.store.get(GOOD).record["inputs"])) == []


#: Bad outputs and inputs a step may hold beside good ones, in any number and order.
BAD_OUTPUTS = {
    "escape": "inter/link/out",
    "conflict": "inter/prep",
    "nested": "inter/prep/sub",
    "resource": ResourceRef("nosuch", "x"),
}
BAD_INPUTS = {
    "missing": "inter/nothing",
    "unknown": "inter/broken",
    "resource": ResourceRef("nosuch", "y"),
}
_EXAMPLES = itertools.count()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_mix_of_good_and_bad_refs_is_all_or_nothing(
    busy: Workspace, data: st.DataObject
) -> None:
    """Good outputs and source inputs mixed with any bad ones, in any order: with one bad ref
    or more the step is refused and the store's files are unchanged; with none, every output
    is claimed and every source input observed."""
    ws = busy
    n = next(_EXAMPLES)  # fresh names each example: the workspace is shared by all
    goods = data.draw(st.integers(0, 3), label="good outputs")
    sources = data.draw(st.integers(0, 2), label="source inputs")
    bad_out = data.draw(st.lists(st.sampled_from(sorted(BAD_OUTPUTS)), max_size=2), "bad out")
    bad_in = data.draw(st.lists(st.sampled_from(sorted(BAD_INPUTS)), max_size=2), "bad in")
    mixed = data.draw(st.booleans(), label="two versions of one input")
    outputs = [f"inter/g{n}_{i}" for i in range(goods)] + [BAD_OUTPUTS[k] for k in bad_out]
    inputs = [f"src/f{n}_{i}.csv" for i in range(sources)] + [BAD_INPUTS[k] for k in bad_in]
    inputs += ["inter/old_view", "inter/new_view"] if mixed else []
    for i in range(sources):
        write(ws.root / f"data/src/f{n}_{i}.csv", f"{n},{i}\n")
    builder = (
        LineageBuilder()
        .with_step_name(f"mix{n}")
        .with_parameters({})
        .with_workspace_directory(ws.root)
    )
    builder = builder.with_no_inputs() if not inputs else builder
    for item in data.draw(
        st.permutations([("in", i) for i in inputs] + [("out", o) for o in outputs]), label="order"
    ):
        builder = (
            builder.with_input_ref(item[1]) if item[0] == "in" else builder.with_output_ref(item[1])
        )
    files = store_files(ws)
    if bad_out or bad_in or mixed:
        with pytest.raises(DwsError):
            builder.eval()
        assert store_files(ws) == files
        return
    lineage = builder.eval()
    for ref in outputs:
        assert ws.store.get(ref).owner == f"mix{n}"
    for ref in inputs:
        assert ws.store.get(ref).status == "source"
    assert sorted(str(ref) for ref in lineage.outputs) == sorted(outputs)


# ------------------------------------------------------------------ Dagster IO manager


@pytest.mark.spark
def test_refused_asset_leaves_no_claim(spark, tmp_path: Path) -> None:
    """Two assets each read workspace data by path in their bodies (inputs only the Spark plan
    shows, checked when the output is handled): one an unknown ref, one two refs built from
    two versions of one source. Both are refused, nothing reaches the store, and their refs
    stay free for other steps. One Dagster run for both (Spark is slow)."""
    from dagster import DagsterInstance, asset, materialize

    from dws_dagster import dws_ref
    from tests.support.pipeline import io_manager, make_workspace

    ws = make_workspace(tmp_path / "ws")
    src = ws.local_path("source-data/versions.csv")
    write(src, "v\n1\n")
    run_step(ws, "old_view", ["source-data/versions.csv"], {"intermediate-data/old": "x\n1\n"})
    write(src, "v\n2\n")
    run_step(ws, "new_view", ["source-data/versions.csv"], {"intermediate-data/new": "x\n2\n"})
    write(ws.local_path("intermediate-data/partial") / "part-0.csv", "x\n3\n")
    ws.store.fail(
        [
            LineageRecord(
                ref="intermediate-data/partial",
                version=None,
                status="failed",
                step=StepInfo(name="partial_writer"),
            )
        ],
        unknown=["intermediate-data/partial"],
    )
    folder = {
        name: str(ws.local_path(f"intermediate-data/{name}")) for name in ("old", "new", "partial")
    }

    @asset(metadata=dws_ref("intermediate-data", "from_partial"))
    def from_partial():  # unannotated: Dagster cannot resolve string annotations here
        return spark.read.option("header", True).csv(folder["partial"])

    @asset(metadata=dws_ref("intermediate-data", "mixed"))
    def mixed():
        read = spark.read.option("header", True)
        return read.csv(folder["old"]).unionByName(read.csv(folder["new"]))

    files, lineage = store_files(ws), lineage_state(ws)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [from_partial, mixed],
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            raise_on_error=False,
        )
    assert not result.success
    errors = {
        event.step_key: event.step_failure_data.error for event in result.get_step_failure_events()
    }
    assert set(errors) == {"from_partial", "mixed"}
    text = {key: error.to_string() for key, error in errors.items()}
    assert "UnknownRefStateError" in text["from_partial"]
    assert "intermediate-data/partial" in text["from_partial"]
    assert "LineageConsistencyError" in text["mixed"]
    assert "two versions of ref source-data/versions.csv" in text["mixed"]
    assert store_files(ws) == files
    assert lineage_state(ws) == lineage
    for name in ("from_partial", "mixed"):
        run_step(ws, f"{name}_by_script", [], {f"intermediate-data/{name}": "y\n"})
        assert ws.store.get(f"intermediate-data/{name}").owner == f"{name}_by_script"
