"""The example's Dagster definitions, built for one workspace, and a runner that materializes
all of it in process (used by `dws-dagster demo` and the tests).

`definitions.py` holds the code location's `defs`; building them here, from a function, lets the
demo and the tests build definitions for their own workspace without importing that module
(which sets up the default workspace when it loads).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetKey,
    DagsterInstance,
    Definitions,
    JobDefinition,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
)
from dagster_pyspark import PySparkResource

from dws_dagster import (
    SparkWorkspaceIOManager,
    WorkspaceResource,
    check_definitions,
    lineage_sensor,
)
from example_project.assets import build_assets
from example_project.setup_workspace import ExampleSize, ExampleWorkspace, ensure_workspace

TAXI_JOB = "taxi_monthly_job"
WEATHER_JOB = "weather_daily_job"
FORECAST_JOB = "forecast_job"
FORECAST_ASSET = "yellow_rides_hourly_forecast"

#: Local Spark for the example: two cores, loopback only, no UI, few shuffle partitions
#: (the data is small; Spark's default 200 would mean 200 tiny tasks and files per write).
SPARK_CONFIG: dict[str, str] = {
    "spark.master": "local[2]",
    "spark.app.name": "dws-dagster-example",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
}
#: Quiet the console: Dagster logs every event at DEBUG to it by default.
QUIET_LOGGING: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def build_definitions(
    root: str | os.PathLike[str] | None = None,
    size: ExampleSize | None = None,
    *,
    spark_config: Mapping[str, str] | None = None,
) -> Definitions:
    """The example's definitions for the workspace at `root` (default: `$DWS_EXAMPLE_WORKSPACE`
    or `example_workspace/`), set up first if missing, checked by `check_definitions`."""
    return definitions_for(ensure_workspace(root, size), spark_config=spark_config)


def definitions_for(
    example: ExampleWorkspace, *, spark_config: Mapping[str, str] | None = None
) -> Definitions:
    """The example's definitions for a workspace `ensure_workspace` has set up."""
    workspace = WorkspaceResource(root=str(example.root), search_parents=False)
    pyspark = PySparkResource(spark_config=dict(spark_config or SPARK_CONFIG))
    return check_definitions(
        Definitions.merge(
            pipeline_definitions(example.size),
            Definitions(
                sensors=[lineage_sensor(snapshot_on_results=True)],
                resources={
                    "io_manager": SparkWorkspaceIOManager(
                        workspace=workspace, pyspark=pyspark, keep_versions=3
                    ),
                    "pyspark": pyspark,
                    "workspace": workspace,
                },
            ),
        )
    )


def pipeline_definitions(size: ExampleSize) -> Definitions:
    """The example's assets, jobs, schedules and executor, without the resources and the
    sensor: what `definitions_for` adds to them in Python, and `example_project/defs/` in a
    `dg` project (`WorkspaceComponent`)."""
    # Spark binds to a non-loopback address it finds unless told otherwise; runs launched in
    # their own process inherit this.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    assets = build_assets(size)
    # One process per run, not per step: Dagster's default multiprocess executor starts a
    # process, hence a Spark JVM (~10 s), for every step. On a cluster, per-step processes
    # are the norm; locally the in-process executor is several times faster.
    taxi_job = define_asset_job(
        TAXI_JOB,
        selection=["yellow_taxi_staging", "yellow_taxi_raw", "yellow_rides_hourly_actuals"],
        executor_def=in_process_executor,
        description="Stage, upsert and aggregate one month of landed yellow-taxi trips.",
    )
    weather_job = define_asset_job(
        WEATHER_JOB,
        selection=["weather_staging", "weather_raw"],
        executor_def=in_process_executor,
        description="Stage and upsert one day of landed weather.",
    )
    forecast_job = define_asset_job(
        FORECAST_JOB,
        selection=["training_data", FORECAST_ASSET],
        executor_def=in_process_executor,
        description="Training data and the hourly ride forecast with its metrics; run it "
        "with use_weather: true for the weather-adjusted model.",
    )
    schedules = [
        build_schedule_from_partitioned_job(taxi_job, name="taxi_monthly_schedule"),
        build_schedule_from_partitioned_job(weather_job, name="weather_daily_schedule"),
    ]
    return Definitions(
        assets=assets,
        jobs=[taxi_job, weather_job, forecast_job],
        schedules=schedules,
        executor=in_process_executor,  # also for "Materialize" in the UI
    )


#: Dagster's run tags for a range of partitions in one run (what a single-run backfill sets).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


@dataclass(frozen=True)
class Step:
    """One run of the example: a job, for one partition or none, with its run config."""

    job: str
    partition: str | None = None
    label: str = ""
    #: (first, last) partition key of a range materialized in one run (a single-run
    #: backfill), instead of one `partition`.
    partition_range: tuple[str, str] | None = None
    run_config: Mapping[str, Any] = field(default_factory=dict)
    assets: tuple[str, ...] | None = None


def forecast_config(use_weather: bool) -> dict[str, Any]:
    return {"ops": {FORECAST_ASSET: {"config": {"use_weather": use_weather}}}}


def plan(defs: Definitions, *, weather_model: bool = True) -> list[Step]:
    """Every run that materializes the whole example, in order: each taxi month, each weather
    day, the training data and baseline forecast, then (optionally) the forecast again with
    `use_weather=True`, the next model iteration."""
    steps: list[Step] = []
    for job, what in ((TAXI_JOB, "taxi"), (WEATHER_JOB, "weather")):
        partitions = defs.resolve_job_def(job).partitions_def
        assert partitions is not None
        keys = partitions.get_partition_keys()
        # One run for all the partitions, as a backfill of assets with
        # BackfillPolicy.single_run() launches it.
        steps.append(
            Step(job, label=f"{what} {keys[0]} … {keys[-1]}", partition_range=(keys[0], keys[-1]))
        )
    steps.append(Step(FORECAST_JOB, label="forecast (baseline)", run_config=forecast_config(False)))
    if weather_model:
        steps.append(
            Step(
                FORECAST_JOB,
                label="forecast (use_weather)",
                run_config=forecast_config(True),
                assets=(FORECAST_ASSET,),
            )
        )
    return steps


@dataclass(frozen=True)
class StepResult:
    step: Step
    run_id: str


def run_step(defs: Definitions, instance: DagsterInstance, step: Step) -> StepResult:
    """Execute one step in this process (the job's own resources and in-process executor)."""
    job: JobDefinition = defs.resolve_job_def(step.job)
    result = job.execute_in_process(
        run_config={**QUIET_LOGGING, **step.run_config},
        instance=instance,
        partition_key=step.partition,
        tags=(
            {
                RANGE_START_TAG: step.partition_range[0],
                RANGE_END_TAG: step.partition_range[1],
            }
            if step.partition_range
            else None
        ),
        asset_selection=[AssetKey(name) for name in step.assets] if step.assets else None,
    )
    return StepResult(step, result.run_id)


def materialize_example(
    defs: Definitions,
    instance: DagsterInstance,
    *,
    weather_model: bool = True,
    after: Callable[[StepResult], None] | None = None,
) -> list[StepResult]:
    """Run `plan(defs)` step by step; `after` is called after each (progress, sensor work)."""
    results = []
    for step in plan(defs, weather_model=weather_model):
        outcome = run_step(defs, instance, step)
        results.append(outcome)
        if after is not None:
            after(outcome)
    return results
