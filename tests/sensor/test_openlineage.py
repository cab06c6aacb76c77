"""OpenLineage from the lineage sensor, end to end: real Spark materializations, a real Dagster
instance, the client's file and HTTP transports (a real receiver on 127.0.0.1), and every event
validated against the official schemas in ../shared/openlineage-spec."""

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, DagsterRunStatus, Definitions, asset, materialize
from pyspark.sql import DataFrame

from dws_dagster import dws_ref, process_events
from dws_dagster.ol.job_names import DAGSTER_JOB, asset_job_name
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.outbox.event_rows import event_key
from dws_dagster.ol.transport.factory import make_transport
from tests.assets.test_io_manager import run
from tests.ol.ol_parents import check_parents, children_of, parent_events
from tests.ol.ol_receiver import Receiver
from tests.ol.ol_spec import validate_run_event
from tests.sensor.test_sensor import cancelled_before_running, failing_pipeline, scored_assets
from tests.support.pipeline import io_manager, make_workspace


@pytest.fixture
def pipeline_ws(tmp_path: Path):
    return make_workspace(tmp_path / "ws")


def file_events(ws) -> list[dict[str, Any]]:
    path = ws.meta_dir / "openlineage" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def asset_of(event: dict[str, Any]) -> str:
    """The asset an asset run's event is of: its job is `dagster.<asset key>`."""
    name = event["job"]["name"]
    assert name.startswith(f"{DAGSTER_JOB}."), name
    return name[len(DAGSTER_JOB) + 1 :]


def by_job(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The asset runs' events by asset (the Dagster runs' own left out)."""
    jobs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["job"]["name"] != DAGSTER_JOB:
            jobs.setdefault(asset_of(event), []).append(event)
    return jobs


def test_every_event_validates_and_carries_the_lineage(spark, pipeline_ws, instance, clean_ol_env):
    ws = pipeline_ws
    assets = scored_assets()
    result = run(assets, ws, instance)
    defs = Definitions(assets=assets)
    outcome = process_events(instance, ws, repository_def=defs.get_repository_def())
    events = file_events(ws)
    assert outcome.delivered == len(events) == outcome.spooled and outcome.pending == 0
    for event in events:
        validate_run_event(event)
    # Every run has its own events: the pipeline's, and the observation run of its sources.
    assert check_parents(events) == {r.run_id for r in instance.get_runs()}
    assert result.run_id in check_parents(events)
    jobs = by_job(events)
    assert set(jobs) >= {"enriched", "hourly", "ranking", "scores"}
    run_ids = set()
    for name in ("enriched", "hourly", "ranking", "scores"):
        start, complete = jobs[name]
        assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
        assert start["run"]["runId"] == complete["run"]["runId"]
        run_ids.add(start["run"]["runId"])
        parent = complete["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == result.run_id
        assert parent["job"]["name"] == DAGSTER_JOB
        dagster_job = {t["key"]: t["value"] for t in complete["run"]["facets"]["tags"]["tags"]}
        assert dagster_job["dagster/job"] == result.dagster_run.job_name
        assert parent["root"]["run"]["runId"] == result.run_id
        assert complete["job"]["facets"]["jobType"]["integration"] == "DAGSTER"
        assert f"def {name}" in complete["job"]["facets"]["sourceCode"]["sourceCode"]
        # START names inputs and outputs both (never an output-only placeholder).
        assert start["outputs"] and bool(start["inputs"]) == bool(complete["inputs"])
    assert len(run_ids) == 4  # one OpenLineage run per asset

    hourly = jobs["hourly"][1]
    [output] = hourly["outputs"]
    state = ws.store.get("intermediate-data/hourly")
    assert output["namespace"] == "file"
    assert output["name"] == str(ws.local_path("intermediate-data/hourly"))
    assert output["facets"]["version"]["datasetVersion"] == state.version
    symlink = output["facets"]["symlinks"]["identifiers"][0]
    assert symlink["name"] == "intermediate-data/hourly"
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == [
        "borough",
        "hour",
        "trips",
        "revenue",
    ]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == state.record["extra"]["rows"]
    assert output["facets"]["storage"]["fileFormat"] == "parquet"
    lineage = output["facets"]["columnLineage"]["fields"]
    enriched_name = str(ws.local_path("intermediate-data/enriched"))
    [revenue_source] = lineage["revenue"]["inputFields"]
    assert (revenue_source["name"], revenue_source["field"]) == (enriched_name, "fare_usd")
    assert {t["subtype"] for t in revenue_source["transformations"]} == {"AGGREGATION"}
    [the_input] = hourly["inputs"]
    assert the_input["name"] == enriched_name
    assert (
        the_input["facets"]["version"]["datasetVersion"]
        == ws.store.get("intermediate-data/enriched").version
    )
    # The input's schema as Spark read it: the column lineage's input field is one of it.
    assert "fare_usd" in [f["name"] for f in the_input["facets"]["schema"]["fields"]]

    scores = jobs["scores"][1]["job"]["facets"]
    assert scores["ownership"]["owners"] == [{"name": "forecasting", "type": "team"}]
    assert scores["documentation"]["description"] == "Revenue scores per borough."


def test_catalog_down_then_failing_then_back_loses_nothing(
    spark, pipeline_ws, instance, clean_ol_env, monkeypatch
):
    ws = pipeline_ws
    receiver = Receiver()  # not started: connections are refused
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    pipeline_run = run(scored_assets(), ws, instance).run_id
    first = process_events(instance, ws)
    assert first.delivered == 0 and first.pending == first.spooled > 0
    assert first.delivery_error
    outbox = Outbox(ws)
    spooled = list(outbox.events())
    transport, description = make_transport(ws)
    assert receiver.url in description
    with receiver.start():
        receiver.fail_next(3)
        now = dt.datetime.now(dt.UTC)
        calls = 0
        while outbox.status().pending:
            before = receiver.attempts
            report = outbox.deliver(transport, budget_seconds=30, now=now)
            if report.failed:  # a failing catalog costs one attempt per delivery
                assert receiver.attempts - before <= 1
            now += dt.timedelta(hours=1)  # past any backoff
            calls += 1
            assert calls < 20
    keys = [event_key(e) for e in receiver.events]
    assert set(keys) == {event_key(e) for e in spooled}  # none lost
    assert [k for k, n in Counter(keys).items() if n > 1] == []
    # The Dagster run's own START and end came once each, around its assets' events.
    assert check_parents(receiver.events) == {r.run_id for r in instance.get_runs()}
    assert [e["eventType"] for e in parent_events(receiver.events, pipeline_run)] == [
        "START",
        "COMPLETE",
    ]
    # Per-run order: START before COMPLETE for every OpenLineage run.
    seen: dict[str, str] = {}
    for event in receiver.events:
        run_id = event["run"]["runId"]
        if event["eventType"] == "START":
            assert run_id not in seen
        else:
            assert seen.get(run_id) == "START"
        seen[run_id] = event["eventType"]
        validate_run_event(event)


def test_replaying_events_after_a_crash_spools_no_duplicates(
    spark, pipeline_ws, instance, clean_ol_env
):
    ws = pipeline_ws
    run(scored_assets(), ws, instance)
    process_events(instance, ws, deliver=False)
    journal = list(ws.store.history())
    spooled = list(Outbox(ws).events())
    # The tick died before Dagster saved its cursor: the next tick starts from the old one.
    again = process_events(instance, ws, deliver=False)
    assert again.spooled == 0 and again.applied.records == 0
    assert list(ws.store.history()) == journal
    assert list(Outbox(ws).events()) == spooled


def test_failed_run_sends_fail_events_with_the_error(spark, pipeline_ws, instance, clean_ol_env):
    ws = pipeline_ws
    run(scored_assets(), ws, instance)
    process_events(instance, ws)
    resources = {"io_manager": io_manager(ws)}
    failed = materialize(
        failing_pipeline([]),
        instance=instance,
        resources=resources,
        raise_on_error=False,
        selection=["hourly", "ranking"],
    )
    process_events(instance, ws)
    events = children_of(file_events(ws), failed.run_id)
    for event in events:
        validate_run_event(event)
    kinds = {(asset_of(e), e["eventType"]) for e in events}
    assert kinds == {
        ("hourly", "START"),
        ("hourly", "FAIL"),
        ("ranking", "START"),
        ("ranking", "FAIL"),
    }
    fail = next(e for e in events if asset_of(e) == "hourly" and e["eventType"] == "FAIL")
    error = fail["run"]["facets"]["errorMessage"]
    assert error["message"].startswith("ValueError: bad fares")
    assert error["programmingLanguage"] == "python"
    assert "secret" not in json.dumps(fail)
    assert ws.store.get("intermediate-data/hourly").version is not None  # previous kept


def broken_ranking_pipeline() -> list[Any]:
    """enriched and hourly materialize, then ranking fails."""
    assets = scored_assets()

    @asset(metadata=dws_ref("results", "ranking", format="json"), name="ranking")
    def broken_ranking(hourly: DataFrame) -> DataFrame:
        raise ValueError("ranking broke")

    return [a if a.key.to_user_string() != "ranking" else broken_ranking for a in assets]


def test_a_tick_starting_inside_a_failed_run_fails_only_what_the_run_missed(
    spark, pipeline_ws, instance, clean_ol_env
):
    """The sensor takes a run's materializations from what the tick read when it read them
    all; a tick that starts after some of them reads the run's log again, so assets the run
    did materialize (before the tick) are not reported failed."""
    ws = pipeline_ws
    run(scored_assets(), ws, instance)
    process_events(instance, ws)
    resources = {"io_manager": io_manager(ws)}
    failed = materialize(
        broken_ranking_pipeline(),
        instance=instance,
        resources=resources,
        raise_on_error=False,
        selection=["enriched", "hourly", "ranking"],
    )
    assert not failed.success
    enriched = instance.fetch_materializations(AssetKey("enriched"), limit=1).records[0]
    assert enriched.run_id == failed.run_id
    outcome = process_events(instance, ws, after_storage_id=enriched.storage_id)
    assert outcome.applied.failures == 1
    all_events = file_events(ws)
    events = children_of(all_events, failed.run_id)
    kinds = Counter((asset_of(e), e["eventType"]) for e in events)
    assert kinds == {("hourly", "COMPLETE"): 1, ("ranking", "FAIL"): 1}, kinds
    # The tick met the run midway: the run's own START still comes once, before its end.
    check_parents(all_events)
    assert [e["eventType"] for e in parent_events(all_events, failed.run_id)] == ["START", "FAIL"]
    assert ws.store.get("intermediate-data/enriched").record["step"]["run_id"] == failed.run_id
    assert ws.store.get("intermediate-data/enriched").status == "ok"
    assert ws.store.get("results/ranking").status == "failed"


def test_cancelled_run_sends_abort(tmp_path, instance, clean_ol_env):
    ws = make_workspace(tmp_path / "ws")
    defs = cancelled_before_running(ws, instance)
    process_events(instance, ws, repository_def=defs.get_repository_def())
    all_events = file_events(ws)
    [dagster_run] = check_parents(all_events)
    events = children_of(all_events, dagster_run)
    assert [e["eventType"] for e in events] == ["START", "ABORT"]
    for event in all_events:
        validate_run_event(event)
    # Nothing to tell what it would read: neither inputs nor outputs, never output-only.
    assert events[0].get("inputs", []) == [] and events[0].get("outputs", []) == []


def test_deps_without_data_and_time_partitions_become_run_facets(tmp_path, instance, clean_ol_env):
    from dagster import DailyPartitionsDefinition

    ws = make_workspace(tmp_path / "ws")
    days = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-03")

    @asset(partitions_def=days)
    def landed() -> int:
        return 1

    @asset(partitions_def=days, deps=[landed], description="Counts *landed* files.")
    def counted() -> int:
        return 2

    defs = Definitions(assets=[landed, counted])
    materialize([landed, counted], instance=instance, partition_key="2024-01-02")
    process_events(instance, ws, repository_def=defs.get_repository_def())
    events = file_events(ws)
    for event in events:
        validate_run_event(event)
    counted_events = by_job(events)["counted"]
    assert [e["eventType"] for e in counted_events] == ["START", "COMPLETE"]
    facets = counted_events[1]["run"]["facets"]
    [upstream] = facets["jobDependencies"]["upstream"]
    assert upstream["job"]["name"] == asset_job_name("landed")
    nominal = facets["nominalTime"]
    assert nominal["nominalStartTime"].startswith("2024-01-02T00:00:00")
    assert nominal["nominalEndTime"].startswith("2024-01-03T00:00:00")
    # Not workspace assets: no datasets, but runs that start and complete all the same.
    assert counted_events[1]["outputs"] == [] or "outputs" not in counted_events[1]
    assert "jobDependencies" not in by_job(events)["landed"][1]["run"]["facets"]


def test_start_names_inputs_read_by_path_from_recorded_lineage(
    spark, pipeline_ws, instance, clean_ol_env
):
    from pyspark.sql import DataFrame

    ws = pipeline_ws
    trips_path = str(ws.local_path("source-data/trips"))

    @asset(metadata=dws_ref("intermediate-data", "by_path"))
    def by_path() -> DataFrame:
        return spark.read.option("header", "true").csv(trips_path).select("trip_id", "fare")

    defs = Definitions(assets=[by_path])
    resources = {"io_manager": io_manager(ws)}
    first = materialize([by_path], instance=instance, resources=resources)
    process_events(instance, ws, repository_def=defs.get_repository_def())
    second = materialize([by_path], instance=instance, resources=resources)
    process_events(instance, ws, repository_def=defs.get_repository_def())
    events = file_events(ws)
    for event in events:
        validate_run_event(event)

    def start_of(result) -> dict[str, Any]:
        return next(e for e in children_of(events, result.run_id) if e["eventType"] == "START")

    for result in (first, second):
        start = start_of(result)
        assert [i["name"] for i in start["inputs"]] == [trips_path]
        assert [o["facets"]["symlinks"]["identifiers"][0]["name"] for o in start["outputs"]] == [
            "intermediate-data/by_path"
        ]


def _time(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def test_each_dagster_run_starts_and_ends_as_a_job_of_its_own(
    spark, pipeline_ws, instance, clean_ol_env
):
    """A successful, a failed and a cancelled run: each has its own START and COMPLETE, FAIL
    or ABORT, under the run id its assets' runs name as parent and root, dated by the run."""
    from uuid import UUID

    ws = pipeline_ws
    succeeded = run(scored_assets(), ws, instance).run_id
    failed = materialize(
        failing_pipeline([]),
        instance=instance,
        resources={"io_manager": io_manager(ws)},
        raise_on_error=False,
        selection=["hourly", "ranking"],
    ).run_id
    cancelled_before_running(ws, instance)
    [cancelled] = [r.run_id for r in instance.get_runs() if r.status == DagsterRunStatus.CANCELED]
    process_events(instance, ws)
    events = file_events(ws)
    for event in events:
        validate_run_event(event)
    assert check_parents(events) == {r.run_id for r in instance.get_runs()}
    for run_id, end in ((succeeded, "COMPLETE"), (failed, "FAIL"), (cancelled, "ABORT")):
        record = instance.get_run_record_by_id(run_id)
        start_event, end_event = parent_events(events, run_id)
        assert (start_event["eventType"], end_event["eventType"]) == ("START", end)
        # One job of every Dagster run (its assets stay one job each in a catalog whichever
        # Dagster job ran them), the Dagster job a tag of the run.
        assert end_event["job"]["name"] == DAGSTER_JOB
        tags = {t["key"]: t["value"] for t in end_event["run"]["facets"]["tags"]["tags"]}
        assert tags["dagster/job"] == record.dagster_run.job_name
        assert end_event["job"]["facets"]["jobType"]["jobType"] == "JOB"
        assert "parent" not in end_event["run"]["facets"]  # the root of its hierarchy
        children = children_of(events, run_id)
        assert children and {c["run"]["facets"]["parent"]["job"]["name"] for c in children} == {
            DAGSTER_JOB
        }
        # Asset runs' ids are UUIDv7, the Dagster run's its own UUID4: no outbox key collides.
        assert {UUID(c["run"]["runId"]).version for c in children} == {7}
        assert UUID(run_id).version == 4
        started = (
            record.start_time
            if record.start_time is not None
            else record.create_timestamp.timestamp()
        )  # cancelled while queued: never started
        assert abs(_time(start_event["eventTime"]) - started) < 1e-3
        assert abs(_time(end_event["eventTime"]) - record.end_time) < 1e-3
    assert instance.get_run_record_by_id(cancelled).start_time is None
    fail = parent_events(events, failed)[1]
    assert fail["run"]["facets"]["errorMessage"]["message"]
    assert "secret" not in json.dumps(fail)


def test_ticks_meeting_runs_midway_rerun_sensor_and_replay_repeat_no_parent_event(
    spark, pipeline_ws, instance, clean_ol_env, monkeypatch
):
    """Ticks of two events each meet every run midway and repeat its START: the outbox keeps
    one. Re-reading the log from the start spools nothing; a replay sends each event once."""
    ws = pipeline_ws
    first = run(scored_assets(), ws, instance).run_id
    second = materialize(
        failing_pipeline([]),
        instance=instance,
        resources={"io_manager": io_manager(ws)},
        raise_on_error=False,
        selection=["hourly", "ranking"],
    ).run_id
    outcome = process_events(instance, ws, batch_size=2, time_budget_seconds=1e-6, deliver=False)
    ticks = 1
    while outcome.more:
        outcome = process_events(
            instance,
            ws,
            after_storage_id=outcome.cursor,
            batch_size=2,
            time_budget_seconds=1e-6,
            deliver=False,
        )
        ticks += 1
    assert ticks > 5
    spooled = list(Outbox(ws).events())
    assert check_parents(spooled) == {r.run_id for r in instance.get_runs()}
    assert [e["eventType"] for e in parent_events(spooled, first)] == ["START", "COMPLETE"]
    assert [e["eventType"] for e in parent_events(spooled, second)] == ["START", "FAIL"]
    keys = [event_key(e) for e in spooled]
    assert len(keys) == len(set(keys))

    again = process_events(instance, ws, deliver=False)  # a reset cursor: the whole log again
    assert again.spooled == 0 and list(Outbox(ws).events()) == spooled

    with Receiver() as receiver:
        monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
        transport, _ = make_transport(ws)
        assert Outbox(ws).replay(transport) == len(spooled)
    assert [event_key(e) for e in receiver.events] == keys
    check_parents(receiver.events)
