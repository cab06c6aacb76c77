"""Atomic Spark writes and Spark-computed content versions, on a real local Spark session."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pyspark.sql import functions as F

from dws_dagster import Workspace
from dws_dagster.errors import StorageError
from dws_dagster.spark import write_stats
from dws_dagster.spark.row_version import dataframe_version
from dws_dagster.spark.storage import read, write_atomic
from dws_dagster.workspace.versions import MARKER_NAME, content_version, effective_version
from tests.conftest import ROOT, run_python

pytestmark = pytest.mark.spark


def trips(spark, n: int = 2000, shift: int = 0):
    return spark.range(n).select(
        (F.col("id") % 50).alias("zone"),
        (F.col("id") * 7 + shift).alias("fare_cents"),
        F.concat(F.lit("t"), F.col("id").cast("string")).alias("trip"),
        F.create_map(F.lit("k"), F.col("id")).alias("tags"),
    )


def rows(df) -> list:
    return sorted(tuple(r) for r in df.drop("tags").collect())


def test_write_read_round_trip_and_version(spark, tmp_path: Path) -> None:
    df = trips(spark)
    result = write_atomic(df, str(tmp_path / "out"))
    assert result.row_count == 2000 and result.format == "parquet"
    assert result.size_bytes and result.size_bytes > 0
    assert result.version == dataframe_version(df)[0]
    back = read(spark, str(tmp_path / "out"))
    assert rows(back) == rows(df)
    marker = orjson.loads((tmp_path / "out" / MARKER_NAME).read_bytes())
    assert marker["version"] == result.version and marker["rows"] == 2000
    assert effective_version(tmp_path / "out") == result.version
    assert marker["content"] == content_version(tmp_path / "out")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dws-")]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "orc"])
def test_formats(spark, tmp_path: Path, fmt: str) -> None:
    df = trips(spark, 300).drop("tags")
    result = write_atomic(df, str(tmp_path / fmt), fmt=fmt)
    back = read(spark, str(tmp_path / fmt), fmt=fmt)
    assert back.count() == 300
    assert sorted(r["trip"] for r in back.collect()) == sorted(r["trip"] for r in df.collect())
    assert result.version == dataframe_version(df)[0]


def test_same_content_same_version_whatever_the_partitioning(spark, tmp_path: Path) -> None:
    df = trips(spark)
    one = write_atomic(df.coalesce(1), str(tmp_path / "one"))
    many = write_atomic(df.repartition(7), str(tmp_path / "many"))
    shuffled = write_atomic(df.orderBy(F.rand(seed=3)), str(tmp_path / "shuffled"))
    assert one.version == many.version == shuffled.version
    assert content_version(tmp_path / "one") != content_version(tmp_path / "many")


def test_any_change_gives_a_new_version(spark, tmp_path: Path) -> None:
    base = write_atomic(trips(spark), str(tmp_path / "a")).version
    one_value = trips(spark).withColumn(
        "fare_cents", F.when(F.col("trip") == "t1999", 0).otherwise(F.col("fare_cents"))
    )
    assert write_atomic(one_value, str(tmp_path / "b")).version != base
    assert write_atomic(trips(spark).limit(1999), str(tmp_path / "c")).version != base
    renamed = trips(spark).withColumnRenamed("zone", "zone_id")
    assert write_atomic(renamed, str(tmp_path / "d")).version != base
    duplicated = trips(spark).unionByName(trips(spark).limit(1))
    assert write_atomic(duplicated, str(tmp_path / "e")).version != base


def test_same_data_same_version_in_another_spark_process(spark, tmp_path: Path) -> None:
    """Parquet bytes differ between JVMs; the version must not."""
    here = write_atomic(trips(spark), str(tmp_path / "here")).version
    code = f"""
import os, sys
os.environ['SPARK_LOCAL_IP'] = '127.0.0.1'
sys.path.insert(0, {str(ROOT)!r})
from pyspark.sql import SparkSession
from tests.spark.test_storage import trips
from dws_dagster.spark.storage import write_atomic
spark = (SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')
         .config('spark.driver.host', '127.0.0.1').getOrCreate())
print('VERSION', write_atomic(trips(spark), sys.argv[1]).version)
spark.stop()
"""
    result = run_python(code, tmp_path, str(tmp_path / "there"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    there = next(
        line.split()[1] for line in result.stdout.splitlines() if line.startswith("VERSION")
    )
    assert there == here
    assert effective_version(tmp_path / "there") == here


def test_failure_mid_write_keeps_old_data(spark, tmp_path: Path) -> None:
    target = str(tmp_path / "out")
    old = write_atomic(trips(spark), target)

    @F.udf("long")
    def explode_late(value: int) -> int:
        if value > 1500:
            raise RuntimeError("worker died mid-write")
        return value

    bad = trips(spark).withColumn("fare_cents", explode_late("fare_cents"))
    with pytest.raises(Exception, match="worker died mid-write"):
        write_atomic(bad, target)
    assert effective_version(tmp_path / "out") == old.version
    assert rows(read(spark, target)) == rows(trips(spark))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dws-")]


def test_keep_old_version(spark, tmp_path: Path) -> None:
    target = tmp_path / "out"
    first = write_atomic(trips(spark), str(target))
    kept = tmp_path / ".dws" / "versions" / f"@{first.version}"
    second = write_atomic(trips(spark, shift=1), str(target), keep_old_as=str(kept))
    assert second.version != first.version
    assert effective_version(kept) == first.version
    assert effective_version(target) == second.version


def test_tampering_after_write_is_visible(spark, tmp_path: Path) -> None:
    result = write_atomic(trips(spark, 100).drop("tags"), str(tmp_path / "out"), fmt="csv")
    part = next(p for p in (tmp_path / "out").iterdir() if p.name.startswith("part-"))
    part.write_text(part.read_text() + "49,1,extra,\n")
    assert effective_version(tmp_path / "out") != result.version
    assert effective_version(tmp_path / "out") == content_version(tmp_path / "out")


def test_workspace_layer_sees_the_spark_version(spark, ws: Workspace) -> None:
    result = write_atomic(trips(spark), ws.location("inter/trips"))
    assert ws.version_of("inter/trips") == result.version


def test_partition_by_and_empty_frames(spark, tmp_path: Path) -> None:
    df = trips(spark, 500).drop("tags")
    result = write_atomic(df, str(tmp_path / "p"), partition_by=["zone"])
    assert (tmp_path / "p" / "zone=0").is_dir()
    assert read(spark, str(tmp_path / "p")).count() == 500
    assert result.version == dataframe_version(df)[0]
    empty = write_atomic(df.limit(0), str(tmp_path / "empty"))
    assert empty.row_count == 0
    assert empty.version == dataframe_version(df.limit(0))[0] != result.version


def test_hadoop_filesystem_path(spark, tmp_path: Path) -> None:
    """URIs go through the Hadoop FileSystem API (as HDFS and object stores do); exercised on
    a file:// URI since no remote store runs here."""
    location = f"file://{tmp_path}/remote"
    first = write_atomic(trips(spark), location)
    kept = f"file://{tmp_path}/kept/@{first.version}"
    again = write_atomic(trips(spark, shift=2), location, keep_old_as=kept)
    assert first.version != again.version
    assert read(spark, location).count() == 2000
    marker = orjson.loads((tmp_path / "remote" / MARKER_NAME).read_bytes())
    assert marker["version"] == again.version
    assert (
        orjson.loads((tmp_path / "kept" / f"@{first.version}" / MARKER_NAME).read_bytes())[
            "version"
        ]
        == first.version
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dws-")]


@pytest.mark.parametrize("name", ["n" * 255, "é" * 127 + "n", "n" * 210])
def test_a_target_named_up_to_the_255_byte_limit_is_written_and_replaced(
    spark, tmp_path: Path, name: str
) -> None:
    """The staging and set-aside names beside a target have a fixed length, so a target whose
    name is as long as a file name may be is written, replaced and kept, through the local
    path and through the Hadoop FileSystem API alike."""
    assert len(name.encode()) <= 255
    for location, kept in (
        (str(tmp_path / "local" / name), str(tmp_path / "local-kept" / name)),
        (f"file://{tmp_path}/hadoop/{name}", f"file://{tmp_path}/hadoop-kept/{name}"),
    ):
        first = write_atomic(trips(spark, 50), location)
        again = write_atomic(trips(spark, 60), location, keep_old_as=kept)
        assert first.version != again.version
        assert read(spark, location).count() == 60
        assert read(spark, kept).count() == 50
    for folder in ("local", "hadoop"):
        assert [p.name for p in (tmp_path / folder).iterdir()] == [name]


def test_bad_format_and_missing_data(spark, tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="unknown format 'xlsx'"):
        write_atomic(trips(spark, 10), str(tmp_path / "x"), fmt="xlsx")
    with pytest.raises(StorageError, match="no data at"):
        read(spark, str(tmp_path / "never"))


def test_limb_sums_are_the_exact_sums_of_the_row_hashes(spark) -> None:
    from dws_dagster.spark.row_version import _SALT, exact_sum, version_aggregates

    extremes = [(-(2**63)), 2**63 - 1, -1, 0, 1, 2**42, -(2**42) - 5]
    df = spark.createDataFrame([(i, f"v{i}") for i in range(500)], "id long, name string")
    hashes = df.select(F.xxhash64("id", "name").alias("h"))
    hashes = hashes.select("h", F.xxhash64(F.lit(_SALT), "h").alias("g"))
    rows = hashes.collect()
    metrics = df.agg(*version_aggregates(df)).collect()[0].asDict()
    assert metrics["rows"] == 500
    assert exact_sum(metrics, "h") == sum(r.h for r in rows)
    assert exact_sum(metrics, "g") == sum(r.g for r in rows)
    # The limb split is exact for every 64-bit value, extremes included.
    values = spark.createDataFrame([(v,) for v in extremes], "h long")
    from dws_dagster.spark.row_version import limb_sums

    limbs = values.agg(*map(F.expr, limb_sums("h", "h"))).collect()[0].asDict()
    assert exact_sum(limbs, "h") == sum(extremes)


#: Spark keeps only the newest `spark.sql.ui.retainedExecutions` (1,000) SQL executions, so a
#: long test run cannot count them: executions are told apart by their ids, which only grow.
_NEWEST = 16


def _recent_executions(spark) -> list:
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    store = spark._jsparkSession.sharedState().statusStore()
    count = int(store.executionsCount())
    recent = store.executionsList(max(0, count - _NEWEST), _NEWEST).iterator()
    found = []
    while recent.hasNext():
        found.append(recent.next())
    return found


def newest_execution_id(spark) -> int:
    """The id of the newest SQL execution Spark has recorded (-1 before any)."""
    return max((int(e.executionId()) for e in _recent_executions(spark)), default=-1)


def executions_since(spark, execution_id: int) -> list:
    """The SQL executions recorded after the one with `execution_id`, oldest first."""
    later = [e for e in _recent_executions(spark) if int(e.executionId()) > execution_id]
    return sorted(later, key=lambda e: int(e.executionId()))


@pytest.mark.parametrize(
    ("fmt", "partition_by"),
    [("parquet", None), ("orc", ["zone"]), ("csv", None), ("json", ["zone"])],
)
def test_files_versioning_counts_rows_from_sparks_record_of_the_write(
    spark, tmp_path: Path, fmt: str, partition_by: list[str] | None
) -> None:
    """The row count comes from the write's own metrics: no second Spark job over the files."""
    # A sort samples its input in a job of its own within the write: only the write's rows count.
    df = trips(spark, n=1234).drop("tags").orderBy("fare_cents")  # and CSV has no maps
    before = newest_execution_id(spark)
    result = write_atomic(
        df,
        str(tmp_path / "out"),
        fmt=fmt,
        partition_by=partition_by,
        versioning="files",
        what="asset 'counted'",
    )
    assert result.row_count == 1234
    since = executions_since(spark, before)
    assert len(since) == 1  # the write, and nothing else
    assert since[0].description().startswith("dws_dagster: write asset 'counted' [")
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def test_files_versioning_counts_the_files_when_sparks_record_is_unreadable(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dws_dagster.spark import storage

    monkeypatch.setattr(storage, "rows_written", lambda spark, description: None)
    before = newest_execution_id(spark)
    result = write_atomic(trips(spark, n=321), str(tmp_path / "out"), versioning="files")
    assert result.row_count == 321
    assert len(executions_since(spark, before)) == 2  # the write, then the count over its files
    assert write_stats.rows_written(spark, "no write has this description") is None
