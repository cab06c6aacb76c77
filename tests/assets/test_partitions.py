"""Partitioned assets: one subpath, version and lineage record per partition."""

from pathlib import Path

import pytest
from dagster import (
    AssetIn,
    DagsterInstance,
    DailyPartitionsDefinition,
    StaticPartitionsDefinition,
    TimeWindowPartitionMapping,
    asset,
    materialize,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dws_dagster import MissingPartitionError, dws_ref
from tests.assets.test_io_manager import latest, root_cause, table_rows
from tests.support.pipeline import io_manager, make_workspace

pytestmark = pytest.mark.spark

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")
REGIONS = StaticPartitionsDefinition(["eu", "us", "a/b"])


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def pipeline_ws(tmp_path: Path):
    return make_workspace(tmp_path / "ws")


def daily_assets(spark):
    @asset(partitions_def=DAYS, metadata=dws_ref("intermediate-data", "events"))
    def events(context) -> DataFrame:
        day = int(context.partition_key[-2:])
        return spark.range(day * 10).withColumn("day", F.lit(context.partition_key))

    @asset(partitions_def=DAYS, metadata=dws_ref("intermediate-data", "daily_counts"))
    def daily_counts(events: DataFrame) -> DataFrame:
        return events.groupBy("day").count()

    @asset(metadata=dws_ref("intermediate-data", "summary"))
    def summary(events: DataFrame) -> DataFrame:
        return events.groupBy("day").count()

    return events, daily_counts, summary


def test_each_partition_has_its_own_subpath_version_and_lineage(spark, pipeline_ws, instance):
    ws = pipeline_ws
    events, daily_counts, summary = daily_assets(spark)
    resources = {"io_manager": io_manager(ws)}
    keys = DAYS.get_partition_keys()
    assert keys == ["2024-01-01", "2024-01-02", "2024-01-03"]
    for key in keys:
        materialize([events], partition_key=key, instance=instance, resources=resources)
    versions = {key: latest(instance, "events", key)["metadata"]["dws/version"] for key in keys}
    assert len(set(versions.values())) == 3
    for key in keys:
        ref = f"intermediate-data/events/{key}"
        assert ws.local_path(ref).is_dir()
        assert ws.version_of(ref) == versions[key]
        record = ws.store.get(ref).lineage_record()
        assert record.step.partition == key
        assert record.parameters == {"dagster/partition": key}
        assert latest(instance, "events", key)["metadata"]["dws/ref"] == ref

    materialize(
        [events, daily_counts],
        partition_key="2024-01-02",
        instance=instance,
        resources=resources,
        selection=["daily_counts"],
    )
    counts = latest(instance, "daily_counts", "2024-01-02")["metadata"]
    assert counts["dws/inputs"] == [
        {
            "ref": "intermediate-data/events/2024-01-02",
            "version": versions["2024-01-02"],
            "asset": "events",
        }
    ]

    materialize([events, summary], instance=instance, resources=resources, selection=["summary"])
    meta = latest(instance, "summary")["metadata"]
    assert meta["dws/inputs"] == [
        {"ref": f"intermediate-data/events/{key}", "version": versions[key], "asset": "events"}
        for key in keys
    ]
    rows = spark.read.parquet(str(ws.local_path("intermediate-data/summary"))).collect()
    assert sorted((r.day, r["count"]) for r in rows) == [
        ("2024-01-01", 10),
        ("2024-01-02", 20),
        ("2024-01-03", 30),
    ]
    # The column lineage table names the partitions read as one input in one row.
    table = latest(instance, "summary")["raw"]["dws/column_sources"]
    assert ("day", "events (3 partitions)", "day", "identity") in table_rows(table)

    # Partitions read by path (not as an input): named by the asset that wrote them.
    @asset(metadata=dws_ref("intermediate-data", "by_path"))
    def by_path() -> DataFrame:
        paths = [str(ws.local_path(f"intermediate-data/events/{key}")) for key in keys]
        return spark.read.parquet(*paths).select("day")

    materialize([by_path], instance=instance, resources=resources)
    table = latest(instance, "by_path")["raw"]["dws/column_sources"]
    assert table_rows(table) == [("day", "events (3 partitions)", "day", "identity")]


def test_a_partition_range_is_read_as_one_input(spark, pipeline_ws, instance):
    ws = pipeline_ws
    events, _, _ = daily_assets(spark)

    @asset(
        partitions_def=DAYS,
        metadata=dws_ref("intermediate-data", "two_days"),
        ins={"events": AssetIn(partition_mapping=TimeWindowPartitionMapping(start_offset=-1))},
    )
    def two_days(events: DataFrame) -> DataFrame:
        return events.groupBy("day").count()

    resources = {"io_manager": io_manager(ws)}
    for key in DAYS.get_partition_keys():
        materialize([events], partition_key=key, instance=instance, resources=resources)
    materialize(
        [events, two_days],
        partition_key="2024-01-03",
        instance=instance,
        resources=resources,
        selection=["two_days"],
    )
    meta = latest(instance, "two_days", "2024-01-03")["metadata"]
    assert [i["ref"] for i in meta["dws/inputs"]] == [
        "intermediate-data/events/2024-01-02",
        "intermediate-data/events/2024-01-03",
    ]
    rows = spark.read.parquet(str(ws.local_path("intermediate-data/two_days/2024-01-03")))
    assert sorted((r.day, r["count"]) for r in rows.collect()) == [
        ("2024-01-02", 20),
        ("2024-01-03", 30),
    ]


def test_missing_partitions_are_named(spark, pipeline_ws, instance):
    ws = pipeline_ws
    events, _, summary = daily_assets(spark)
    resources = {"io_manager": io_manager(ws)}
    materialize([events], partition_key="2024-01-01", instance=instance, resources=resources)
    with pytest.raises(Exception) as info:
        materialize(
            [events, summary], instance=instance, resources=resources, selection=["summary"]
        )
    error = root_cause(info.value)
    assert isinstance(error, MissingPartitionError)
    assert "2 of 3 partitions" in str(error) and "2024-01-02" in str(error)
    assert "summary" in str(error)


def test_hive_style_template_restores_the_partition_column(spark, pipeline_ws, instance):
    ws = pipeline_ws

    @asset(
        partitions_def=REGIONS,
        metadata=dws_ref("intermediate-data", "sales", partition_template="region={partition}"),
    )
    def sales(context) -> DataFrame:
        return spark.range(3).withColumn("amount", F.lit(len(context.partition_key)))

    @asset(metadata=dws_ref("results", "sales_by_region"))
    def sales_by_region(sales: DataFrame) -> DataFrame:
        return sales.groupBy("region").agg(F.sum("amount").alias("amount"))

    resources = {"io_manager": io_manager(ws)}
    for key in REGIONS.get_partition_keys():
        materialize([sales], partition_key=key, instance=instance, resources=resources)
    assert ws.local_path("intermediate-data/sales/region=a%2Fb").is_dir()
    materialize(
        [sales, sales_by_region],
        instance=instance,
        resources=resources,
        selection=["sales_by_region"],
    )
    rows = spark.read.parquet(str(ws.local_path("results/sales_by_region"))).collect()
    assert sorted((r.region, r.amount) for r in rows) == [("a/b", 9), ("eu", 6), ("us", 6)]
