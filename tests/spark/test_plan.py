"""Column lineage from Spark plans, checked column by column on real plans: each test runs on
the classic session (the analyzed plan) and on the Spark Connect session (the client's plan,
spark/connect/), with the same expectations."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from dws_dagster.spark.column_lineage import plan_lineage
from dws_dagster.spark.lineage_model import ColumnSource, LineageKind

pytestmark = pytest.mark.spark

D, IND = LineageKind.DIRECT, LineageKind.INDIRECT


@pytest.fixture(scope="module")
def files(spark, tmp_path_factory) -> dict[str, str]:
    """trips(trip_id, zone_id, fare, tags) as parquet, zones(zone_id, borough) as JSON,
    more trips as CSV, and a partitioned folder."""
    root = tmp_path_factory.mktemp("plan")
    paths = {name: str(root / name) for name in ("trips", "zones", "more", "parted")}
    trips = spark.createDataFrame(
        [(i, i % 3, float(i), [f"t{i}", "x"]) for i in range(12)],
        "trip_id long, zone_id long, fare double, tags array<string>",
    )
    trips.write.parquet(paths["trips"])
    spark.createDataFrame(
        [(0, "Bronx"), (1, "Queens"), (2, "Brooklyn")], "zone_id long, borough string"
    ).write.json(paths["zones"])
    trips.drop("tags").write.option("header", True).csv(paths["more"])
    trips.drop("tags").write.partitionBy("zone_id").parquet(paths["parted"])
    return paths


def src(path: str, column: str, kind: LineageKind = D, subtype: str = "IDENTITY") -> ColumnSource:
    return ColumnSource(path, column, kind, subtype)


def test_projection_aliases_casts_and_literals(spark_session, files):
    t = files["trips"]
    df = spark_session.read.parquet(t).select(
        "trip_id",
        F.col("fare").alias("amount"),
        (F.col("fare") * F.col("zone_id")).alias("x"),
        F.col("trip_id").cast("string").alias("id_text"),
        F.lit(1).alias("one"),
    )
    lineage = plan_lineage(df)
    assert lineage.complete
    assert lineage.columns == {
        "trip_id": (src(t, "trip_id"),),
        "amount": (src(t, "fare"),),
        "x": (src(t, "fare", D, "TRANSFORMATION"), src(t, "zone_id", D, "TRANSFORMATION")),
        "id_text": (src(t, "trip_id", D, "TRANSFORMATION"),),
        "one": (),
    }
    assert lineage.dataset == ()
    assert [(i.path, i.format) for i in lineage.inputs] == [(t, "parquet")]


def test_join_filter_and_aggregate(spark_session, files):
    t, z = files["trips"], files["zones"]
    trips, zones = spark_session.read.parquet(t), spark_session.read.json(z)
    df = (
        trips.join(zones, trips.zone_id == zones.zone_id)
        .where(F.col("fare") > 2)
        .groupBy("borough")
        .agg(
            F.sum(F.col("fare") + 1).alias("revenue"),
            F.count(F.lit(1)).alias("n"),
            F.max("trip_id").alias("last"),
        )
    )
    lineage = plan_lineage(df)
    assert lineage.complete
    assert lineage.columns == {
        "borough": (src(z, "borough"),),
        "revenue": (src(t, "fare", D, "AGGREGATION"),),
        "n": (),
        "last": (src(t, "trip_id", D, "AGGREGATION"),),
    }
    assert set(lineage.dataset) == {
        src(t, "zone_id", IND, "JOIN"),
        src(z, "zone_id", IND, "JOIN"),
        src(t, "fare", IND, "FILTER"),
        src(z, "borough", IND, "GROUP_BY"),
    }
    assert {(i.path, i.format) for i in lineage.inputs} == {(t, "parquet"), (z, "json")}


def test_using_join_keeps_both_sides_of_a_full_outer_key(spark_session, files):
    t, z = files["trips"], files["zones"]
    df = (
        spark_session.read.parquet(t)
        .join(spark_session.read.json(z), "zone_id", "full_outer")
        .select("zone_id", "borough")
    )
    lineage = plan_lineage(df)
    assert lineage.columns["zone_id"] == (
        src(t, "zone_id", D, "TRANSFORMATION"),
        src(z, "zone_id", D, "TRANSFORMATION"),
    )
    assert lineage.columns["borough"] == (src(z, "borough"),)
    assert src(t, "zone_id", IND, "JOIN") in lineage.dataset


def test_window_functions(spark_session, files):
    t = files["trips"]
    by_zone = Window.partitionBy("zone_id").orderBy("fare")
    df = spark_session.read.parquet(t).select(
        "trip_id",
        F.row_number().over(by_zone).alias("rank"),
        F.sum("fare").over(by_zone).alias("running"),
    )
    lineage = plan_lineage(df)
    assert lineage.complete
    window = {src(t, "zone_id", IND, "WINDOW"), src(t, "fare", IND, "WINDOW")}
    assert set(lineage.columns["rank"]) == window
    assert set(lineage.columns["running"]) == window | {src(t, "fare", D, "AGGREGATION")}
    assert lineage.columns["trip_id"] == (src(t, "trip_id"),)
    assert lineage.dataset == ()


def test_union_by_position_and_by_name(spark_session, files):
    t, m = files["trips"], files["more"]
    parquet = spark_session.read.parquet(t).select("trip_id", "fare")
    csv = spark_session.read.option("header", True).option("inferSchema", True).csv(m)
    by_position = parquet.union(csv.select(F.col("trip_id"), F.col("zone_id")))
    lineage = plan_lineage(by_position)
    # CSV infers int columns: Spark widens them with a cast, which is a transformation.
    assert lineage.columns["trip_id"] == (src(m, "trip_id", D, "TRANSFORMATION"), src(t, "trip_id"))
    assert set(lineage.columns["fare"]) == {src(t, "fare"), src(m, "zone_id", D, "TRANSFORMATION")}
    by_name = parquet.unionByName(csv.select("fare", "trip_id"))
    assert set(plan_lineage(by_name).columns["fare"]) == {src(t, "fare"), src(m, "fare")}
    assert {i.format for i in lineage.inputs} == {"parquet", "csv"}


def test_explode(spark_session, files):
    t = files["trips"]
    df = spark_session.read.parquet(t).select("trip_id", F.explode("tags").alias("tag"))
    lineage = plan_lineage(df)
    assert lineage.complete
    assert lineage.columns == {
        "trip_id": (src(t, "trip_id"),),
        "tag": (src(t, "tags", D, "TRANSFORMATION"),),
    }


def test_sort_limit_and_distinct(spark_session, files):
    t = files["trips"]
    df = spark_session.read.parquet(t).orderBy(F.desc("fare")).limit(3).select("trip_id").distinct()
    lineage = plan_lineage(df)
    assert lineage.complete
    assert lineage.columns == {"trip_id": (src(t, "trip_id"),)}
    assert set(lineage.dataset) == {src(t, "fare", IND, "SORT"), src(t, "trip_id", IND, "GROUP_BY")}


def test_rollup_goes_through_expand(spark_session, files):
    t = files["trips"]
    df = spark_session.read.parquet(t).rollup("zone_id").agg(F.sum("fare").alias("total"))
    lineage = plan_lineage(df)
    assert lineage.complete
    assert lineage.columns == {
        "zone_id": (src(t, "zone_id"),),
        "total": (src(t, "fare", D, "AGGREGATION"),),
    }
    assert src(t, "zone_id", IND, "GROUP_BY") in lineage.dataset


def test_case_when_conditions_are_indirect(spark_session, files):
    t = files["trips"]
    df = spark_session.read.parquet(t).select(
        F.when(F.col("zone_id") > 0, F.col("fare")).otherwise(F.col("trip_id")).alias("v")
    )
    lineage = plan_lineage(df)
    assert set(lineage.columns["v"]) == {
        src(t, "zone_id", IND, "CONDITIONAL"),
        src(t, "fare", D, "TRANSFORMATION"),
        src(t, "trip_id", D, "TRANSFORMATION"),
    }


def test_partitioned_input_folder(spark_session, files):
    p = files["parted"]
    df = spark_session.read.parquet(p).where(F.col("zone_id") == 1).select("trip_id", "zone_id")
    lineage = plan_lineage(df)
    assert lineage.columns == {"trip_id": (src(p, "trip_id"),), "zone_id": (src(p, "zone_id"),)}
    assert lineage.inputs[0].path == p
    assert "zone_id" in lineage.inputs[0].columns


def test_in_memory_frames_have_no_file_sources(spark_session):
    df = spark_session.createDataFrame([(1, "a")], "k long, v string").groupBy("v").count()
    lineage = plan_lineage(df)
    assert lineage.complete
    assert lineage.inputs == ()
    assert lineage.columns == {"v": (), "count": ()}


def test_lineage_runs_no_spark_job_and_is_fast(spark, files):
    t, z = files["trips"], files["zones"]
    df = spark.read.parquet(t)
    for i in range(50):
        df = df.withColumn(f"c{i}", F.col("fare") * i + F.col("zone_id"))
    zones = spark.read.json(z)
    for _ in range(3):
        df = df.join(zones.withColumnRenamed("borough", f"b{_}"), "zone_id")
    df = df.groupBy("zone_id").agg(*[F.sum(f"c{i}").alias(f"s{i}") for i in range(50)])
    assert df.schema  # analysis happens here, not in plan_lineage
    tracker = spark.sparkContext.statusTracker()
    jobs_before = tracker.getJobIdsForGroup(None)
    start = time.perf_counter()
    lineage = plan_lineage(df)
    elapsed = time.perf_counter() - start
    assert tracker.getJobIdsForGroup(None) == jobs_before
    assert lineage.columns["s7"] == (
        src(t, "fare", D, "AGGREGATION"),
        src(t, "zone_id", D, "AGGREGATION"),
    )
    print(f"plan_lineage on a 50-column, 3-join plan: {elapsed * 1000:.1f} ms")


def test_paths_are_plain_for_local_files(spark_session, files):
    lineage = plan_lineage(spark_session.read.parquet(files["trips"]))
    assert all(
        not i.path.startswith("file:") and Path(i.path).is_absolute() for i in lineage.inputs
    )


def test_inputs_carry_the_types_spark_read(spark_session, files):
    """What OpenLineage events give as the input's schema facet (dws/input_schemas)."""
    t, z = files["trips"], files["zones"]
    df = (
        spark_session.read.parquet(t)
        .join(spark_session.read.json(z), "zone_id")
        .select("trip_id", "borough")
    )
    schemas = {i.path: i.schema for i in plan_lineage(df).inputs}
    assert schemas[t] == (
        ("trip_id", "bigint", True),
        ("zone_id", "bigint", True),
        ("fare", "double", True),
        ("tags", "array<string>", True),
    )
    assert ("borough", "string", True) in schemas[z]
