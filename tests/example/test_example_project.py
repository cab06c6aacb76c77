"""The example project (NYC taxi forecast): its generator, its definitions as `dagster dev`
loads them, and the whole example materialized at its smallest size on a real Dagster instance
and the shared Spark session, with the lineage sensor's work done after each forecast run."""

import csv
import dataclasses
import datetime as dt
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    DefaultSensorStatus,
    Definitions,
)

from dws_dagster import SparkWorkspaceIOManager, Workspace, check_definitions, process_events
from dws_dagster.ol.job_names import asset_job_name
from dws_dagster.snapshots.index import list_snapshots
from example_project import generator
from example_project.assets import LandedFileMissingError
from example_project.project import (
    FORECAST_ASSET,
    FORECAST_JOB,
    TAXI_JOB,
    WEATHER_JOB,
    Step,
    build_definitions,
    materialize_example,
    plan,
    run_step,
)
from example_project.setup_workspace import (
    ENV_VAR,
    SMALL,
    ExampleSetupError,
    ExampleSize,
    ensure_workspace,
)
from tests.assets.test_io_manager import root_cause
from tests.conftest import ROOT

FORECAST_REF = "results/yellow_rides_hourly_forecast"
TLC_TYPES = dict(generator.TLC_SCHEMA)


# ------------------------------------------------------------------------- generator


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.csv"))}


def test_generator_is_deterministic_and_lands_tlc_files(tmp_path):
    window = (dt.date(2024, 1, 29), dt.date(2024, 2, 3))
    runs = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        landed = generator.land(
            tmp_path / name / "trips",
            tmp_path / name / "weather",
            *window,
            trips_per_month=3000,
            zones=20,
            seed=seed,
        )
        assert landed.trip_files == 2 and landed.weather_files == 5 and landed.trips > 0
        runs.append(_files(tmp_path / name))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert sorted(runs[0]) == [
        "trips/yellow_tripdata_2024-01.csv",
        "trips/yellow_tripdata_2024-02.csv",
        *[f"weather/weather_2024-0{d}.csv" for d in ("1-29", "1-30", "1-31", "2-01", "2-02")],
    ]
    # Landing again keeps what is there (a second process landing the same data is harmless).
    again = generator.land(
        tmp_path / "a" / "trips",
        tmp_path / "a" / "weather",
        *window,
        trips_per_month=3000,
        zones=20,
        seed=7,
    )
    assert again == generator.Landed()

    with open(tmp_path / "a/trips/yellow_tripdata_2024-01.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == generator.TLC_COLUMNS
    zones = {zone for zone, _ in generator.ZONES[:20]}
    assert {int(r["PULocationID"]) for r in rows} <= zones
    pickups = [dt.datetime.fromisoformat(r["tpep_pickup_datetime"]) for r in rows]
    assert min(p for p in pickups if p.month == 1) >= dt.datetime(2024, 1, 29)
    assert any(p < dt.datetime(2024, 1, 1) for p in pickups)  # a dirty row from another month
    by_hour = Counter(p.hour for p in pickups)
    assert by_hour[18] > 3 * by_hour[4]  # evening peak, small hours quiet
    weather = (tmp_path / "a/weather/weather_2024-02-01.csv").read_text().splitlines()
    assert weather[0] == ",".join(generator.WEATHER_COLUMNS)
    day, temperature, rain = weather[1].split(",")
    assert day == "2024-02-01" and -30 < float(temperature) < 40 and float(rain) >= 0


def test_generated_values_have_tlc_types():
    python_types: dict[str, Any] = {
        "int": int,
        "bigint": int,
        "double": float,
        "string": str,
        "timestamp": str,
    }
    rows = list(
        generator.trip_rows(
            dt.date(2024, 3, 1),
            dt.date(2024, 3, 1),
            dt.date(2024, 3, 3),
            trips_per_month=20_000,
            zones=50,
        )
    )
    assert len(rows) > 500
    nulls = Counter()
    for row in rows:
        assert len(row) == len(generator.TLC_COLUMNS)
        for (name, kind), value in zip(generator.TLC_SCHEMA, row, strict=True):
            if value is None:
                nulls[name] += 1
                continue
            assert isinstance(value, python_types[kind]), (name, value)
            if kind == "timestamp":
                dt.datetime.strptime(value, "%Y-%m-%d %H:%M:%S")
    assert set(nulls) <= {
        "passenger_count",
        "RatecodeID",
        "store_and_fwd_flag",
        "congestion_surcharge",
        "Airport_fee",
    }
    ok = [r for r in rows if r[4] > 0 and r[10] > 0]
    assert all(
        math.isclose(r[16], sum(r[10:16]) + r[17] + r[18], abs_tol=0.011)
        for r in ok
        if r[17] is not None
    )


def test_example_size_is_kept_with_the_workspace(tmp_path):
    example = ensure_workspace(tmp_path / "ws", SMALL)
    assert example.landed.trip_files == 2 and example.landed.weather_files == 15
    assert set(example.workspace.resources) == {
        "source-data",
        "intermediate-data",
        "code",
        "results",
    }
    assert {r.role for r in example.workspace.resources.values()} == {
        "source-data",
        "intermediate-data",
        "code",
        "results",
    }
    again = ensure_workspace(tmp_path / "ws")
    assert again.size == SMALL and again.landed == generator.Landed()
    with pytest.raises(ExampleSetupError, match="was set up for .* use another folder"):
        ensure_workspace(tmp_path / "ws", ExampleSize())
    with pytest.raises(ExampleSetupError, match="months and days"):
        ExampleSize(months=0)


# ----------------------------------------------------------------------- definitions


@pytest.fixture(scope="module")
def small_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("example") / "ws"
    ensure_workspace(root, SMALL)
    return root


def test_definitions_have_jobs_schedules_sensor_and_resources(small_root):
    defs = build_definitions(small_root)
    assert check_definitions(defs) is defs  # build_definitions checked them already
    repository = defs.get_repository_def()
    assert {job.name for job in repository.get_all_jobs()} >= {TAXI_JOB, WEATHER_JOB, FORECAST_JOB}
    for name in (TAXI_JOB, WEATHER_JOB, FORECAST_JOB):
        assert defs.resolve_job_def(name).executor_def.name == "in_process"
    schedules = {s.name: s for s in repository.schedule_defs}
    assert schedules["taxi_monthly_schedule"].cron_schedule == "0 0 1 * *"
    assert schedules["weather_daily_schedule"].cron_schedule == "0 0 * * *"
    assert schedules["taxi_monthly_schedule"].job_name == TAXI_JOB
    [sensor] = repository.sensor_defs
    assert sensor.name == "dws_lineage_sensor"
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    io_manager = defs.resources["io_manager"]
    assert isinstance(io_manager, SparkWorkspaceIOManager) and io_manager.keep_versions == 3
    assert set(defs.resources) == {"io_manager", "pyspark", "workspace"}

    graph = defs.resolve_asset_graph()
    months = ["2024-01-01", "2024-02-01"]
    days = [(SMALL.start + dt.timedelta(days=i)).isoformat() for i in range(15)]
    for name, keys in (
        ("yellow_taxi_staging", months),
        ("yellow_taxi_raw", months),
        ("yellow_rides_hourly_actuals", months),
        ("weather_staging", days),
        ("weather_raw", days),
    ):
        node = graph.get(AssetKey(name))
        assert node.partitions_def.get_partition_keys() == keys, name
        # A backfill is one run (one Spark write) for its whole range.
        assert node.backfill_policy.policy_type.value == "SINGLE_RUN"
        assert node.metadata["partition_expr"]
    for name in ("training_data", FORECAST_ASSET):
        node = graph.get(AssetKey(name))
        assert node.partitions_def is None and node.code_version
        assert node.owners and node.group_name == "forecast" and node.description
    forecast = graph.get(AssetKey(FORECAST_ASSET))
    assert forecast.metadata["dws/ref"] == FORECAST_REF
    assert AssetKey("weather_raw") in forecast.parent_keys  # deps: a possible input
    assert len(plan(defs)) == 1 + 1 + 2  # the taxi months and the weather days: one run each


def test_workspace_yaml_loads_the_code_location(small_root, tmp_path):
    """What `dagster dev -w workspace.yaml` loads, through Dagster's own loader."""
    env = {**os.environ, ENV_VAR: str(small_root), "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    dagster = Path(sys.executable).parent / "dagster"
    result = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation successful" in result.stdout + result.stderr
    assert json.loads((small_root / "example.json").read_text())["days"] == 15


# ------------------------------------------------------------------ the whole example


def _instance(root: Path) -> DagsterInstance:
    root.mkdir(parents=True)
    (root / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return DagsterInstance.from_config(str(root))


@dataclasses.dataclass
class ExampleRun:
    ws: Workspace
    defs: Definitions
    instance: DagsterInstance
    baseline: dict[str, Any]
    weather: dict[str, Any]
    baseline_results: dict[str, Any]
    weather_results: dict[str, Any]
    snapshots: list[str]
    #: every ref's record once the taxi months and the weather days were backfilled
    backfilled: dict[str, Any]


@pytest.fixture(scope="module")
def example(spark, tmp_path_factory):
    """The whole example at its smallest size: 2 taxi months, 15 weather days, training data,
    the baseline forecast, then the forecast with use_weather=True; the lineage sensor's work
    after each forecast run. Spark: the session fixture's, reused by PySparkResource."""
    base = tmp_path_factory.mktemp("example-run")
    defs = build_definitions(base / "ws", SMALL)
    ws = Workspace.open(base / "ws")
    instance = _instance(base / "dagster_home")
    seen: dict[str, Any] = {}
    cursor = 0

    def after(result) -> None:
        nonlocal cursor
        if result.step.job == WEATHER_JOB:  # after the backfills, before any forecast
            seen["backfilled"] = {ref: state.record for ref, state in ws.store.items()}
        if result.step.job != FORECAST_JOB:
            return
        outcome = process_events(
            instance,
            ws,
            after_storage_id=cursor,
            repository_def=defs.get_repository_def(),
            snapshot_on_results=True,
        )
        cursor = outcome.cursor
        assert not outcome.applied.skipped, outcome.applied.skipped
        key = "weather" if "use_weather" in result.step.label else "baseline"
        seen[key] = ws.store.get(FORECAST_REF).record
        seen[f"{key}_results"] = json.loads(
            (ws.local_path(FORECAST_REF) / "results.json").read_text()
        )
        seen.setdefault("snapshots", []).extend(outcome.applied.snapshots)

    try:
        materialize_example(defs, instance, after=after)
        yield ExampleRun(
            ws,
            defs,
            instance,
            seen["baseline"],
            seen["weather"],
            seen["baseline_results"],
            seen["weather_results"],
            seen["snapshots"],
            seen["backfilled"],
        )
    finally:
        instance.dispose()


@pytest.mark.spark
def test_forecast_metrics_are_in_results_json(example):
    for results in (example.baseline_results, example.weather_results):
        metrics = results["metrics"]
        for name in ("mae", "rmse"):
            assert math.isfinite(metrics[name]) and metrics[name] > 0, metrics
        assert metrics["rmse"] >= metrics["mae"]
        assert metrics["hours_scored"] == 7 * 24 * SMALL.zones
        assert results["step"] == FORECAST_ASSET
    assert example.baseline_results["parameters"]["use_weather"] is False
    assert example.weather_results["parameters"]["use_weather"] is True
    assert "rain_multiplier" in example.weather_results["metrics"]
    assert example.weather["metrics"] == example.weather_results["metrics"]
    # One snapshot per forecast run, each with its results.
    assert len(example.snapshots) == 2
    infos = {info.hash: info for info in list_snapshots(example.ws)}
    assert [infos[h].metrics["mae"] for h in example.snapshots] == [
        example.baseline_results["metrics"]["mae"],
        example.weather_results["metrics"]["mae"],
    ]


@pytest.mark.spark
def test_use_weather_changes_the_forecasts_recorded_lineage(example):
    baseline, weather = example.baseline, example.weather
    base_inputs = {item["ref"] for item in baseline["inputs"]}
    weather_inputs = {item["ref"] for item in weather["inputs"]}
    assert base_inputs == {"intermediate-data/training_data"}
    days = {
        f"intermediate-data/weather_raw/{(SMALL.start + dt.timedelta(days=i)).isoformat()}"
        for i in range(15)
    }
    assert weather_inputs == base_inputs | days
    assert not any("weather" in ref for ref in baseline["provenance"])
    assert days | {f"source-data/weather/weather_{d[-10:]}.csv" for d in days} | {
        d.replace("weather_raw", "weather_staging") for d in days
    } <= set(weather["provenance"])
    assert weather["version"] != baseline["version"]
    assert weather["parameters"]["use_weather"] is True
    assert baseline["parameters"]["use_weather"] is False
    # Both iterations read the same training data: only the weather is new.
    assert (
        baseline["provenance"]["intermediate-data/training_data"]
        == weather["provenance"]["intermediate-data/training_data"]
    )
    # The OpenLineage COMPLETE event of the weather run names the weather inputs too.
    events = [
        json.loads(line)
        for line in (example.ws.meta_dir / "openlineage" / "events.jsonl").read_text().splitlines()
    ]
    complete = [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == asset_job_name(FORECAST_ASSET)
    ]
    assert len(complete) == 2
    # The weather days are one dataset, the asset's root, with the days in its subset facet.
    names = [
        {d["facets"]["symlinks"]["identifiers"][0]["name"]: d for d in e["inputs"]}
        for e in complete
    ]
    root = "intermediate-data/weather_raw"
    assert any(root in n for n in names) and any(root not in n for n in names)
    read = next(n[root] for n in names if root in n)
    assert {
        f"{root}/{p['identifier']}"
        for p in read["inputFacets"]["subset"]["inputCondition"]["partitions"]
    } == days


@pytest.mark.spark
def test_staging_is_typed_as_tlc_cleaned_and_reads_the_landed_file(example, spark):
    ws = example.ws
    ref = "intermediate-data/yellow_taxi_staging/2024-01"
    staged = spark.read.parquet(str(ws.local_path(ref)))
    assert [(f.name, f.dataType.simpleString()) for f in staged.schema.fields] == list(
        generator.TLC_SCHEMA
    )
    record = ws.store.get(ref).record
    landed = "source-data/yellow_tripdata/yellow_tripdata_2024-01.csv"
    assert [item["ref"] for item in record["inputs"]] == [landed]
    assert record["inputs"][0]["version"] == ws.version_of(landed)
    with open(ws.local_path(landed), newline="") as handle:
        landed_rows = sum(1 for _ in handle) - 1
    rows = staged.count()
    assert 0 < rows < landed_rows
    assert (
        staged.where(
            "trip_distance <= 0 OR fare_amount <= 0 OR "
            "tpep_dropoff_datetime <= tpep_pickup_datetime OR "
            "tpep_pickup_datetime < '2024-01-01' OR "
            "tpep_pickup_datetime >= '2024-02-01'"
        ).count()
        == 0
    )
    raw = ws.store.get("intermediate-data/yellow_taxi_raw/2024-01").record
    assert [item["ref"] for item in raw["inputs"]] == [ref]
    actuals = spark.read.parquet(
        str(ws.local_path("intermediate-data/yellow_rides_hourly_actuals/2024-01"))
    )
    # Jan 25-31 on a full zone x hour grid; every staged trip counted once.
    assert actuals.count() == actuals.select("zone").distinct().count() * 7 * 24
    assert actuals.agg({"rides": "sum"}).first()[0] == rows


@pytest.mark.spark
def test_rerunning_a_month_upserts_to_the_same_versions(example):
    ws = example.ws
    refs = [
        f"intermediate-data/{name}/2024-02"
        for name in ("yellow_taxi_staging", "yellow_taxi_raw", "yellow_rides_hourly_actuals")
    ]
    before = {ref: ws.store.get(ref).version for ref in refs}
    run_step(example.defs, example.instance, Step(TAXI_JOB, "2024-02-01"))
    assert {ref: ws.store.get(ref).version for ref in refs} == before
    raw = ws.store.get("intermediate-data/yellow_taxi_raw/2024-02").record
    assert [item["ref"] for item in raw["inputs"]] == [refs[0]]  # not its own earlier data


@pytest.mark.spark
def test_a_missing_landed_file_is_named(spark, tmp_path, instance):
    size = dataclasses.replace(SMALL, trips_per_month=500)
    defs = build_definitions(tmp_path / "ws", size)
    landed = tmp_path / "ws/data/source/yellow_tripdata/yellow_tripdata_2024-02.csv"
    landed.unlink()
    with pytest.raises(Exception) as info:
        run_step(defs, instance, Step(TAXI_JOB, "2024-02-01"))
    error = root_cause(info.value)
    assert isinstance(error, LandedFileMissingError)
    assert "asset 'yellow_taxi_staging'" in str(error)
    assert f"landed file {landed} is missing" in str(error)
    assert "python -m example_project.setup_workspace" in str(error)


@pytest.mark.spark
def test_backfills_in_one_run_record_what_one_run_per_partition_records(example, tmp_path):
    """The example backfills the taxi months and the weather days as one run each: every
    partition's record (inputs, the landed file its rows came from included, provenance,
    version, column lineage) is what a run of that partition alone records in a workspace set
    up the same way."""
    defs = build_definitions(tmp_path / "ws", SMALL)
    ws = Workspace.open(tmp_path / "ws")
    days = [(SMALL.start + dt.timedelta(days=i)).isoformat() for i in (0, 7, 14)]
    months = ["2024-01-01", "2024-02-01"]
    with DagsterInstance.ephemeral() as instance:
        for month in months:
            run_step(defs, instance, Step(TAXI_JOB, month))
        for day in days:
            run_step(defs, instance, Step(WEATHER_JOB, day))
    refs = [
        f"intermediate-data/{name}/{month[:7]}"
        for name in ("yellow_taxi_staging", "yellow_taxi_raw", "yellow_rides_hourly_actuals")
        for month in months
    ] + [
        f"intermediate-data/{name}/{day}"
        for name in ("weather_staging", "weather_raw")
        for day in days
    ]

    def comparable(record: dict[str, Any]) -> dict[str, Any]:
        data = {k: v for k, v in record.items() if k not in ("start_time", "end_time")}
        data["step"] = {k: v for k, v in data["step"].items() if k != "run_id"}
        return data

    for ref in refs:
        alone, ranged = ws.store.get(ref).record, example.backfilled[ref]
        assert comparable(ranged) == comparable(alone), ref
    staged = example.backfilled[f"intermediate-data/weather_staging/{days[1]}"]
    assert [i["ref"] for i in staged["inputs"]] == [f"source-data/weather/weather_{days[1]}.csv"]
