"""A backfill of daily partitions through SparkWorkspaceIOManager: one run for the whole range
(`BackfillPolicy.single_run()`), one run per partition (`BackfillPolicy.multi_run(1)`), and a
plain partitioned Spark write of the same rows (`df.write.partitionBy(day).parquet`); beside
them, the same plain write inside a single Dagster run of the range that records a
materialization per partition without the IO manager (what Dagster itself costs).

All run in one process and one Spark session, on the same rows, alternating; each figure is
the median of `--repeats` runs, printed as a ratio measured in the same run. The runs go
through Dagster's `materialize` (in-process executor, console logging at warnings, as the
demo runs them): one run per partition here pays no process or JVM start per run, which a
deployment's run launcher adds on top (about 10 s of Spark start each, locally), so its ratio
is a lower bound. With `--launched`, the range is also run once, and once per partition, as
Dagster's default run launcher runs them: each run a process of its own that loads the code
location and starts a Spark session (`bench/backfill_defs.py`), which is what a backfill of
one run per partition costs a deployment.

Targets: one run ≤ 1.3× the plain partitioned write; ≥ 10× faster than one run per partition.

    python bench/backfill.py --days 60 --rows-per-day 20000 --repeats 3 [--launched]
"""

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--rows-per-day", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--launched",
        action="store_true",
        help="also launch the runs as Dagster does: a process and a Spark session per run",
    )
    args = parser.parse_args()

    from backfill_defs import frame as rows
    from backfill_defs import range_assets, session
    from dagster import (
        BackfillPolicy,
        DagsterInstance,
        DailyPartitionsDefinition,
        asset,
        materialize,
    )
    from pyspark.sql import DataFrame

    from dws_dagster import SparkWorkspaceIOManager, Workspace, WorkspaceResource

    spark = session(args.master)
    tmp = Path(tempfile.mkdtemp(prefix="dws-bench-backfill-"))
    ws = Workspace.init(tmp / "ws")
    ws.add_resource("inter", "intermediate-data", path="inter")
    first = dt.date(2024, 1, 1)
    days = DailyPartitionsDefinition(
        start_date=first.isoformat(),
        end_date=(first + dt.timedelta(days=args.days)).isoformat(),
    )
    keys = days.get_partition_keys()

    def frame(start: dt.date, end: dt.date) -> DataFrame:
        return rows(spark, start, end, args.rows_per_day)

    trips_one_run, trips_per_partition = range_assets(
        days, args.rows_per_day, args.master, "trips", "trips_per_partition"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @asset(
            name="trips_dagster_only",
            partitions_def=days,
            backfill_policy=BackfillPolicy.single_run(),
        )
        def trips_dagster_only(context) -> None:
            window = context.partition_time_window
            frame(window.start.date(), window.end.date()).write.mode("overwrite").partitionBy(
                "day"
            ).parquet(str(tmp / "dagster_only"))

    instance = DagsterInstance.ephemeral()
    manager = SparkWorkspaceIOManager(workspace=WorkspaceResource(root=str(ws.root)))
    resources = {"io_manager": manager}
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    end = first + dt.timedelta(days=args.days)
    range_tags = {
        "dagster/asset_partition_range_start": keys[0],
        "dagster/asset_partition_range_end": keys[-1],
    }

    def plain_partitioned_write() -> None:
        frame(first, end).write.mode("overwrite").partitionBy("day").parquet(str(tmp / "plain"))

    def dagster_only() -> None:
        materialize([trips_dagster_only], instance=instance, run_config=quiet, tags=range_tags)

    def one_run() -> None:
        materialize(
            [trips_one_run],
            instance=instance,
            resources=resources,
            run_config=quiet,
            tags=range_tags,
        )

    def one_run_per_partition() -> None:
        for key in keys:
            materialize(
                [trips_per_partition],
                instance=instance,
                resources=resources,
                run_config=quiet,
                partition_key=key,
            )

    cases: dict[str, Callable[[], None]] = {
        "plain partitionBy write": plain_partitioned_write,
        "same, Dagster run, no IO manager": dagster_only,
        "one run (single_run)": one_run,
        "one run per partition": one_run_per_partition,
    }
    import logging

    logging.getLogger("dagster").setLevel(logging.ERROR)
    for case in cases.values():  # warm up: JIT, file system caches, Dagster imports
        case()
    wall: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, case in cases.items():
            start = time.perf_counter()
            case()
            wall[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in wall.items()}
    base = median["plain partitionBy write"]
    print(
        f"days={args.days} rows/day={args.rows_per_day:,} repeats={args.repeats} "
        f"master={args.master}"
    )
    print(f"{'case':34} {'wall s':>8} {'× plain':>8}")
    for name in cases:
        print(f"{name:34} {median[name]:8.3f} {median[name] / base:8.3f}")
    one, per = median["one run (single_run)"], median["one run per partition"]
    print(f"\none run vs the plain partitioned write: {one / base:.2f}× (target ≤ 1.3×)")
    print(f"one run per partition vs one run: {per / one:.1f}× slower (target ≥ 10×)")
    if args.launched:
        launched(args, ws.root, keys, tmp / "dagster_home")
    instance.dispose()
    shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    sys.exit(0)


def launched(args: argparse.Namespace, workspace: Path, keys: list[str], home: Path) -> None:
    """The range as one run and as one run per partition, each run launched the way Dagster's
    default run launcher launches it: `dagster asset materialize` in a process of its own,
    which imports Dagster, loads the code location and starts a Spark session. One run per
    partition is timed once (it takes minutes); one run is the median of `--repeats`."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "BENCH_WORKSPACE": str(workspace),
        "BENCH_FIRST_DAY": keys[0],
        "BENCH_DAYS": str(len(keys)),
        "BENCH_ROWS_PER_DAY": str(args.rows_per_day),
        "BENCH_MASTER": args.master,
    }
    dagster = [
        str(Path(sys.executable).with_name("dagster")), "asset", "materialize",
        "-f", str(Path(__file__).with_name("backfill_defs.py")),
    ]  # fmt: skip

    def materialize(*selection: str) -> None:
        subprocess.run([*dagster, *selection], env=env, check=True, capture_output=True)

    def one_run() -> float:
        start = time.perf_counter()
        materialize("--select", "launched_one_run", "--partition-range", f"{keys[0]}...{keys[-1]}")
        return time.perf_counter() - start

    one_run()  # warm up: the file system caches, Python's bytecode
    one = statistics.median(one_run() for _ in range(args.repeats))
    start = time.perf_counter()
    for key in keys:
        materialize("--select", "launched_per_partition", "--partition", key)
    per = time.perf_counter() - start
    print("\nlaunched as Dagster launches runs (a process and a Spark session per run):")
    print(f"{'one run (single_run)':34} {one:8.3f}")
    print(f"{'one run per partition':34} {per:8.3f}")
    print(f"one run per partition vs one run: {per / one:.1f}× slower (target ≥ 10×)")


if __name__ == "__main__":
    main()
