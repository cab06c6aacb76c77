"""The backfill bench's rows, and its code location for runs launched as Dagster launches them.

`bench/backfill.py` imports `frame`, `session` and `range_assets` for its in-process cases.
With `--launched` it also runs `dagster asset materialize -f bench/backfill_defs.py ...` once
for the whole range and once per partition: each run a process of its own that imports
Dagster, loads these definitions and starts a Spark session, as the default run launcher (and,
on Kubernetes, a pod per run) does.
The environment says what to build: `BENCH_WORKSPACE` (the workspace root), `BENCH_FIRST_DAY`,
`BENCH_DAYS`, `BENCH_ROWS_PER_DAY`, `BENCH_MASTER`.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from pyspark.sql import DataFrame, SparkSession


def frame(spark: SparkSession, start: dt.date, end: dt.date, rows_per_day: int) -> DataFrame:
    """`rows_per_day` rows of five columns for each day in [start, end)."""
    n = (end - start).days * rows_per_day
    return spark.range(n, numPartitions=4).selectExpr(
        f"DATE_ADD(DATE'{start.isoformat()}', CAST(id DIV {rows_per_day} AS INT)) AS day",
        "id",
        "id % 263 AS zone",
        "CAST(id % 9973 AS DOUBLE) / 7 AS fare",
        "CONCAT('trip-', CAST(id AS STRING)) AS name",
    )


def session(master: str) -> SparkSession:
    """The bench's Spark session: the same settings in-process and in a launched run."""
    spark = (
        SparkSession.builder.master(master)
        .appName("dws-bench-backfill")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def range_assets(days: Any, rows_per_day: int, master: str, one_run: str, per_partition: str):
    """Two daily assets of the same rows in `inter`: `one_run` backfills a range in one run
    (`BackfillPolicy.single_run()`, its partition column named for the IO manager),
    `per_partition` one run per partition (`BackfillPolicy.multi_run(1)`)."""
    import warnings

    from dagster import BackfillPolicy, asset

    from dws_dagster import dws_ref

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # backfill_policy is a beta parameter

        @asset(
            name=one_run,
            partitions_def=days,
            backfill_policy=BackfillPolicy.single_run(),
            metadata={**dws_ref("inter", one_run), "partition_expr": "day"},
        )
        def range_in_one_run(context) -> DataFrame:
            window = context.partition_time_window
            return frame(session(master), window.start.date(), window.end.date(), rows_per_day)

        @asset(
            name=per_partition,
            partitions_def=days,
            backfill_policy=BackfillPolicy.multi_run(1),
            metadata=dws_ref("inter", per_partition),
        )
        def run_per_partition(context) -> DataFrame:
            window = context.partition_time_window
            return frame(session(master), window.start.date(), window.end.date(), rows_per_day)

    return range_in_one_run, run_per_partition


def _definitions():  # -> dagster.Definitions, built only where Dagster loads this file
    from dagster import DailyPartitionsDefinition, Definitions

    from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource

    first = dt.date.fromisoformat(os.environ["BENCH_FIRST_DAY"])
    days = DailyPartitionsDefinition(
        start_date=first.isoformat(),
        end_date=(first + dt.timedelta(days=int(os.environ["BENCH_DAYS"]))).isoformat(),
    )
    assets = range_assets(
        days,
        int(os.environ["BENCH_ROWS_PER_DAY"]),
        os.environ["BENCH_MASTER"],
        "launched_one_run",
        "launched_per_partition",
    )
    manager = SparkWorkspaceIOManager(
        workspace=WorkspaceResource(root=os.environ["BENCH_WORKSPACE"])
    )
    return Definitions(assets=list(assets), resources={"io_manager": manager})


if "BENCH_WORKSPACE" in os.environ:
    defs = _definitions()
