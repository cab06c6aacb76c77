"""The lineage sensor against a real Dagster instance (temporary SQLite home, the default
run-sharded storage) and real Spark materializations: lineage, failures, results, checks,
backlogs, crashes and the sensor definition itself."""

import gc
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    DefaultSensorStatus,
    Definitions,
    asset,
    asset_check,
    build_sensor_context,
    materialize,
)
from pyspark.sql import DataFrame

from dws_dagster import WorkspaceResource, dws_metrics, dws_ref, lineage_sensor, process_events
from dws_dagster.errors import SensorConfigError
from dws_dagster.sensor.lineage_sensor import parse_cursor
from tests.assets.test_io_manager import run
from tests.support.pipeline import build_assets, io_manager, make_workspace
from tests.support.sensor_ticks import tick_sensors


@pytest.fixture
def pipeline_ws(tmp_path: Path):
    return make_workspace(tmp_path / "ws")


def journal_ops(ws) -> list[dict[str, Any]]:
    return list(ws.store.history())


def refs_state(ws) -> dict[str, Any]:
    return {ref: state.to_json() for ref, state in ws.store.items()}


def scored_assets(calls: list[str] | None = None) -> list[Any]:
    """The test pipeline plus a results asset that reports metrics, and a check on it."""
    assets = build_assets(calls)

    @asset(
        metadata=dws_ref("results", "scores"),
        owners=["team:forecasting"],
        description="Revenue scores per borough.",
        code_version="3",
    )
    def scores(context: AssetExecutionContext, hourly: DataFrame) -> DataFrame:
        context.add_output_metadata({**dws_metrics({"mae": 1.25, "rmse": 2.5}), "note": "baseline"})
        return hourly.groupBy("borough").sum("revenue")

    return [*assets, scores]


def test_sensor_applies_materializations_without_changing_committed_lineage(
    spark, pipeline_ws, instance
):
    ws = pipeline_ws
    run(scored_assets(), ws, instance)
    before = refs_state(ws)
    outcome = process_events(instance, ws, openlineage=False)
    assert outcome.applied.events > 0 and not outcome.more
    after = refs_state(ws)
    # Records the IO manager committed are the ones the sensor rebuilds: nothing new, except
    # the metrics the sensor adds to results refs.
    for ref, state in before.items():
        if ref.startswith("results/"):
            continue
        assert after[ref] == state, ref
    scores = after["results/scores"]["record"]
    assert scores["metrics"] == {"mae": 1.25, "rmse": 2.5}
    ranking = after["results/ranking"]["record"]
    assert ranking["metrics"] == {}  # numeric metadata of its own: none
    # Applying the same events again changes nothing.
    ops = journal_ops(ws)
    again = process_events(instance, ws, openlineage=False)
    assert again.applied.records == 0
    assert journal_ops(ws) == ops


def test_results_json_beside_the_data_keeps_the_version_and_the_data_readable(
    spark, pipeline_ws, instance
):
    ws = pipeline_ws
    run(scored_assets(), ws, instance)
    process_events(instance, ws, openlineage=False)
    folder = ws.local_path("results/scores")
    results = json.loads((folder / "results.json").read_text())
    assert results["metrics"] == {"mae": 1.25, "rmse": 2.5}
    assert results["step"] == "scores"
    assert results["version"] == ws.store.get("results/scores").version
    assert results["run_description"].startswith("Dagster run ")
    assert results["execution_time_seconds"] >= 0
    # results.json describes the data; it is not part of it.
    assert ws.version_of("results/scores") == results["version"]
    assert {
        r.borough
        for r in spark.read.option("pathGlobFilter", "part-*").parquet(str(folder)).collect()
    } == {"Manhattan", "Brooklyn", "Queens"}
    from dws_dagster.spark import storage

    assert storage.read(spark, str(folder)).count() == 3


def test_rebuilding_a_lost_store_from_the_event_log(spark, pipeline_ws, instance):
    ws = pipeline_ws
    run(scored_assets(), ws, instance)
    process_events(instance, ws, openlineage=False)
    before = refs_state(ws)
    from dws_dagster.store.database import forget_databases

    forget_databases()  # no connection of this process holds the old store open
    for path in ws.meta_dir.glob("store.db*"):
        path.unlink()  # the store is lost
    ws.store.__init__(ws)  # a fresh process's view of the (now empty) store
    assert ws.store.items() == []
    process_events(instance, ws, openlineage=False)
    after = refs_state(ws)
    assert after == before


def test_backlog_of_many_batches_is_processed_in_storage_order(tmp_path, instance):
    from tests.support.pipeline import make_workspace as make

    ws = make(tmp_path / "plain")

    @asset
    def a() -> int:
        return 1

    @asset
    def b(a: int) -> int:
        return a + 1

    @asset
    def c(b: int) -> int:
        return b + 1

    for _ in range(3):
        materialize([a, b, c], instance=instance)
    # Per run: 3 planned + 3 materialized + run success = 7 events; 21 in all, batch 4.
    seen: list[int] = []
    frozen: list[int] = []  # the tick freezes older objects, and hands them back at its end
    outcome = process_events(
        instance,
        ws,
        batch_size=4,
        time_budget_seconds=60,
        openlineage=False,
        save_cursor=lambda n: (seen.append(n), frozen.append(gc.get_freeze_count())),
    )
    assert all(count > 0 for count in frozen) and gc.get_freeze_count() == 0
    assert outcome.applied.events == 21
    assert outcome.batches == 6 and not outcome.more
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    # A budget spent after one batch: each call does one batch and says more remain; calls
    # from the returned cursor get every event exactly once.
    cursor, events, calls = 0, 0, 0
    while True:
        step = process_events(
            instance,
            ws,
            after_storage_id=cursor,
            batch_size=4,
            time_budget_seconds=1e-6,
            openlineage=False,
        )
        calls += 1
        events += step.applied.events
        assert step.cursor >= cursor
        cursor = step.cursor
        if not step.more:
            break
    assert events == 21 and calls == 6


def failing_pipeline(calls: list[str]) -> list[Any]:
    assets = build_assets(calls)

    @asset(metadata=dws_ref("intermediate-data", "hourly"), name="hourly")
    def broken_hourly(enriched: DataFrame) -> DataFrame:
        raise ValueError("bad fares in s3a://key:secret@bucket/fares")

    return [a if a.key.to_user_string() != "hourly" else broken_hourly for a in assets]


def test_failed_run_records_failures_and_keeps_previous_lineage(spark, pipeline_ws, instance):
    ws = pipeline_ws
    run(build_assets(), ws, instance)
    process_events(instance, ws, openlineage=False)
    good = {
        ref: ws.store.get(ref).record for ref in ("intermediate-data/hourly", "results/ranking")
    }
    resources = {"io_manager": io_manager(ws)}
    result = materialize(
        failing_pipeline([]),
        instance=instance,
        resources=resources,
        raise_on_error=False,
        selection=["hourly", "ranking"],
    )
    assert not result.success
    outcome = process_events(instance, ws, openlineage=False)
    assert outcome.applied.failures == 2
    hourly = ws.store.get("intermediate-data/hourly")
    assert hourly.record == good["intermediate-data/hourly"]  # last good lineage kept
    assert hourly.status == "failed" and not hourly.unknown
    assert "ValueError: bad fares in s3a://bucket/fares" in hourly.attempt["error"]
    assert "secret" not in json.dumps(hourly.attempt)
    assert hourly.attempt["step"]["run_id"] == result.run_id
    ranking = ws.store.get("results/ranking")
    assert ranking.record == good["results/ranking"] and ranking.status == "failed"
    assert (
        f"run {result.run_id} failed" in ranking.attempt["error"]
        or "ValueError" in ranking.attempt["error"]
    )
    # Replaying the run's events adds nothing; a later good run clears the failure.
    ops = journal_ops(ws)
    assert process_events(instance, ws, openlineage=False).applied.failures == 0
    assert journal_ops(ws) == ops
    run(build_assets(), ws, instance, selection=["hourly", "ranking"])
    process_events(instance, ws, openlineage=False)
    assert ws.store.get("intermediate-data/hourly").status == "ok"
    assert process_events(instance, ws, after_storage_id=0, openlineage=False).applied.failures == 0


def cancelled_before_running(ws, instance) -> Definitions:
    """A run planning the asset `never` (intermediate-data/never), cancelled while queued."""

    @asset(metadata=dws_ref("intermediate-data", "never"))
    def never() -> int:
        return 1

    defs = Definitions(assets=[never])
    job = defs.resolve_implicit_global_asset_job_def()
    dagster_run = instance.create_run_for_job(job_def=job)
    instance.report_run_canceled(dagster_run)
    return defs


def test_cancelled_run_marks_planned_assets_aborted(tmp_path, instance):
    ws = make_workspace(tmp_path / "ws")
    defs = cancelled_before_running(ws, instance)
    process_events(instance, ws, repository_def=defs.get_repository_def(), openlineage=False)
    state = ws.store.get("intermediate-data/never")
    assert state.status == "failed" and state.record is None
    assert "cancelled" in state.attempt["error"]


def test_check_evaluations_join_the_checked_record(spark, pipeline_ws, instance):
    ws = pipeline_ws
    assets = build_assets()

    @asset_check(asset="hourly", description="no negative revenue")
    def revenue_not_negative() -> AssetCheckResult:
        return AssetCheckResult(passed=True, metadata={"min": 0.0})

    resources = {"io_manager": io_manager(ws)}
    run(assets, ws, instance)
    materialize(
        [*assets, revenue_not_negative],
        instance=instance,
        resources=resources,
        selection=["hourly"],
    )
    defs = Definitions(assets=assets, asset_checks=[revenue_not_negative], resources=resources)
    outcome = process_events(
        instance, ws, repository_def=defs.get_repository_def(), openlineage=False
    )
    assert outcome.applied.checks == 1
    checks = ws.store.get("intermediate-data/hourly").record["extra"]["checks"]
    assert checks["revenue_not_negative"]["passed"] is True
    assert checks["revenue_not_negative"]["severity"] == "ERROR"


def test_snapshot_on_results_is_taken_once_per_run(spark, pipeline_ws, instance):
    ws = pipeline_ws
    result = run(scored_assets(), ws, instance)
    outcome = process_events(instance, ws, snapshot_on_results=True, openlineage=False)
    assert len(outcome.applied.snapshots) == 1
    from dws_dagster.snapshots.index import list_snapshots

    [snapshot] = list_snapshots(ws)
    assert snapshot.tags == [f"run-{result.run_id[:8]}"]
    assert snapshot.metrics in ({"mae": 1.25, "rmse": 2.5}, {})
    archived = ws.local_path("results") / "snapshots" / snapshot.tags[0] / "scores"
    assert (archived / "results.json").is_file() and (archived / "lineage.json").is_file()
    again = process_events(instance, ws, snapshot_on_results=True, openlineage=False)
    assert again.applied.snapshots == [] and len(list_snapshots(ws)) == 1


def test_sensor_definition_ticks_with_its_cursor(spark, pipeline_ws, instance):
    ws = pipeline_ws
    assets = scored_assets()
    sensor = lineage_sensor(batch_size=3, time_budget_seconds=30, openlineage=False)
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    assert sensor.minimum_interval_seconds == 30
    resources = {"io_manager": io_manager(ws), "workspace": WorkspaceResource(root=str(ws.root))}
    defs = Definitions(assets=assets, sensors=[sensor], resources=resources)
    run(assets, ws, instance)
    context = build_sensor_context(
        instance=instance, definitions=defs, resources={"workspace": resources["workspace"]}
    )
    result = sensor(context)
    assert parse_cursor(result.cursor, sensor_name="s") > 0
    assert "records" in result.skip_reason.skip_message
    context = build_sensor_context(
        instance=instance,
        definitions=defs,
        cursor=result.cursor,
        resources={"workspace": resources["workspace"]},
    )
    again = sensor(context)
    assert again.cursor == result.cursor


SECRET = "tick-secret-do-not-leak"
TICK_DEFINITIONS = """
from dagster import Definitions
from dws_dagster import WorkspaceResource, lineage_sensor

defs = Definitions(sensors=[lineage_sensor(
    workspace=WorkspaceResource(root={root!r}), time_budget_seconds=5)])
"""


def test_each_tick_shows_what_it_did_on_the_tick(
    spark, pipeline_ws, instance, clean_ol_env, monkeypatch, tmp_path
):
    """The daemon's evaluation stores the sensor's tick text as the tick's skip reason, the
    text the UI shows for a tick: records applied, OpenLineage events spooled, delivered and
    pending, and the last delivery error without the transport's secret."""
    ws = pipeline_ws
    with socket.socket() as sock:  # a port nobody listens on: the catalog is down
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OPENLINEAGE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OPENLINEAGE_API_KEY", SECRET)
    run(scored_assets(), ws, instance)
    definitions = tmp_path / "tick_definitions.py"
    definitions.write_text(TICK_DEFINITIONS.format(root=str(ws.root)))

    from dagster._core.scheduler.instigation import TickStatus

    tick = tick_sensors(instance, definitions)["dws_lineage_sensor"]
    assert tick.status == TickStatus.SKIPPED and parse_cursor(tick.cursor, sensor_name="s") > 0
    text = tick.skip_reason
    found = re.fullmatch(
        r"Applied (\d+) events: 4 lineage records \((\d+) new to the store\), "
        r"2 results\.json\. OpenLineage: (\d+) events spooled, 0 delivered, (\d+) pending; "
        r"last delivery error: (.+); next attempt after \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.",
        text,
    )
    assert found, text
    events, new, spooled, pending, error = found.groups()
    assert int(events) > 4 and int(new) == 2  # the results refs' metrics: the sensor adds them
    assert int(spooled) == int(pending) > 0
    assert str(port) in error and "Connection refused" in error and SECRET not in text

    # The next tick, from the stored cursor: nothing new, the events still pending.
    sensor = lineage_sensor(workspace=WorkspaceResource(root=str(ws.root)), time_budget_seconds=5)
    again = sensor(build_sensor_context(instance=instance, cursor=tick.cursor))
    assert again.cursor == tick.cursor
    text = again.skip_reason.skip_message
    assert text.startswith(
        f"No new events. OpenLineage: 0 events spooled, 0 delivered, "
        f"{pending} pending; last delivery error: "
    ), text
    assert SECRET not in text


def test_tick_text_of_a_sensor_without_openlineage(spark, pipeline_ws, instance):
    ws = pipeline_ws
    run(scored_assets(), ws, instance)
    outcome = process_events(
        instance,
        ws,
        snapshot_on_results=True,
        openlineage=False,
        batch_size=2,
        time_budget_seconds=0.001,
    )
    text = outcome.tick_text()
    assert re.fullmatch(r"Applied 2 events: .*\. More events wait for the next tick\.", text), text
    assert "OpenLineage" not in text
    assert outcome.summary() == f"{text} (2 events in 1 batch, cursor {outcome.cursor})"
    rest = process_events(
        instance, ws, after_storage_id=outcome.cursor, snapshot_on_results=True, openlineage=False
    )
    assert re.fullmatch(
        r"Applied \d+ events: \d lineage records \(2 new to the store\), "
        r"2 results\.json, snapshot [0-9a-f]{12}\.",
        rest.tick_text(),
    ), rest.tick_text()


def test_tick_text_shortens_a_long_delivery_error_and_redacts_it():
    from dws_dagster.sensor.lineage_sensor import TICK_ERROR_CHARS, TickOutcome

    error = "sending run x START failed: " + "retrying; " * 200 + "Connection refused"
    text = TickOutcome(cursor=7, pending=3, last_delivery_error=error).tick_text()
    assert text.startswith(
        "No new events. OpenLineage: 0 events spooled, 0 delivered, "
        "3 pending; last delivery error: sending run x START failed: "
    )
    assert " … " in text and text.endswith("retrying; retrying; Connection refused.")
    assert len(text) < TICK_ERROR_CHARS + 200
    leaked = TickOutcome(
        cursor=7, last_delivery_error="POST https://user:pa55word@catalog/x failed"
    ).tick_text()
    assert "pa55word" not in leaked and "catalog/x failed" in leaked
    paused = TickOutcome(cursor=7, pending=2, delivery_paused=True).tick_text()
    assert paused.endswith("2 pending (the transport is disabled).")


def test_bad_sensor_configuration_is_refused(tmp_path, instance):
    with pytest.raises(SensorConfigError, match="batch_size"):
        lineage_sensor(batch_size=0)
    with pytest.raises(SensorConfigError, match="cursor it cannot read"):
        parse_cursor("not json", sensor_name="dws_lineage_sensor")
    sensor = lineage_sensor(openlineage=False)
    defs = Definitions(sensors=[sensor], resources={"workspace": "not a resource"})
    context = build_sensor_context(
        instance=instance, definitions=defs, resources={"workspace": "not a resource"}
    )
    with pytest.raises(SensorConfigError, match="not a WorkspaceResource"):
        sensor(context)
