"""Overhead of writing through SparkWorkspaceIOManager versus a plain `df.write.parquet`.

Both run in one Spark session, alternating, on the same DataFrame; each figure is the median of
`--repeats` runs, printed as a ratio to the plain write measured in the same run. The parts:

  atomic write      storage.write_atomic without the version aggregates (staging + swap)
  + version         write_atomic as shipped (the version is computed in the same pass)
  plan lineage      column lineage from the analyzed plan (no Spark job)
  IO manager        a whole Dagster materialization through SparkWorkspaceIOManager, against
                    the same materialization through a plain parquet IO manager (so Dagster's
                    own run overhead cancels out); the remainder is metadata + lineage store.

Target: IO manager ≤ 1.05× the plain IO manager.

    python bench/io_manager_overhead.py --rows 5000000 --repeats 3
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from dagster import ConfigurableIOManager, DagsterInstance, asset, materialize
    from pyspark.sql import DataFrame, SparkSession

    from dws_dagster import SparkWorkspaceIOManager, Workspace, WorkspaceResource, dws_ref
    from dws_dagster.spark import storage
    from dws_dagster.spark.plan import plan_lineage

    spark = (SparkSession.builder.master(args.master).appName("dws-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tmp = Path(tempfile.mkdtemp(prefix="dws-bench-"))
    ws = Workspace.init(tmp / "ws")
    ws.add_resource("inter", "intermediate-data", path="inter")

    def frame() -> DataFrame:
        return spark.range(args.rows, numPartitions=4).selectExpr(
            "id", "id % 263 AS zone", "CAST(id % 9973 AS DOUBLE) / 7 AS fare",
            "TIMESTAMP_SECONDS(1704067200 + id % 31536000) AS pickup",
            "CONCAT('trip-', CAST(id AS STRING)) AS name")

    def plain_write() -> None:
        frame().write.mode("overwrite").parquet(str(tmp / "plain"))

    def atomic_unversioned() -> None:
        target = tmp / "atomic"
        staging = tmp / f".staging-{time.monotonic_ns()}"
        frame().write.parquet(str(staging))
        old = tmp / f".old-{time.monotonic_ns()}"
        if target.exists():
            os.replace(target, old)
        os.replace(staging, target)
        shutil.rmtree(old, ignore_errors=True)

    def atomic_versioned() -> None:
        storage.write_atomic(frame(), str(tmp / "versioned"))

    def plan_only() -> None:
        plan_lineage(spark.read.parquet(str(tmp / "plain")).groupBy("zone").count())

    class PlainParquet(ConfigurableIOManager):
        def handle_output(self, context, obj) -> None:
            obj.write.mode("overwrite").parquet(str(tmp / "dagster-plain"))

        def load_input(self, context):
            raise NotImplementedError

    @asset(metadata=dws_ref("inter", "trips"))
    def trips() -> DataFrame:
        return frame()

    instance = DagsterInstance.ephemeral()
    dws_manager = SparkWorkspaceIOManager(workspace=WorkspaceResource(root=str(ws.root)))

    def through_plain_manager() -> None:
        materialize([trips], instance=instance, resources={"io_manager": PlainParquet()})

    def through_dws_manager() -> None:
        materialize([trips], instance=instance, resources={"io_manager": dws_manager})

    cases: dict[str, Callable[[], None]] = {
        "plain df.write.parquet": plain_write,
        "atomic write": atomic_unversioned,
        "atomic write + version": atomic_versioned,
        "plan lineage": plan_only,
        "Dagster + plain IO manager": through_plain_manager,
        "Dagster + SparkWorkspaceIOManager": through_dws_manager,
    }
    import logging

    logging.getLogger("dagster").setLevel(logging.ERROR)
    for case in cases.values():  # warm up: JIT, file system caches, Dagster imports
        case()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, case in cases.items():
            start = time.perf_counter()
            case()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in times.items()}
    base = median["plain df.write.parquet"]
    print(f"rows={args.rows:,} repeats={args.repeats} master={args.master}")
    print(f"{'case':38} {'median s':>9} {'× plain write':>14}")
    for name, value in median.items():
        print(f"{name:38} {value:9.3f} {value / base:14.3f}")
    overhead = median["Dagster + SparkWorkspaceIOManager"] / median["Dagster + plain IO manager"]
    print(f"\nIO manager overhead (same Dagster run, dws vs plain parquet IO manager): "
          f"{overhead:.3f}×  (target ≤ 1.05×)")
    print(f"  versioning in the write pass: "
          f"{median['atomic write + version'] / median['atomic write']:.3f}× the atomic write")
    print(f"  staging + swap: {median['atomic write'] / base:.3f}× the plain write")
    print(f"  plan lineage: {median['plan lineage'] / base:.4f}× the plain write")
    shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
