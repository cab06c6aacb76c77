"""A small taxi pipeline used by the Dagster tests: two sources dropped into source data, a
join, an aggregate and a results asset, all plain `@asset` functions over DataFrames."""

import json
from pathlib import Path
from typing import Any

from dagster import AssetsDefinition, Config, asset
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dws_dagster import (
    SparkWorkspaceIOManager,
    Workspace,
    WorkspaceResource,
    dws_ref,
    dws_source_asset,
)

ZONES = [(1, "Manhattan"), (2, "Brooklyn"), (3, "Queens")]


def make_workspace(root: Path) -> Workspace:
    ws = Workspace.init(root)
    ws.add_resource("source-data", "source-data", path="source")
    ws.add_resource("intermediate-data", "intermediate-data", path="inter")
    ws.add_resource("results", "results", path="results")
    write_sources(ws)
    return ws


def trip_rows(shift: int = 0, n: int = 60) -> list[tuple[int, int, float, str]]:
    """(trip_id, zone_id, fare, pickup hour as text)."""
    return [
        (i, 1 + i % 3, round(5.0 + (i * 7 + shift) % 23, 2), f"2024-01-01 {i % 4:02d}:15:00")
        for i in range(n)
    ]


def write_sources(ws: Workspace, shift: int = 0) -> None:
    trips = ws.local_path("source-data/trips")
    trips.mkdir(parents=True, exist_ok=True)
    lines = ["trip_id,zone_id,fare,pickup"] + [
        f"{a},{b},{c},{d}" for a, b, c, d in trip_rows(shift)
    ]
    (trips / "trips.csv").write_text("\n".join(lines) + "\n")
    zones = ws.local_path("source-data/zones")
    zones.mkdir(parents=True, exist_ok=True)
    (zones / "zones.json").write_text(
        "\n".join(json.dumps({"zone_id": z, "borough": b}) for z, b in ZONES) + "\n"
    )


class HourlyConfig(Config):
    min_fare: float = 0.0


def build_assets(calls: list[str] | None = None) -> list[Any]:
    """The pipeline's assets; `calls` collects the names of asset bodies that ran."""
    ran = calls if calls is not None else []

    trips = dws_source_asset("trips", "source-data", "trips", format="csv")
    zones = dws_source_asset("zones", "source-data", "zones", format="json")

    @asset(metadata=dws_ref("intermediate-data", "enriched"), code_version="1")
    def enriched(trips: DataFrame, zones: DataFrame) -> DataFrame:
        ran.append("enriched")
        return trips.join(zones, on="zone_id", how="inner").select(
            "trip_id",
            "borough",
            F.col("fare").alias("fare_usd"),
            F.to_timestamp("pickup").alias("pickup_ts"),
        )

    @asset(metadata=dws_ref("intermediate-data", "hourly"))
    def hourly(config: HourlyConfig, enriched: DataFrame) -> DataFrame:
        ran.append("hourly")
        return (
            enriched.where(F.col("fare_usd") >= config.min_fare)
            .groupBy("borough", F.hour("pickup_ts").alias("hour"))
            .agg(F.count(F.lit(1)).alias("trips"), F.sum("fare_usd").alias("revenue"))
        )

    @asset(metadata=dws_ref("results", "ranking", format="json"))
    def ranking(hourly: DataFrame) -> DataFrame:
        ran.append("ranking")
        by_borough = Window.partitionBy("borough").orderBy(F.desc("revenue"))
        return hourly.withColumn("rank", F.row_number().over(by_borough))

    return [trips, zones, enriched, hourly, ranking]


def by_name(assets: list[Any], name: str) -> AssetsDefinition:
    return next(a for a in assets if a.key.to_user_string() == name)


def io_manager(ws: Workspace, **kwargs: Any) -> SparkWorkspaceIOManager:
    return SparkWorkspaceIOManager(workspace=WorkspaceResource(root=str(ws.root)), **kwargs)
