"""`kill -9` of a run at each point of `handle_output`: the ref's data is the old or the new
version in full, the version recorded with it and in the lineage store match that data, and the
next run proceeds.

Each run is a real process (its own Spark JVM) that stops itself at one point and signals it
through a file; the test then kills its whole process group with SIGKILL. The points are
reached by wrapping functions inside the child only (no hook in production code):

- `spark-write`: a task of the Spark write hangs on its first row after another task has
  committed its files (the staging folder is half written);
- `staged`: Spark has written the staging folder and its version marker; the swap has not begun;
- `swap`: the old data has been renamed aside; the new data is not in place yet;
- `swapped`: the new data is in place; its lineage record is not in the store yet.

The children run side by side (one JVM start each is the cost of this suite). On a Spark
Connect session (the child is a thin client of the test run's Connect server, configured as a
user would, `PySparkResource(spark_config={"spark.remote": ...})`) the swap is the client's:
the points `staged` and `swap` are killed there too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from dagster import DagsterInstance, asset, materialize
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dws_dagster import Workspace, dws_ref
from dws_dagster.spark import row_version, storage
from dws_dagster.workspace.swap import OLD_PREFIX, STAGING_PREFIX, name_tag
from tests.conftest import ROOT
from tests.support.pipeline import io_manager, make_workspace

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REF = "intermediate-data/victim"
OLD_ROWS, NEW_ROWS, NEXT_ROWS = 50, 200, 70
#: Where each kill leaves the ref: the old data (and lineage) or the new.
POINTS = {"spark-write": OLD_ROWS, "staged": OLD_ROWS, "swap": OLD_ROWS, "swapped": NEW_ROWS}
#: Generous: four JVMs start at once on a shared machine. Not an assertion on speed.
READY_DEADLINE_SECONDS = 600

CHILD = r"""
import os, sys, time
from pathlib import Path

root, point, ready = sys.argv[1], sys.argv[2], Path(sys.argv[3])
NEW_ROWS = int(sys.argv[4])
remote = sys.argv[5] if len(sys.argv) > 5 else None


def stop_here(where):
    # Signal the test, then wait for its SIGKILL.
    ready.write_text(where)
    while True:
        time.sleep(3600)


from dagster import DagsterInstance, asset, materialize
from pyspark.sql import SparkSession, functions as F

from dws_dagster import Workspace, dws_ref
from dws_dagster.spark import storage
from dws_dagster.store import lineage_store as store_module
from dws_dagster.workspace import swap as swap_module
from tests.support.pipeline import io_manager

ws = Workspace.open(root)
if remote:
    from dagster_pyspark import PySparkResource

    pyspark = PySparkResource(spark_config={"spark.remote": remote})
    spark = SparkSession.builder.remote(remote).getOrCreate()
else:
    pyspark = None
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
column = F.col("id") * 3
if point == "spark-write":
    ready_path, hang_at = str(ready), NEW_ROWS // 2

    def hang(value):
        # One task at a time (local[1]): partition 0 is written and committed before
        # partition 1 reaches its first row, so the staging folder is half written here.
        if value == hang_at:
            with open(ready_path, "w") as handle:
                handle.write("spark-write")
            time.sleep(3600)
        return value * 3

    column = F.udf(hang, "long")("id")
elif point == "staged":
    storage.swap_into_place = lambda *args, **kwargs: stop_here("staged")
elif point == "swap":
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        real_replace(src, dst, *args, **kwargs)
        if Path(dst).name.startswith(swap_module.OLD_PREFIX + swap_module.name_tag("victim")):
            stop_here("swap")  # old data aside, new data not yet in place

    os.replace = replace
elif point == "swapped":
    store_module.LineageStore.commit = lambda self, records: stop_here("swapped")


@asset(name="victim", metadata=dws_ref("intermediate-data", "victim"))
def victim():
    return spark.range(0, NEW_ROWS, 1, 2).withColumn("x", column)


materialize([victim], resources={"io_manager": io_manager(ws, pyspark=pyspark)},
            instance=DagsterInstance.ephemeral())
ready.write_text("finished")  # the point was never reached: the test fails on this
"""


@dataclass
class Killed:
    ws: Workspace
    old_version: str
    reached: str
    stderr: str


def old_data(spark) -> DataFrame:
    return spark.range(OLD_ROWS).withColumnRenamed("id", "x")


def new_data(spark) -> DataFrame:
    """What the killed runs write (the same plan as in CHILD, so the same schema)."""
    return spark.range(0, NEW_ROWS, 1, 2).withColumn("x", F.col("id") * 3)


def _materialize(ws: Workspace, df: DataFrame) -> None:
    @asset(name="victim", metadata=dws_ref("intermediate-data", "victim"))
    def victim() -> DataFrame:
        return df

    with DagsterInstance.ephemeral() as instance:
        materialize([victim], instance=instance, resources={"io_manager": io_manager(ws)})


def read_downstream(ws: Workspace) -> None:
    """Run an asset that reads the victim through the IO manager (and writes its own ref)."""

    @asset(name="victim", metadata=dws_ref("intermediate-data", "victim"))
    def victim() -> DataFrame:
        raise AssertionError("not selected: only read")

    @asset(name="reader", metadata=dws_ref("intermediate-data", "reader"))
    def reader(victim: DataFrame) -> DataFrame:
        return victim.groupBy().count()

    with DagsterInstance.ephemeral() as instance:
        materialize(
            [victim, reader],
            selection=["reader"],
            instance=instance,
            resources={"io_manager": io_manager(ws)},
        )


def _wait_for_point(child: subprocess.Popen[bytes], ready: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text():
            return ready.read_text()
        if child.poll() is not None:
            return f"exited with {child.returncode}"
        time.sleep(0.2)
    return "never reached its point (deadline)"


def _kill_runs(
    spark, base: Path, points: list[str], remote: str | None = None
) -> dict[str, Killed]:
    """One workspace per point, each with old data materialized, then a run of new data
    (on the Connect server at `remote`, if given) killed at that point."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    started: dict[str, tuple[Workspace, str, subprocess.Popen[bytes], Path]] = {}
    try:
        for point in points:
            ws = make_workspace(base / point)
            _materialize(ws, old_data(spark))
            ready = base / f"{point}.ready"
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(ws.root),
                    point,
                    str(ready),
                    str(NEW_ROWS),
                    *([remote] if remote else []),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            started[point] = (ws, ws.version_of(REF), child, ready)
        deadline = time.monotonic() + READY_DEADLINE_SECONDS
        results = {}
        for point, (ws, old_version, child, ready) in started.items():
            reached = _wait_for_point(child, ready, deadline)
            os.killpg(child.pid, signal.SIGKILL)
            _, err = child.communicate()
            results[point] = Killed(ws, old_version, reached, err.decode(errors="replace"))
        return results
    finally:
        for _, _, child, _ in started.values():
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


@pytest.fixture(scope="module")
def killed(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Killed]:
    return _kill_runs(spark, tmp_path_factory.mktemp("killed"), list(POINTS))


#: The points of a run on a Connect session: the server writes, the client swaps.
CONNECT_POINTS = ["staged", "swap"]


@pytest.fixture(scope="module")
def killed_on_connect(spark, connect_server, tmp_path_factory) -> dict[str, Killed]:
    return _kill_runs(
        spark, tmp_path_factory.mktemp("killed-connect"), CONNECT_POINTS, connect_server.url
    )


@pytest.mark.parametrize("point", list(POINTS))
def test_kill_leaves_old_or_new_data_whole_and_lineage_matching(spark, killed, point):
    _check_killed(spark, killed[point], point)


@pytest.mark.parametrize("point", CONNECT_POINTS)
def test_kill_on_connect_leaves_the_old_data_whole(spark, killed_on_connect, point):
    """Checked on the classic session: the version the Connect run wrote is the classic one."""
    _check_killed(spark, killed_on_connect[point], point)


def _check_killed(spark, case: Killed, point: str) -> None:
    assert case.reached == point, f"the run did not stop at {point}: {case.stderr[-3000:]}"
    ws = case.ws
    target = ws.local_path(REF)

    df = storage.read(spark, str(target))  # recovers what a crashed swap left first
    rows = df.count()
    assert rows == POINTS[point]
    assert not list(target.parent.glob(f"{OLD_PREFIX}{name_tag('victim')}-*"))
    if point == "spark-write":
        # The half-written copy is hidden beside the data, invisible to readers and versions.
        staging = list(target.parent.glob(f"{STAGING_PREFIX}{name_tag('victim')}-*"))
        assert staging and any(p.is_file() for p in staging[0].rglob("*"))

    # Exactly the old or the new rows, and the version recorded with them is theirs.
    expected = old_data(spark) if rows == OLD_ROWS else new_data(spark)
    assert sorted(df.collect()) == sorted(expected.collect())
    logical = row_version.dataframe_version(expected)[0]
    assert ws.version_of(REF) == logical
    assert (logical == case.old_version) == (rows == OLD_ROWS)
    # The lineage store agrees with the data once a step reads it. Killed after the swap,
    # the run's record is only in the data's marker until then; the reader commits it.
    before = Workspace.open(ws.root).store.get(REF)
    assert before.version == (case.old_version if point == "swapped" else logical)
    read_downstream(ws)
    after = Workspace.open(ws.root)
    state = after.store.get(REF)
    assert state is not None and state.version == logical and state.status == "ok"
    assert after.store.get("intermediate-data/reader").record["inputs"] == [
        {"ref": REF, "version": logical}
    ]

    # The next run proceeds and leaves its own data and lineage.
    _materialize(ws, spark.range(NEXT_ROWS).withColumnRenamed("id", "x"))
    again = Workspace.open(ws.root)
    assert storage.read(spark, str(target)).count() == NEXT_ROWS
    assert again.store.get(REF).version == again.version_of(REF) != logical
