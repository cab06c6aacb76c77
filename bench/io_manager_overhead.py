"""Overhead of writing through SparkWorkspaceIOManager versus a plain `df.write.parquet`.

Both run in one Spark session, alternating, on the same DataFrame; each figure is the median of
`--repeats` runs, printed as a ratio to the plain write measured in the same run. The parts:

  atomic write      storage.write_atomic without the version aggregates (staging + swap)
  + version         write_atomic as shipped (the version is computed in the same pass)
  plan lineage      column lineage from the analyzed plan (no Spark job)
  observe floor     the write with only a row count attached through `DataFrame.observe`:
                    the least any in-pass row statistic costs (Spark's CollectMetrics)
  IO manager        a whole Dagster materialization through SparkWorkspaceIOManager, against
                    the same materialization through a plain parquet IO manager (so Dagster's
                    own run overhead cancels out); the remainder is metadata + lineage store.
                    Measured with versioning="rows" (the default: every row hashed in the
                    write pass) and versioning="files" (the written files' bytes).

Each case is timed by the wall clock and by CPU time (this process plus the Spark JVM): on a
shared machine the CPU ratios are the steadier figures.

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
    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql import functions as F

    from dws_dagster import SparkWorkspaceIOManager, Workspace, WorkspaceResource, dws_ref
    from dws_dagster.spark import storage
    from dws_dagster.spark.plan import plan_lineage

    spark = (
        SparkSession.builder.master(args.master)
        .appName("dws-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tmp = Path(tempfile.mkdtemp(prefix="dws-bench-"))
    ws = Workspace.init(tmp / "ws")
    ws.add_resource("inter", "intermediate-data", path="inter")

    def frame() -> DataFrame:
        return spark.range(args.rows, numPartitions=4).selectExpr(
            "id",
            "id % 263 AS zone",
            "CAST(id % 9973 AS DOUBLE) / 7 AS fare",
            "TIMESTAMP_SECONDS(1704067200 + id % 31536000) AS pickup",
            "CONCAT('trip-', CAST(id AS STRING)) AS name",
        )

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

    def observe_floor() -> None:
        counted = frame().observe(
            Observation(f"floor_{time.monotonic_ns()}"), F.count(F.lit(1)).alias("rows")
        )
        counted.write.mode("overwrite").parquet(str(tmp / "floor"))

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
    files_manager = SparkWorkspaceIOManager(
        workspace=WorkspaceResource(root=str(ws.root)), versioning="files"
    )

    def through_plain_manager() -> None:
        materialize([trips], instance=instance, resources={"io_manager": PlainParquet()})

    def through_dws_manager() -> None:
        materialize([trips], instance=instance, resources={"io_manager": dws_manager})

    def through_files_manager() -> None:
        materialize([trips], instance=instance, resources={"io_manager": files_manager})

    cases: dict[str, Callable[[], None]] = {
        "plain df.write.parquet": plain_write,
        "observe floor (row count only)": observe_floor,
        "atomic write": atomic_unversioned,
        "atomic write + version": atomic_versioned,
        "plan lineage": plan_only,
        "Dagster + plain IO manager": through_plain_manager,
        "Dagster + SparkWorkspaceIOManager": through_dws_manager,
        "Dagster + SparkWorkspaceIOManager files": through_files_manager,
    }
    jvm_pid = spark.sparkContext._gateway.proc.pid  # the driver JVM: where local tasks run
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_seconds() -> float:
        fields = Path(f"/proc/{jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks + time.process_time()

    import logging

    logging.getLogger("dagster").setLevel(logging.ERROR)
    for case in cases.values():  # warm up: JIT, file system caches, Dagster imports
        case()
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, case in cases.items():
            start, start_cpu = time.perf_counter(), cpu_seconds()
            case()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(cpu_seconds() - start_cpu)
    median = {name: statistics.median(values) for name, values in wall.items()}
    median_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    base, base_cpu = median["plain df.write.parquet"], median_cpu["plain df.write.parquet"]
    print(f"rows={args.rows:,} repeats={args.repeats} master={args.master}")
    print(f"{'case':42} {'wall s':>8} {'× plain':>8} {'CPU s':>8} {'× plain':>8}")
    for name in cases:
        print(
            f"{name:42} {median[name]:8.3f} {median[name] / base:8.3f} "
            f"{median_cpu[name]:8.3f} {median_cpu[name] / base_cpu:8.3f}"
        )

    def ratio(case: str, baseline: str) -> str:
        return (
            f"wall {median[case] / median[baseline]:.3f}×, "
            f"CPU {median_cpu[case] / median_cpu[baseline]:.3f}×"
        )

    print(
        "\nIO manager overhead (same Dagster run, dws vs plain parquet IO manager; target ≤ 1.05×):"
    )
    print(
        f"  versioning='rows' (default):  "
        f"{ratio('Dagster + SparkWorkspaceIOManager', 'Dagster + plain IO manager')}"
    )
    print(
        f"  versioning='files':           "
        f"{ratio('Dagster + SparkWorkspaceIOManager files', 'Dagster + plain IO manager')}"
    )
    print(
        f"  row versioning in the write pass: "
        f"{ratio('atomic write + version', 'atomic write')} the atomic write"
    )
    print(
        f"  of which Spark's observe floor (a row count alone): "
        f"{ratio('observe floor (row count only)', 'plain df.write.parquet')} the plain write"
    )
    print(f"  staging + swap: {ratio('atomic write', 'plain df.write.parquet')} the plain write")
    print(f"  plan lineage: {median['plan lineage'] / base:.4f}× the plain write")
    shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
