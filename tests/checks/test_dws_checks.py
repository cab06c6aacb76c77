"""The dws asset checks, on real Spark data in a real workspace and Dagster instance: they pass
on data as written, and fail, with the ref, the versions and what to run, on data edited by
hand, on inputs that mix versions, on an unfavourable replay; per partition for a partitioned
asset; blocking or warning.

Few runs: one workspace and instance per test, the session's Spark.
"""

from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    AssetSelection,
    Config,
    DagsterInstance,
    Definitions,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from pyspark.sql import DataFrame

from dws_dagster import (
    CheckConfigError,
    RefBinding,
    Workspace,
    WorkspaceResource,
    dws_asset_checks,
    dws_ref,
    with_dws_checks,
)
from dws_dagster.replay.record import save_replay
from tests.support.pipeline import io_manager

pytestmark = pytest.mark.spark


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace.init(tmp_path / "ws")
    workspace.add_resource("inter", "intermediate-data", path="data/inter")
    return workspace


class Rows(Config):
    n: int = 3


def chain(spark: Any) -> list[Any]:
    """raw → clean, and report reading both (report's inputs carry raw twice)."""

    @asset(metadata=dws_ref("inter", "raw"))
    def raw(config: Rows) -> DataFrame:
        return spark.range(config.n).withColumnRenamed("id", "x")

    @asset
    def clean(raw: DataFrame) -> DataFrame:
        return raw.filter("x >= 0")

    @asset
    def report(raw: DataFrame, clean: DataFrame) -> DataFrame:
        return clean.join(raw, "x")

    return [raw, clean, report]


def evaluations(result: Any) -> dict[tuple[str, str], Any]:
    return {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in (event.event_specific_data for event in result.all_events)
        if type(e).__name__ == "AssetCheckEvaluation"
    }


def meta(evaluation: Any) -> dict[str, Any]:
    return {key: getattr(value, "value", value) for key, value in evaluation.metadata.items()}


def checks_only(defs: Definitions, instance: DagsterInstance) -> Any:
    """A run of the checks alone, as the UI's "Execute" on the Checks tab launches."""
    return materialize(
        [*(defs.assets or []), *(defs.asset_checks or [])],
        instance=instance,
        resources=dict(defs.resources or {}),
        selection=AssetSelection.all_asset_checks(),
        raise_on_error=False,
    )


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
def test_checks_pass_as_written_and_data_edited_by_hand_fails(
    spark: Any, ws: Workspace, instance: DagsterInstance, full: bool
) -> None:
    defs = with_dws_checks(
        Definitions(
            assets=chain(spark),
            resources={
                "io_manager": io_manager(ws),
                "workspace": WorkspaceResource(root=str(ws.root)),
            },
        ),
        full=full,
    )
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)
    assert result.success
    found = evaluations(result)
    assert {name for _, name in found} == {"dws_data_version", "dws_inputs_consistent"}
    assert all(e.passed for e in found.values()), {k: e.description for k, e in found.items()}
    clean = meta(found[("clean", "dws_data_version")])
    assert clean["dws/ref"] == "inter/clean"
    assert clean["dws/recorded_version"] == clean["dws/found_version"]
    assert clean["dws/check_details"]["how"] == ("full" if full else "cached")
    # No replay of a snapshot has replayed anything: `dws_reproduced` gives no result.
    assert ("clean", "dws_reproduced") not in found

    part = next((ws.root / "data/inter/clean").glob("part-*"))
    part.write_bytes(part.read_bytes() + b"edited by hand")
    again = evaluations(checks_only(defs, instance))
    failed = again[("clean", "dws_data_version")]
    assert not failed.passed and failed.severity == AssetCheckSeverity.WARN
    details = meta(failed)
    assert details["dws/recorded_version"] == clean["dws/recorded_version"]
    assert details["dws/found_version"] not in ("-", clean["dws/recorded_version"])
    assert "re-run step 'clean'" in details["dws/to_run"]
    assert "changed outside step 'clean'" in failed.description
    assert again[("raw", "dws_data_version")].passed


def test_inputs_that_mix_versions_fail_and_blocking_checks_stop_downstream(
    spark: Any, ws: Workspace, instance: DagsterInstance
) -> None:
    defs = with_dws_checks(
        Definitions(
            assets=chain(spark),
            resources={
                "io_manager": io_manager(ws),
                "workspace": WorkspaceResource(root=str(ws.root)),
            },
        ),
        severity="blocking",
        checks=["inputs"],
    )
    job = defs.resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(instance=instance).success
    # raw changes; report's inputs now carry two versions of it (clean read the old one).
    rerun = job.execute_in_process(
        instance=instance,
        asset_selection=[AssetKey("raw")],
        run_config={"ops": {"raw": {"config": {"n": 5}}}},
    )
    found = evaluations(rerun)
    assert set(found) == {("raw", "dws_inputs_consistent")}
    verdicts = evaluations(checks_only(defs, instance))
    report = verdicts[("report", "dws_inputs_consistent")]
    assert not report.passed and report.severity == AssetCheckSeverity.ERROR
    assert "two versions of ref inter/raw" in report.description
    assert "'clean'" in meta(report)["dws/to_run"]
    clean = verdicts[("clean", "dws_inputs_consistent")]
    assert clean.passed and "changed since 'clean' read them" in clean.description
    # Blocking: a failed check stops what is downstream of its asset in the same run.
    blocked = job.execute_in_process(
        instance=instance, asset_selection=[AssetKey("report")], raise_on_error=False
    )
    assert not blocked.success


def test_partitioned_assets_are_checked_per_partition_and_yaml_bindings_count(
    spark: Any, ws: Workspace, instance: DagsterInstance
) -> None:
    days = StaticPartitionsDefinition(["mon", "tue"])

    @asset(partitions_def=days)
    def visits(context: AssetExecutionContext) -> DataFrame:
        return spark.createDataFrame([(context.partition_key, 1)], ["day", "n"])

    bindings = [RefBinding(asset="visits", ref="inter/visits", partition_template="d={partition}")]
    checks = dws_asset_checks([visits], bindings=bindings, checks=["data_version"])
    resources = {
        "io_manager": io_manager(ws, bindings=bindings),
        "workspace": WorkspaceResource(root=str(ws.root)),
    }
    result = materialize(
        [visits, *checks], instance=instance, resources=resources, partition_key="tue"
    )
    evaluation = evaluations(result)[("visits", "dws_data_version")]
    assert evaluation.passed and evaluation.partition == "tue"
    assert meta(evaluation)["dws/ref"] == "inter/visits/d=tue"
    assert (ws.root / "data/inter/visits/d=tue/_dws_version.json").is_file()


def test_a_kept_replay_gives_the_reproduced_verdict(
    spark: Any, ws: Workspace, instance: DagsterInstance
) -> None:
    assets = chain(spark)[:1]
    checks = dws_asset_checks(assets, checks=["reproduced"])
    resources = {"io_manager": io_manager(ws), "workspace": WorkspaceResource(root=str(ws.root))}
    result = materialize([*assets, *checks], instance=instance, resources=resources)
    assert ("raw", "dws_reproduced") not in evaluations(result)
    recorded = ws.store.get("inter/raw").version  # type: ignore[union-attr]
    # What `dws-dagster replay` keeps (replay_record.report_json's document; replays
    # themselves are tested in test_replay_*): written here for the check to read.
    save_replay(
        ws,
        {
            "format": 1,
            "snapshot": "a" * 32,
            "snapshot_name": "v1",
            "tags": ["v1"],
            "replayed_at": "2026-01-01T00:00:00",
            "into": str(ws.root / "scratch"),
            "reproduced": False,
            "refs": [
                {
                    "ref": "inter/raw",
                    "step": "raw",
                    "verdict": "differs",
                    "recorded": recorded,
                    "reproduced": "content-" + "0" * 32,
                    "detail": None,
                    "columns": ["x"],
                }
            ],
        },
        "v1-1",
    )
    job_result = materialize(
        [*assets, *checks],
        instance=instance,
        resources=resources,
        selection=AssetSelection.all_asset_checks(),
    )
    evaluation = evaluations(job_result)[("raw", "dws_reproduced")]
    assert not evaluation.passed
    assert "differs" in evaluation.description
    details = meta(evaluation)
    assert details["dws/recorded_version"] == recorded
    assert details["dws/check_details"]["columns"] == ["x"]
    assert "dws-dagster replay aaaaaaaaaaaa inter/raw" in details["dws/to_run"]


def test_unknown_checks_and_severities_are_refused() -> None:
    with pytest.raises(CheckConfigError, match="unknown check"):
        dws_asset_checks(["a"], checks=["drift"])
    with pytest.raises(CheckConfigError, match="severity 'fatal'"):
        dws_asset_checks(["a"], severity="fatal")  # type: ignore[arg-type]
