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

With `--connect` the same DataFrame is also written through a Spark Connect session (a
server started from the installed pyspark package on 127.0.0.1, or the `sc://` URL given),
the client in this process:

  Connect plain write       `df.write.parquet` on the Connect session
  Connect IO manager        the Dagster materialization through SparkWorkspaceIOManager on the
                            Connect session (versioning "rows" and "files"), and through the
                            plain parquet IO manager
  Connect plan lineage      column lineage from the client's plan (schema requests only)

Each case is timed by the wall clock and by CPU time (this process plus the Spark JVM, and the
Connect server's JVM when this script started it): on a shared machine the CPU ratios are the
steadier figures.

Targets: IO manager ≤ 1.05× the plain IO manager; on Connect, IO manager ≤ 1.3× the plain
`df.write.parquet` on Connect (wall).

    python bench/io_manager_overhead.py --rows 5000000 --repeats 3 [--connect [sc://host:port]]
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
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--connect",
        nargs="?",
        const="start",
        default=None,
        help="also measure on Spark Connect: a server started here (default) or this sc:// URL",
    )
    args = parser.parse_args()

    from dagster import ConfigurableIOManager, DagsterInstance, asset, materialize
    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql import functions as F

    from dws_dagster import SparkWorkspaceIOManager, Workspace, WorkspaceResource, dws_ref
    from dws_dagster.spark import storage
    from dws_dagster.spark.column_lineage import plan_lineage

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
        return frame_sql(args.rows)(spark)

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
    jvm_pids = [spark.sparkContext._gateway.proc.pid]  # the driver JVM: where local tasks run
    server, remote = None, None
    if args.connect is not None:
        server, url = _connect_server(args.connect, tmp)
        if server is not None:
            jvm_pids.append(server.pid)
        remote, connect_cases = _connect_cases(url, tmp, ws, instance, frame_sql(args.rows))
        cases.update(connect_cases)
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_seconds() -> float:
        total = time.process_time()
        for pid in jvm_pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        return total

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
    if args.connect is not None:
        print("\nOn Spark Connect (target: IO manager ≤ 1.3× the plain write on Connect, wall):")
        for case in (
            "Connect: Dagster + SparkWorkspaceIOManager",
            "Connect: Dagster + SWIOM files",
        ):
            print(
                f"  {case[9:]:38} {ratio(case, 'Connect: plain df.write.parquet')} the plain "
                f"write; {ratio(case, 'Connect: Dagster + plain IO manager')} the plain IO "
                "manager"
            )
        print(
            f"  Dagster + plain IO manager:            "
            f"{ratio('Connect: Dagster + plain IO manager', 'Connect: plain df.write.parquet')} "
            "the plain write (Dagster's own run)"
        )
        print(
            f"  plan lineage from the client's plan:   "
            f"{median['Connect: plan lineage'] * 1000:.0f} ms"
        )
        print(
            f"  Connect plain write against the classic one: "
            f"{ratio('Connect: plain df.write.parquet', 'plain df.write.parquet')}"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    if remote is not None:
        remote.stop()  # before its server: the client would retry releasing it for minutes
    if server is not None:
        from tests.support.connect_server import stop_server

        stop_server(server)
    sys.exit(0)


def frame_sql(rows: int) -> Callable[[Any], Any]:
    """The benchmark's DataFrame on a session of either kind (SQL text: no `functions`)."""

    def build(session: Any) -> Any:
        return session.range(rows, numPartitions=4).selectExpr(
            "id",
            "id % 263 AS zone",
            "CAST(id % 9973 AS DOUBLE) / 7 AS fare",
            "TIMESTAMP_SECONDS(1704067200 + id % 31536000) AS pickup",
            "CONCAT('trip-', CAST(id AS STRING)) AS name",
        )

    return build


def _connect_server(option: str, tmp: Path) -> tuple[Any, str]:
    """The Connect server to measure against: one started here from the pyspark package (the
    test suite's starter: 127.0.0.1, local[2], stopped by its PID), or the URL given."""
    if option != "start":
        return None, option
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.connect_server import start_server

    server = start_server(tmp / "connect-server")
    return server, server.url


def _connect_cases(
    url: str, tmp: Path, ws: Any, instance: Any, build: Callable[[Any], Any]
) -> tuple[Any, dict[str, Callable[[], None]]]:
    """The Connect rows: each runs with pyspark's Connect switch on (as a process that makes
    only Connect sessions has it), and off again for the classic rows."""
    from dagster import ConfigurableIOManager, asset, materialize
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource, dws_ref
    from dws_dagster.spark.column_lineage import plan_lineage

    remote = RemoteSparkSession.builder.remote(url).getOrCreate()
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    ws.add_resource("connect", "intermediate-data", path="connect")

    class ConnectPlainParquet(ConfigurableIOManager):
        def handle_output(self, context, obj) -> None:
            obj.write.mode("overwrite").parquet(str(tmp / "connect-dagster-plain"))

        def load_input(self, context):
            raise NotImplementedError

    @asset(name="connect_trips", metadata=dws_ref("connect", "trips"))
    def connect_trips() -> Any:
        return build(remote)

    managers = {
        "plain": ConnectPlainParquet(),
        "rows": SparkWorkspaceIOManager(workspace=WorkspaceResource(root=str(ws.root))),
        "files": SparkWorkspaceIOManager(
            workspace=WorkspaceResource(root=str(ws.root)), versioning="files"
        ),
    }

    def on_connect(run: Callable[[], None]) -> Callable[[], None]:
        def case() -> None:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
            try:
                run()
            finally:
                os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)

        return case

    def through(kind: str) -> Callable[[], None]:
        return on_connect(
            lambda: materialize(
                [connect_trips], instance=instance, resources={"io_manager": managers[kind]}
            )
        )

    def plain_write() -> None:
        build(remote).write.mode("overwrite").parquet(str(tmp / "connect-plain"))

    def lineage() -> None:
        written = remote.read.parquet(str(tmp / "connect-plain"))
        plan_lineage(written.groupBy("zone").agg({"fare": "sum"}).where("zone > 3"))

    return remote, {
        "Connect: plain df.write.parquet": on_connect(plain_write),
        "Connect: Dagster + plain IO manager": through("plain"),
        "Connect: Dagster + SparkWorkspaceIOManager": through("rows"),
        "Connect: Dagster + SWIOM files": through("files"),
        "Connect: plan lineage": on_connect(lineage),
    }


if __name__ == "__main__":
    main()
