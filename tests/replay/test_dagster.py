"""Replaying Dagster assets (`assets.replay_runs`): each recorded materialization run again as
a Dagster run on the instance, through the code location's definitions at the recorded commit,
in the scratch workspace; real Dagster, real Spark (the worker's own session), real git."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance

from dws_dagster import metadata_keys as keys
from dws_dagster.replay.compare import name_differing_columns
from dws_dagster.replay.dagster_runner import DagsterRunner
from dws_dagster.replay.planning import DAGSTER_ASSET, plan_replay
from dws_dagster.replay.run import (
    DIFFERS,
    FAILED,
    NON_DETERMINISTIC,
    REPRODUCED,
    run_plan,
)
from dws_dagster.replay.scratch import prepare_scratch
from dws_dagster.sensor.lineage_sensor import process_events
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.spark.column_diff import differing_columns
from tests.conftest import tree_state, write
from tests.replay.replay_steps import git

pytestmark = [pytest.mark.slow]

#: A code location: source data read by path, a configured step, and (with REPLAY_TEST_RANDOM
#: set when it runs) a column Spark fills at random.
DEFINITIONS = """\
import os
from dagster import Config, Definitions, asset
from pyspark.sql import DataFrame, SparkSession, functions as F
from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource, dws_ref

workspace = WORKSPACE


class Scale(Config):
    factor: int = 1


@asset(metadata=dws_ref("inter", "trips"))
def trips(workspace: WorkspaceResource) -> DataFrame:
    spark = SparkSession.builder.getOrCreate()
    path = str(workspace.workspace().local_path("src/trips.csv"))
    return spark.read.option("header", True).csv(path)


@asset(metadata=dws_ref("results", "scaled"))
def scaled(config: Scale, trips: DataFrame) -> DataFrame:
    out = trips.withColumn("fare", F.col("fare").cast("int") * config.factor)
    if os.environ.get("REPLAY_TEST_RANDOM"):
        out = out.withColumn("noise", F.rand())
    if os.environ.get("REPLAY_TEST_SHIFT"):
        out = out.withColumn("fare", F.col("fare") + 1)
    if os.environ.get("REPLAY_TEST_DROP"):
        out = out.filter(F.col("trip") == "1")
    if os.environ.get("REPLAY_TEST_FAIL"):
        raise RuntimeError("the replay broke here")
    return out


defs = Definitions(
    assets=[trips, scaled],
    resources={
        "io_manager": SparkWorkspaceIOManager(workspace=workspace),
        "workspace": workspace,
    },
)
"""


#: How the definitions find the workspace: by an absolute path, or as the README shows.
BY_PATH = 'WorkspaceResource(root=os.environ["REPLAY_TEST_WS"], search_parents=False)'
AS_DOCUMENTED = 'WorkspaceResource(root=".")'


@pytest.fixture
def project(
    request: pytest.FixtureRequest,
    git_ws,
    spark,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    """`ws` with the code location committed, DAGSTER_HOME an instance of its own, and the
    definitions imported here as the original runs see them (`dagster dev` started in the
    workspace's folder). Parametrized indirectly by how the definitions find the workspace
    (default: BY_PATH)."""
    ws, _ = git_ws
    name = f"replay_proj_{tmp_path.name[-12:].replace('-', '_')}"
    write(ws.root / name / "__init__.py", "")
    resource = getattr(request, "param", BY_PATH)
    write(ws.root / name / "defs.py", DEFINITIONS.replace("WORKSPACE", resource, 1))
    monkeypatch.chdir(ws.root)
    write(ws.root / "data/src/trips.csv", "trip,fare\n1,10\n2,20\n")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "add", name)
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "defs")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("REPLAY_TEST_WS", str(ws.root))
    monkeypatch.syspath_prepend(str(ws.root))
    module = __import__(f"{name}.defs", fromlist=["defs"])
    yield ws, name, module.defs
    sys.modules.pop(f"{name}.defs", None)
    sys.modules.pop(name, None)


def _materialize(defs, instance, factor: int) -> None:
    from dagster import AssetKey

    job = defs.resolve_implicit_job_def_def_for_assets([AssetKey("trips"), AssetKey("scaled")])
    result = job.execute_in_process(
        instance=instance, run_config={"ops": {"scaled": {"config": {"factor": factor}}}}
    )
    assert result.success


@pytest.mark.parametrize("project", [BY_PATH, AS_DOCUMENTED], indirect=True)
def test_assets_replay_as_tagged_dagster_runs_and_reproduce_exactly(
    project, tmp_path: Path
) -> None:
    ws, name, defs = project
    with DagsterInstance.get() as instance:
        _materialize(defs, instance, factor=3)
        take_snapshot(ws, "v1")
        _materialize(defs, instance, factor=5)  # today's state differs from the snapshot's
        cursor = process_events(instance, ws, openlineage=False).cursor
        write(ws.root / "data/src/trips.csv", "trip,fare\n1,11\n")
        plan = plan_replay(ws, "v1")
        assert [(s.kind, s.name) for s in plan.steps] == [
            (DAGSTER_ASSET, "trips"),
            (DAGSTER_ASSET, "scaled"),
        ]
        assert plan.steps[1].run_config == {"factor": 3}
        before = tree_state(ws.root)

        report = run_plan(
            plan,
            prepare_scratch(ws, plan, tmp_path / "scratch"),
            {DAGSTER_ASSET: DagsterRunner(f"{name}.defs")},
        )

        assert [(v.ref, v.outcome) for v in report.verdicts] == [
            ("inter/trips", REPRODUCED),
            ("results/scaled", REPRODUCED),
        ], report.verdicts
        assert tree_state(ws.root) == before  # the current workspace untouched
        replays = instance.get_runs()
        tagged = [r for r in replays if r.tags.get(keys.REPLAY_OF) == plan.snapshot.hash]
        assert len(tagged) == 2  # one Dagster run per replayed step, visible on the instance
        # The lineage sensor leaves the replay's runs to the scratch workspace: no record, no
        # snapshot, nothing skipped.
        state = ws.store.get("results/scaled")
        outcome = process_events(
            instance, ws, after_storage_id=cursor, openlineage=False, snapshot_on_results=True
        )
        assert ws.store.get("results/scaled").version == state.version
        assert outcome.applied.events == 0 and outcome.cursor > cursor  # read, left alone
        assert not outcome.applied.skipped and not outcome.applied.snapshots


def _replay(ws, name: str, tmp_path: Path, refs: list[str] | None = None):
    """Snapshot v1 (or `refs` of it) replayed into `tmp_path/scratch` through the project's
    definitions; the report and the scratch workspace."""
    plan = plan_replay(ws, "v1", refs or [])
    scratch = prepare_scratch(ws, plan, tmp_path / "scratch")
    return run_plan(plan, scratch, {DAGSTER_ASSET: DagsterRunner(f"{name}.defs")}), scratch


def _compare_with(spark):
    return lambda recorded, reproduced, fmt: differing_columns(spark, recorded, reproduced, fmt)


def test_an_asset_with_a_random_column_is_named_non_deterministic(
    project, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, name, defs = project
    monkeypatch.setenv("REPLAY_TEST_RANDOM", "1")  # read by the asset when it runs
    with DagsterInstance.get() as instance:
        _materialize(defs, instance, factor=2)
        take_snapshot(ws, "v1")
        report, scratch = _replay(ws, name, tmp_path)
    outcomes = {v.ref: v.outcome for v in report.verdicts}
    assert outcomes == {"inter/trips": REPRODUCED, "results/scaled": NON_DETERMINISTIC}
    scaled = report.verdicts[-1]
    assert scaled.detail == (
        "two replays of the step on the same inputs wrote different data; the same 2 rows, "
        "different content"
    )
    # Which column: the recorded data is the workspace's own (still at that version).
    name_differing_columns(ws, report, scratch, _compare_with(spark))
    scaled = report.verdicts[-1]
    assert scaled.columns == ("noise",)
    assert scaled.detail is not None and scaled.detail.endswith("; columns that differ: noise")


def test_a_changed_column_is_named_from_the_snapshots_retained_data(
    project, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, name, defs = project
    with DagsterInstance.get() as instance:
        _materialize(defs, instance, factor=2)
        take_snapshot(ws, "v1")
        _materialize(defs, instance, factor=5)  # the workspace's data moved on
        monkeypatch.setenv("REPLAY_TEST_SHIFT", "1")  # the environment changed, not the code
        report, scratch = _replay(ws, name, tmp_path, ["results/scaled"])
    name_differing_columns(ws, report, scratch, _compare_with(spark))
    scaled = {v.ref: v for v in report.verdicts}["results/scaled"]
    assert scaled.outcome == DIFFERS and scaled.columns == ("fare",)
    assert scaled.detail == "the same 2 rows, different content; columns that differ: fare"


def test_an_asset_that_now_drops_rows_differs_and_says_how_many(
    project, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, name, defs = project
    with DagsterInstance.get() as instance:
        _materialize(defs, instance, factor=2)
        take_snapshot(ws, "v1")
        monkeypatch.setenv("REPLAY_TEST_DROP", "1")  # the environment changed, not the code
        report, scratch = _replay(ws, name, tmp_path, ["results/scaled"])
    scaled = {v.ref: v for v in report.verdicts}["results/scaled"]
    assert scaled.outcome == DIFFERS
    assert scaled.detail == "2 rows recorded, 1 reproduced"
    # Without its recorded data (freed), the verdict says the columns were not compared.
    shutil.rmtree(ws.local_path("results/scaled"))
    shutil.rmtree(ws.meta_dir / "objects")
    name_differing_columns(ws, report, scratch, _compare_with(spark))
    scaled = {v.ref: v for v in report.verdicts}["results/scaled"]
    assert scaled.columns is None
    assert scaled.detail == (
        "2 rows recorded, 1 reproduced; its columns were not compared: the recorded data is "
        "no longer kept (freed by gc)"
    )


def test_a_replay_run_that_fails_leaves_the_workspace_as_it_was(
    project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, name, defs = project
    with DagsterInstance.get() as instance:
        _materialize(defs, instance, factor=2)
        take_snapshot(ws, "v1")
        monkeypatch.setenv("REPLAY_TEST_FAIL", "1")
        report, _scratch = _replay(ws, name, tmp_path, ["results/scaled"])
        scaled = {v.ref: v for v in report.verdicts}["results/scaled"]
        assert scaled.outcome == FAILED and "the replay broke here" in (scaled.detail or "")
        # The failed replay run is not a failed attempt of the workspace's own asset.
        process_events(instance, ws, openlineage=False)
        assert ws.store.get("results/scaled").status == "ok"


def test_a_run_tagged_as_a_replay_never_writes_the_workspace_itself(
    project, tmp_path: Path
) -> None:
    """A replay run re-executed from the UI (or a tag copied by hand) runs without the
    scratch workspace: the IO manager refuses it before anything is written."""
    from dagster import AssetKey

    ws, _name, defs = project
    with DagsterInstance.get() as instance:
        _materialize(defs, instance, factor=2)
        before = tree_state(ws.root)
        job = defs.resolve_implicit_job_def_def_for_assets([AssetKey("scaled")])
        result = job.execute_in_process(
            instance=instance,
            asset_selection=[AssetKey("scaled")],
            run_config={"ops": {"scaled": {"config": {"factor": 7}}}},
            tags={keys.REPLAY_OF: "0" * 32},
            raise_on_error=False,
        )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.event_specific_data.error
    while error.cause is not None:
        error = error.cause
    assert error.cls_name == "ReplayOutsideScratchError"
    assert (
        f"is tagged {keys.REPLAY_OF}=" in error.message and "nothing was written" in error.message
    )
    assert tree_state(ws.root) == before


def test_in_a_replay_run_the_workspace_resource_opens_the_scratch_workspace(
    ws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker starts in the scratch workspace: `root="."` (as the README writes it) finds
    it, an absolute root naming the workspace replayed is given it instead, and any other
    workspace is refused, saying which resource and what to do."""
    from dws_dagster import WorkspaceResource
    from dws_dagster.errors import ReplayEnvironmentError
    from dws_dagster.replay.env import REPLAY_WORKSPACE_ENV
    from dws_dagster.workspace.definition import Workspace

    scratch = Workspace.init(
        tmp_path / "scratch", replay_of={"snapshot": "0" * 32, "root": str(ws.root)}
    )
    other = Workspace.init(tmp_path / "other")
    monkeypatch.setenv(REPLAY_WORKSPACE_ENV, str(scratch.root))
    monkeypatch.chdir(scratch.root)

    assert WorkspaceResource(root=".").workspace().root == scratch.root
    assert WorkspaceResource(root=str(ws.root)).workspace().root == scratch.root
    with pytest.raises(ReplayEnvironmentError) as refused:
        WorkspaceResource(root=str(other.root)).workspace()
    said = str(refused.value)
    assert f"WorkspaceResource(root='{other.root}') opened the workspace at" in said
    assert "a replay writes only into its scratch workspace" in said
    assert "unset" not in said
