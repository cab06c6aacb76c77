"""The example's assets: landed TLC trips and weather → staging → raw → hourly actuals →
training data → an hourly ride forecast per pickup zone, all Spark DataFrames stored by
`SparkWorkspaceIOManager`, which records their lineage with no lineage code here.

Built by `build_assets(size)` because the partitions follow the data that was landed (months
for trips, days for weather); each partition is its own workspace ref, version and lineage
record; a backfill of many partitions runs as one run and one Spark write
(`BackfillPolicy.single_run()`: each asset's `partition_expr` names the column that tells the
rows of each partition apart), and records each partition as one run per partition would.
No `from __future__ import annotations`: Dagster inspects the `context` and `config`
annotations when the assets are defined.
"""

import datetime as dt
import functools
import warnings
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetDep,
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    BetaWarning,
    Config,
    DailyPartitionsDefinition,
    MetadataValue,
    MonthlyPartitionsDefinition,
    asset,
)
from dagster_pyspark import PySparkResource
from pydantic import Field
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from dws_dagster import DwsError, WorkspaceResource, dws_metrics, dws_ref
from dws_dagster.assets.bindings import binding_from_metadata
from dws_dagster.assets.partitions import partition_key_ref
from dws_dagster.spark import storage
from dws_dagster.workspace.refs import ResourceRef
from example_project.generator import (
    TLC_SCHEMA,
    WEATHER_SCHEMA,
    next_month,
    trip_file_name,
    weather_file_name,
)
from example_project.setup_workspace import TRIPS_SUBPATH, WEATHER_SUBPATH, ExampleSize

DATA_OWNER = "team:data-engineering"
FORECAST_OWNER = "team:forecasting"
#: A trip's identity in the raw table: TLC publishes no trip id.
TRIP_KEY = (
    "VendorID",
    "tpep_pickup_datetime",
    "tpep_dropoff_datetime",
    "PULocationID",
    "DOLocationID",
)
SEASON_HOURS = 168  # same hour, same weekday, one week earlier

MONTHLY = "{start:%Y-%m}"
#: The column holding each row's partition (Dagster's `partition_expr` metadata), for
#: single-run backfills.
PICKUP_PARTITION = {"partition_expr": "tpep_pickup_datetime"}
TAXI_STAGING = {
    **dws_ref("intermediate-data", "yellow_taxi_staging", partition_template=MONTHLY),
    **PICKUP_PARTITION,
}
TAXI_RAW = {
    **dws_ref("intermediate-data", "yellow_taxi_raw", partition_template=MONTHLY),
    **PICKUP_PARTITION,
}
WEATHER_STAGING = {**dws_ref("intermediate-data", "weather_staging"), "partition_expr": "date"}
WEATHER_RAW = {**dws_ref("intermediate-data", "weather_raw"), "partition_expr": "date"}
HOURLY_ACTUALS = {
    **dws_ref("intermediate-data", "yellow_rides_hourly_actuals", partition_template=MONTHLY),
    "partition_expr": "hour",
}
TRAINING_DATA = dws_ref("intermediate-data", "training_data")
FORECAST = dws_ref("results", "yellow_rides_hourly_forecast")


class LandedFileMissingError(DwsError):
    """A landed source file the asset reads is not there."""


class MissingWeatherError(DwsError):
    """The weather-adjusted forecast needs weather partitions that were not materialized."""


class ForecastConfig(Config):
    """The forecast's run configuration: each value is recorded as a lineage parameter, so
    model iterations are told apart by their parameters as well as their versions."""

    use_weather: bool = Field(
        default=False,
        description="Adjust the seasonal-naive forecast by a rain multiplier "
        "fitted on the training weeks (reads weather_raw).",
    )
    horizon_days: int = Field(
        default=7, ge=1, description="Days at the end of the data that are forecast and scored."
    )
    rain_threshold_mm: float = Field(
        default=1.0,
        ge=0,
        description="A day with at least this much precipitation counts as rainy.",
    )


def _ddl(schema: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in schema)


def _upsert(new: DataFrame, existing: DataFrame | None, keys: tuple[str, ...]) -> DataFrame:
    """Merge `new` into `existing` by `keys`: the new row wins, else the existing one; ties
    among new rows are broken on every column, so the result (and its version) never depends
    on row order."""
    columns = new.columns
    tagged = new.withColumn("_is_new", F.lit(1))
    if existing is not None:
        tagged = tagged.unionByName(existing.select(*columns).withColumn("_is_new", F.lit(0)))
    others = [c for c in columns if c not in keys]
    newest_first = Window.partitionBy(*keys).orderBy(
        F.desc("_is_new"), *[F.asc_nulls_first(c) for c in others]
    )
    return (
        tagged.withColumn("_rank", F.row_number().over(newest_first))
        .where(F.col("_rank") == 1)
        .select(*columns)
    )


def _own_partitions(
    spark: SparkSession,
    workspace: WorkspaceResource,
    metadata: dict[str, Any],
    context: AssetExecutionContext,
    columns: list[str],
) -> DataFrame | None:
    """This asset's current data for the partitions being written, if any (the upsert's
    target). Read by path: the IO manager leaves an asset's own earlier versions out of its
    inputs, as they are not a second source of truth."""
    ws = workspace.workspace()
    asset = context.asset_key.to_user_string()
    binding = binding_from_metadata(metadata, what=f"asset '{asset}'")
    locations = [
        ws.location(
            partition_key_ref(binding, context.assets_def.partitions_def, key, f"asset '{asset}'")
        )
        for key in context.partition_keys
    ]
    existing = [location for location in locations if storage.exists(spark, location)]
    if not existing:
        return None
    return storage.read(spark, existing, what=f"asset '{asset}'").select(*columns)


def _timestamp(value: dt.datetime | dt.date) -> Column:
    """A timestamp literal read in the session time zone (UTC), whatever the local zone of
    the Python process (PySpark turns naive datetimes into instants by the local zone)."""
    return F.lit(f"{value:%Y-%m-%d %H:%M:%S}").cast("timestamp")


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day)


def _landed(workspace: WorkspaceResource, subpath: str, asset: str) -> str:
    ws = workspace.workspace()
    path = ws.local_path(ResourceRef("source-data", subpath))
    if not path.is_file():
        raise LandedFileMissingError(
            f"asset '{asset}': landed file {path} is missing; land it again with "
            f"'python -m example_project.setup_workspace {ws.root}', or drop the file there"
        )
    return ws.location(ResourceRef("source-data", subpath))


@dataclass(frozen=True)
class ExamplePartitions:
    months: MonthlyPartitionsDefinition
    days: DailyPartitionsDefinition


def partitions_for(size: ExampleSize) -> ExamplePartitions:
    """Months and days of the landed data; fixed ends, as no more data will land."""
    months = size.month_keys
    return ExamplePartitions(
        months=MonthlyPartitionsDefinition(
            start_date=months[0].isoformat(), end_date=next_month(months[-1]).isoformat()
        ),
        days=DailyPartitionsDefinition(
            start_date=size.start.isoformat(), end_date=size.end.isoformat()
        ),
    )


def build_assets(size: ExampleSize) -> list[AssetsDefinition]:
    """The example's assets for the data `size` describes."""
    with warnings.catch_warnings():
        # backfill_policy is marked beta; it is how a backfill asks for one run per range.
        warnings.simplefilter("ignore", BetaWarning)
        return _build_assets(size)


def _build_assets(size: ExampleSize) -> list[AssetsDefinition]:
    parts = partitions_for(size)
    # One run (one Spark write) for a backfill of many partitions.
    one_run = BackfillPolicy.single_run()
    taxi: dict[str, Any] = {
        "group_name": "taxi",
        "owners": [DATA_OWNER],
        "kinds": {"spark", "parquet"},
    }
    weather: dict[str, Any] = {
        "group_name": "weather",
        "owners": [DATA_OWNER],
        "kinds": {"spark", "parquet"},
    }
    forecast: dict[str, Any] = {
        "group_name": "forecast",
        "owners": [FORECAST_OWNER],
        "kinds": {"spark", "parquet"},
    }
    trips_ddl = _ddl(TLC_SCHEMA)
    weather_ddl = _ddl(WEATHER_SCHEMA)

    @asset(
        partitions_def=parts.months,
        backfill_policy=one_run,
        metadata=TAXI_STAGING,
        code_version="1",
        **taxi,
    )
    def yellow_taxi_staging(
        context: AssetExecutionContext, pyspark: PySparkResource, workspace: WorkspaceResource
    ) -> DataFrame:
        """Months of TLC yellow trips as landed, typed as TLC's Parquet files and cleaned:
        no non-positive distances or fares, dropoff after pickup, pickups inside the month.

        The landed files are read by path, so the lineage is the files themselves (their byte
        versions, one file per month) rather than the whole landing folder."""
        months = []
        for key in context.partition_keys:
            month = dt.date.fromisoformat(key)
            location = _landed(
                workspace, f"{TRIPS_SUBPATH}/{trip_file_name(month)}", "yellow_taxi_staging"
            )
            trips = pyspark.spark_session.read.csv(
                location, header=True, schema=trips_ddl, mode="PERMISSIVE"
            )
            # Each month's file gives its own month's pickups (a file may hold a few of the
            # months around it), whether the month is written alone or in a range.
            months.append(
                trips.where(
                    (F.col("trip_distance") > 0)
                    & (F.col("fare_amount") > 0)
                    & (F.col("tpep_dropoff_datetime") > F.col("tpep_pickup_datetime"))
                    & (F.col("tpep_pickup_datetime") >= _timestamp(month))
                    & (F.col("tpep_pickup_datetime") < _timestamp(next_month(month)))
                )
            )
        return functools.reduce(DataFrame.unionByName, months)

    @asset(
        partitions_def=parts.months,
        backfill_policy=one_run,
        metadata=TAXI_RAW,
        code_version="1",
        **taxi,
    )
    def yellow_taxi_raw(
        context: AssetExecutionContext, yellow_taxi_staging: DataFrame, workspace: WorkspaceResource
    ) -> DataFrame:
        """The raw trip table's months: the staged months upserted into what the table held,
        by trip identity (vendor, pickup and dropoff times and zones); re-landed trips
        replace their earlier rows."""
        existing = _own_partitions(
            yellow_taxi_staging.sparkSession,
            workspace,
            TAXI_RAW,
            context,
            yellow_taxi_staging.columns,
        )
        return _upsert(yellow_taxi_staging, existing, TRIP_KEY)

    @asset(
        partitions_def=parts.days,
        backfill_policy=one_run,
        metadata=WEATHER_STAGING,
        code_version="1",
        **weather,
    )
    def weather_staging(
        context: AssetExecutionContext, pyspark: PySparkResource, workspace: WorkspaceResource
    ) -> DataFrame:
        """Days of Central Park weather as landed, typed, with implausible readings
        dropped. Read by path: the lineage is the days' landed files (a day's file holds that
        day's readings, so each day records its own file, alone or in a range)."""
        days = [dt.date.fromisoformat(key) for key in context.partition_keys]
        locations = [
            _landed(workspace, f"{WEATHER_SUBPATH}/{weather_file_name(day)}", "weather_staging")
            for day in days
        ]
        # One scan of all the days' files: a file per day read alone would make one Spark
        # task, and one compiled plan, per day.
        readings = pyspark.spark_session.read.csv(
            locations, header=True, schema=weather_ddl, mode="PERMISSIVE"
        )
        return readings.where(
            F.col("date").between(F.lit(days[0]), F.lit(days[-1]))
            & F.col("temperature_c").between(-40.0, 50.0)
            & F.col("precipitation_mm").between(0.0, 500.0)
        )

    @asset(
        partitions_def=parts.days,
        backfill_policy=one_run,
        metadata=WEATHER_RAW,
        code_version="1",
        **weather,
    )
    def weather_raw(
        context: AssetExecutionContext, weather_staging: DataFrame, workspace: WorkspaceResource
    ) -> DataFrame:
        """The weather table's days: the staged readings upserted by date."""
        existing = _own_partitions(
            weather_staging.sparkSession, workspace, WEATHER_RAW, context, weather_staging.columns
        )
        return _upsert(weather_staging, existing, ("date",))

    @asset(
        partitions_def=parts.months,
        backfill_policy=one_run,
        metadata=HOURLY_ACTUALS,
        code_version="1",
        **taxi,
    )
    def yellow_rides_hourly_actuals(
        context: AssetExecutionContext, yellow_taxi_raw: DataFrame
    ) -> DataFrame:
        """Rides per pickup zone and hour of each month, zero-filled: every zone seen in a
        month has a row for every hour of that month's landed data, so a missing hour reads as
        no rides, not as unknown."""
        window = context.partition_time_window
        start = max(window.start.replace(tzinfo=None), _midnight(size.start))
        last = min(window.end.replace(tzinfo=None), _midnight(size.end)) - dt.timedelta(hours=1)
        spark = yellow_taxi_raw.sparkSession
        hours = spark.range(1).select(
            F.explode(
                F.sequence(_timestamp(start), _timestamp(last), F.expr("INTERVAL 1 HOUR"))
            ).alias("hour")
        )
        trips = yellow_taxi_raw.select(
            F.col("PULocationID").alias("zone"),
            F.date_trunc("hour", "tpep_pickup_datetime").alias("hour"),
        )
        counts = trips.groupBy("zone", "hour").agg(F.count(F.lit(1)).alias("rides"))
        month = F.date_trunc("month", "hour").alias("month")
        grid = (
            trips.select("zone", month)
            .distinct()
            .join(hours.select("hour", month), "month")
            .select("zone", "hour")
        )
        return grid.join(counts, ["zone", "hour"], "left").select(
            "zone", "hour", F.coalesce("rides", F.lit(0)).alias("rides")
        )

    @asset(metadata=TRAINING_DATA, code_version="1", **forecast)
    def training_data(yellow_rides_hourly_actuals: DataFrame) -> DataFrame:
        """Every month of hourly actuals on one complete zone × hour grid, with the calendar
        features and the ride count one week earlier (the seasonal-naive predictor)."""
        actuals = yellow_rides_hourly_actuals
        bounds = actuals.agg(F.min("hour").alias("first"), F.max("hour").alias("last"))
        hours = bounds.select(
            F.explode(F.sequence("first", "last", F.expr("INTERVAL 1 HOUR"))).alias("hour")
        )
        grid = actuals.select("zone").distinct().crossJoin(hours)
        full = grid.join(actuals, ["zone", "hour"], "left").select(
            "zone", "hour", F.coalesce("rides", F.lit(0)).alias("rides")
        )
        by_zone = Window.partitionBy("zone").orderBy("hour")
        return full.select(
            "zone",
            "hour",
            F.to_date("hour").alias("date"),
            F.hour("hour").alias("hour_of_day"),
            F.dayofweek("hour").alias("day_of_week"),
            "rides",
            F.lag("rides", SEASON_HOURS).over(by_zone).alias("rides_week_before"),
        )

    @asset(metadata=FORECAST, code_version="1", deps=[AssetDep("weather_raw")], **forecast)
    def yellow_rides_hourly_forecast(
        context: AssetExecutionContext,
        config: ForecastConfig,
        training_data: DataFrame,
        pyspark: PySparkResource,
        workspace: WorkspaceResource,
    ) -> DataFrame:
        """Hourly rides per zone for the last `horizon_days` of the data, forecast by the
        seasonal-naive baseline (the same hour a week before), scored against the actuals
        (MAE, RMSE). With `use_weather`, the baseline is adjusted by a rain multiplier fitted on
        the weeks before, and weather_raw becomes a recorded input: the lineage of the two
        model iterations differs, not only their parameters."""
        newest = training_data.agg(F.max("date")).first()
        assert newest is not None  # an aggregation without grouping returns one row
        last_day = newest[0]
        if last_day is None:
            raise DwsError(
                "asset 'yellow_rides_hourly_forecast': training_data is empty; "
                "materialize the taxi months first"
            )
        horizon_start = last_day - dt.timedelta(days=config.horizon_days - 1)
        in_horizon = F.col("date") >= F.lit(horizon_start)
        scored = training_data.where(in_horizon & F.col("rides_week_before").isNotNull())
        prediction: Column = F.col("rides_week_before").cast("double")
        model = "seasonal_naive"
        extra: dict[str, float] = {}
        if config.use_weather:
            days = _weather_days(
                training_data,
                pyspark.spark_session,
                workspace,
                parts.days,
                context,
                config.rain_threshold_mm,
            )
            history = training_data.where(~in_horizon)
            typical = history.groupBy("zone", "hour_of_day").agg(F.avg("rides").alias("typical"))
            multiplier = _rain_multiplier(history, typical, days)
            extra["rain_multiplier"] = round(multiplier, 4)
            today = days.select(F.col("date"), F.col("rainy").alias("rainy_today"))
            before = days.select(
                F.date_add("date", 7).alias("date"), F.col("rainy").alias("rainy_week_before")
            )
            scored = (
                scored.join(today, "date", "left")
                .join(before, "date", "left")
                .join(typical, ["zone", "hour_of_day"], "left")
            )
            factor = F.when(F.col("rainy_today"), F.lit(multiplier)).otherwise(F.lit(1.0)) / F.when(
                F.col("rainy_week_before"), F.lit(multiplier)
            ).otherwise(F.lit(1.0))
            # The rain effect is added on the zone's typical level for the hour, not by
            # scaling last week's count, which would scale its noise as well.
            prediction = prediction + (factor - F.lit(1.0)) * F.coalesce(
                F.col("typical"), F.lit(0.0)
            )
            model = "seasonal_naive_rain"
        result = scored.select(
            "zone",
            "hour",
            F.col("rides").alias("actual"),
            F.round(prediction, 3).alias("forecast"),
            F.lit(model).alias("model"),
        )
        errors = result.agg(
            F.avg(F.abs(F.col("actual") - F.col("forecast"))).alias("mae"),
            F.sqrt(F.avg(F.pow(F.col("actual") - F.col("forecast"), 2))).alias("rmse"),
            F.count(F.lit(1)).alias("hours"),
        ).first()
        if errors is None or not errors["hours"]:
            raise DwsError(
                "asset 'yellow_rides_hourly_forecast': no hour to score: the data needs at "
                f"least {config.horizon_days + 7} days (a week of history before the "
                f"{config.horizon_days} forecast days); land a longer window"
            )
        metrics = {
            "mae": round(float(errors["mae"]), 4),
            "rmse": round(float(errors["rmse"]), 4),
            "hours_scored": int(errors["hours"]),
            **extra,
        }
        context.add_output_metadata(
            {
                **dws_metrics(metrics),
                "mae": MetadataValue.float(metrics["mae"]),
                "rmse": MetadataValue.float(metrics["rmse"]),
                "hours_scored": MetadataValue.int(int(metrics["hours_scored"])),
                "model": MetadataValue.text(model),
                "horizon_start": MetadataValue.text(horizon_start.isoformat()),
            }
        )
        return result

    return [
        yellow_taxi_staging,
        yellow_taxi_raw,
        weather_staging,
        weather_raw,
        yellow_rides_hourly_actuals,
        training_data,
        yellow_rides_hourly_forecast,
    ]


def _weather_days(
    training: DataFrame,
    spark: SparkSession,
    workspace: WorkspaceResource,
    partitions: DailyPartitionsDefinition,
    context: AssetExecutionContext,
    threshold_mm: float,
) -> DataFrame:
    """weather_raw's days covering the training data, read by path: the IO manager records
    each day read as an input of the forecast, with the lineage behind it."""
    span = training.agg(F.min("date"), F.max("date")).first()
    assert span is not None  # an aggregation without grouping returns one row
    first, last = span[0], span[1]
    ws = workspace.workspace()
    binding = binding_from_metadata(WEATHER_RAW, what="asset 'weather_raw'")
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    what = "asset 'yellow_rides_hourly_forecast' reading 'weather_raw'"
    locations = [
        ws.location(partition_key_ref(binding, partitions, day.isoformat(), what)) for day in days
    ]
    missing = [
        day.isoformat()
        for day, location in zip(days, locations, strict=True)
        if not storage.exists(spark, location)
    ]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise MissingWeatherError(
            f"{what}: {len(missing)} of {len(days)} days have no weather ({shown}); "
            "materialize weather_raw for them (weather_daily_job, or a backfill), or run the "
            "forecast with use_weather=false"
        )
    context.log.info(f"use_weather: reading weather_raw for {len(days)} days")
    readings = storage.read(spark, locations, what=what)
    return readings.select(
        "date", (F.col("precipitation_mm") >= F.lit(threshold_mm)).alias("rainy")
    )


def _rain_multiplier(training: DataFrame, typical: DataFrame, days: DataFrame) -> float:
    """How much more a zone's hour rides on rainy days than on dry ones, relative to that
    zone's mean for that hour of day; 1.0 without both kinds of day, clamped to [0.7, 1.5]."""
    relative = (
        training.join(typical, ["zone", "hour_of_day"])
        .where(F.col("typical") > 0)
        .join(days, "date")
        .groupBy("rainy")
        .agg(F.avg(F.col("rides") / F.col("typical")).alias("level"))
    )
    levels = {row["rainy"]: row["level"] for row in relative.collect()}
    if not levels.get(True) or not levels.get(False):
        return 1.0
    return min(1.5, max(0.7, float(levels[True]) / float(levels[False])))
