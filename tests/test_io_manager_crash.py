"""A process killed in the middle of a write leaves the old data whole and readable."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, asset, materialize
from pyspark.sql import DataFrame

from dws_dagster import dws_ref
from dws_dagster.spark import storage

from .conftest import ROOT
from .pipeline import io_manager, make_workspace

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WRITER = """
import sys, time
from dagster import DagsterInstance, asset, materialize
from pyspark.sql import SparkSession, functions as F
from dws_dagster import Workspace, dws_ref
from tests.pipeline import io_manager

ws = Workspace.open(sys.argv[1])
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .getOrCreate())
slow = F.udf(lambda v: (time.sleep(0.02), v)[1], "long")

@asset(metadata=dws_ref("intermediate-data", "victim"))
def victim():
    return spark.range(0, 100000, 1, 4).withColumn("x", slow("id"))

print("writing", flush=True)
materialize([victim], resources={"io_manager": io_manager(ws)},
            instance=DagsterInstance.ephemeral())
print("finished", flush=True)
"""


def test_kill_during_write_keeps_old_data(spark, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")

    @asset(name="victim", metadata=dws_ref("intermediate-data", "victim"))
    def victim() -> DataFrame:
        return spark.range(50).withColumnRenamed("id", "x")

    with DagsterInstance.ephemeral() as instance:
        materialize([victim], instance=instance, resources={"io_manager": io_manager(ws)})
    old_version = ws.version_of("intermediate-data/victim")
    target = ws.local_path("intermediate-data/victim")

    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(ws.root)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        staging: list[Path] = []
        while time.monotonic() < deadline and child.poll() is None:
            staging = list(target.parent.glob(".dws-staging-victim-*"))
            if staging and any(staging[0].rglob("*")):
                break
            time.sleep(0.2)
        assert staging, f"the writer never started writing: {child.communicate()[1][-2000:]}"
        time.sleep(1.0)
        assert child.poll() is None, "the writer finished before it could be killed"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()

    # Old data whole; the half-written staging copy is invisible to readers and versions.
    assert ws.version_of("intermediate-data/victim") == old_version
    assert storage.read(spark, str(target)).count() == 50
    assert ws.store.get("intermediate-data/victim").version == old_version

    @asset(name="victim", metadata=dws_ref("intermediate-data", "victim"))
    def victim_again() -> DataFrame:
        return spark.range(70).withColumnRenamed("id", "x")

    with DagsterInstance.ephemeral() as instance:
        materialize([victim_again], instance=instance,
                    resources={"io_manager": io_manager(ws)})
    assert storage.read(spark, str(target)).count() == 70
