"""The example project's OpenLineage events, folded the way Marquez folds them (catalog_rules):
the graph a catalog draws from a real partitioned pipeline must be whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance

from dws_dagster import Workspace, process_events
from dws_dagster.ol.job_names import asset_job_name
from example_project.project import build_definitions, materialize_example
from example_project.setup_workspace import SMALL
from tests.ol import catalog_rules
from tests.ol.ol_spec import validate_run_event

pytestmark = pytest.mark.spark

FORECAST = asset_job_name("yellow_rides_hourly_forecast")


def _instance(root: Path) -> DagsterInstance:
    root.mkdir(parents=True)
    (root / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return DagsterInstance.from_config(str(root))


@pytest.fixture(scope="module")
def events(spark, tmp_path_factory) -> list[dict[str, Any]]:
    """Every event of the whole small example, the sensor's work done after every step."""
    base = tmp_path_factory.mktemp("example-catalog")
    defs = build_definitions(base / "ws", SMALL)
    ws = Workspace.open(base / "ws")
    instance = _instance(base / "dagster_home")
    cursor = 0

    def after(_result: Any) -> None:
        nonlocal cursor
        outcome = process_events(
            instance, ws, after_storage_id=cursor, repository_def=defs.get_repository_def()
        )
        cursor = outcome.cursor
        assert not outcome.applied.skipped, outcome.applied.skipped

    try:
        materialize_example(defs, instance, after=after)
    finally:
        instance.dispose()
    path = ws.meta_dir / "openlineage" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _landed(dataset: dict[str, Any]) -> bool:
    """Data in the example's source-data resource: landed files no job writes."""
    links = dataset.get("facets", {}).get("symlinks", {}).get("identifiers", [])
    return any(link["name"].startswith("source-data/") for link in links)


def test_every_event_conforms_to_the_spec(events):
    assert events
    for event in events:
        validate_run_event(event)


def test_every_dataset_read_has_a_producer_in_the_latest_graph(events):
    assert catalog_rules.inputs_without_producer(events, _landed) == []


def test_every_dataset_has_one_producer_named_as_marquez_names_it(events):
    assert catalog_rules.datasets_with_several_producers(events) == []
    assert catalog_rules.renamed_jobs(events) == []


def test_every_asset_dataset_is_described(events):
    assert catalog_rules.undescribed_outputs(events) == []
    assert catalog_rules.erased_descriptions(events) == []
    assert catalog_rules.misplaced_quality_facets(events) == []
    [forecast] = {
        json.dumps(o["facets"]["ownership"], sort_keys=True)
        for e in events
        if e["job"]["name"] == FORECAST
        for o in e["outputs"]
    }
    assert json.loads(forecast)["owners"] == [{"name": "forecasting", "type": "team"}]


def test_the_forecasts_metrics_are_a_facet_of_its_dataset(events):
    metrics = [
        o["facets"]["dws_metrics"]["metrics"]
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == FORECAST
        for o in e["outputs"]
    ]
    assert len(metrics) == 2  # the baseline, then the forecast with weather
    for found in metrics:
        assert 0 < found["mae"] <= found["rmse"]
        assert found["hours_scored"] == 7 * 24 * SMALL.zones
    assert "rain_multiplier" not in metrics[0] and "rain_multiplier" in metrics[1]
    # A START knows no metrics yet; no other asset has any.
    assert not [
        e["job"]["name"]
        for e in events
        for o in e["outputs"]
        if "dws_metrics" in o["facets"]
        and (e["eventType"] != "COMPLETE" or e["job"]["name"] != FORECAST)
    ]


def test_partitioned_assets_are_one_dataset_each_with_their_partitions_as_subsets(events):
    outputs: dict[str, set[tuple[str, str]]] = {}
    written: dict[str, set[str]] = {}
    for event in events:
        if event["eventType"] != "COMPLETE":
            continue
        for output in event["outputs"]:
            outputs.setdefault(event["job"]["name"], set()).add(catalog_rules.dataset_id(output))
            subset = output.get("outputFacets", {}).get("subset")
            if subset is not None:
                written.setdefault(event["job"]["name"], set()).update(
                    p["identifier"] for p in subset["outputCondition"]["partitions"]
                )
    # One identity per asset, however many partitions were written.
    assert all(len(ids) == 1 for ids in outputs.values()), outputs
    assert len(written[asset_job_name("weather_raw")]) == SMALL.days
    assert asset_job_name("training_data") not in written  # unpartitioned: no subset
    # The forecast with weather reads the 15 days as ONE dataset whose condition lists them.
    weather_reads = [
        d
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == FORECAST
        for d in e["inputs"]
        if d["name"].endswith("/weather_raw")
    ]
    assert weather_reads
    assert (
        len(weather_reads[-1]["inputFacets"]["subset"]["inputCondition"]["partitions"])
        == SMALL.days
    )


def test_every_run_ends(events):
    assert catalog_rules.unfinished_runs(events) == []


def test_every_parent_run_starts_and_ends(events):
    parents = catalog_rules.parent_run_ids(events)
    assert parents, "the asset runs name no parent"
    own = {event["run"]["runId"] for event in events}
    assert parents <= own, "a parent named by an asset run has no event of its own"
    assert catalog_rules.unfinished_parents(events) == []


def test_every_column_edge_resolves_to_an_output_and_an_input_field(events):
    assert catalog_rules.dropped_column_edges(events) == []
    assert any(
        o.get("facets", {}).get("columnLineage") for e in events for o in e.get("outputs", ())
    )


def test_start_and_complete_name_the_same_datasets(events):
    assert catalog_rules.start_complete_differences(events) == []
    # The forecast with use_weather reads weather_raw by path: its START cannot know the data
    # will be read, so it announces the dependency, and the COMPLETE names the data read.
    forecast_runs: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["job"]["name"] == FORECAST:
            forecast_runs.setdefault(event["run"]["runId"], {})[event["eventType"]] = event
    with_weather = [
        run
        for run in forecast_runs.values()
        if any(d["name"].endswith("/weather_raw") for d in run["COMPLETE"]["inputs"])
    ]
    assert with_weather, "the example never ran the forecast with weather"
    for run in with_weather:
        upstream = run["START"]["run"]["facets"]["jobDependencies"]["upstream"]
        assert asset_job_name("weather_raw") in {item["job"]["name"] for item in upstream}
        assert "jobDependencies" not in run["COMPLETE"]["run"]["facets"] or asset_job_name(
            "weather_raw"
        ) not in {
            item["job"]["name"]
            for item in run["COMPLETE"]["run"]["facets"]["jobDependencies"]["upstream"]
        }
    # training_data's START names the hourly actuals as its COMPLETE does: one root dataset.
    training = [e for e in events if e["job"]["name"] == asset_job_name("training_data")]
    assert {e["eventType"] for e in training} >= {"START", "COMPLETE"}
    assert (
        len({tuple(sorted(catalog_rules.dataset_id(d) for d in e["inputs"])) for e in training})
        == 1
    )


def test_start_announces_the_partition_its_complete_writes(events):
    def written(event: dict[str, Any]) -> list[Any]:
        return [
            (catalog_rules.dataset_id(o), o.get("outputFacets", {}).get("subset"))
            for o in event["outputs"]
        ]

    starts = {e["run"]["runId"]: e for e in events if e["eventType"] == "START"}
    checked = 0
    for event in events:
        start = starts.get(event["run"]["runId"])
        if event["eventType"] != "COMPLETE" or start is None or not start["outputs"]:
            continue
        planned, done = written(start), written(event)
        # Same identity and the same partitions (the version is only known after the write).
        assert [(i, s and s["outputCondition"]) for i, s in planned] == [
            (i, s and s["outputCondition"]) for i, s in done
        ], event["job"]["name"]
        checked += any(s is not None for _i, s in done)
    assert checked >= SMALL.days


def test_job_dependencies_name_only_deps_whose_data_the_run_did_not_read(events):
    forecasts = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"] == FORECAST]
    reads = []
    for event in forecasts:
        reads_weather = any(
            link["name"].startswith("intermediate-data/weather_raw")
            for d in event["inputs"]
            for link in d["facets"]["symlinks"]["identifiers"]
        )
        reads.append(reads_weather)
        upstream = event["run"]["facets"].get("jobDependencies", {}).get("upstream", [])
        assert ({u["job"]["name"] for u in upstream} == {asset_job_name("weather_raw")}) != (
            reads_weather
        )
    assert sorted(reads) == [False, True]  # the baseline, then the forecast with weather


def test_start_announces_the_partitions_its_complete_reads(events):
    def read(event: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
        return {
            catalog_rules.dataset_id(d): [
                p["identifier"] for p in d["inputFacets"]["subset"]["inputCondition"]["partitions"]
            ]
            for d in event["inputs"]
            if "subset" in d.get("inputFacets", {})
        }

    starts = {e["run"]["runId"]: e for e in events if e["eventType"] == "START"}
    checked = 0
    for event in events:
        start = starts.get(event["run"]["runId"])
        if event["eventType"] != "COMPLETE" or start is None:
            continue
        planned, done = read(start), read(event)
        for identity in planned.keys() & done.keys():
            assert sorted(planned[identity]) == sorted(done[identity]), event["job"]["name"]
            checked += 1
    assert checked >= SMALL.days  # weather_raw reads each day of weather_staging
