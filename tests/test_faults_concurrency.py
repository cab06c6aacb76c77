"""Many processes writing one workspace at once: Dagster's multiprocess executor materializing
four assets into the same resource side by side (one process and Spark JVM per step, released
together by a barrier), and script processes recording lineage through the lineage API at the
same time. No record is lost or corrupted."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from dagster import (
    Definitions,
    EnvVar,
    JobDefinition,
    asset,
    define_asset_job,
    execute_job,
    reconstructable,
)
from pyspark.sql import DataFrame, SparkSession

from dws_dagster import (
    SparkWorkspaceIOManager,
    Workspace,
    WorkspaceResource,
    dws_ref,
    process_events,
)
from dws_dagster.ol.outbox import Outbox, event_key

from .conftest import ROOT
from .ol_parents import check_parents
from .pipeline import make_workspace

SHARDS = ("north", "south", "east", "west")
#: Generous: each step starts its own JVM on a shared machine. Not an assertion on speed.
BARRIER_SECONDS = 600


def _barrier(name: str) -> None:
    """Wait until every shard's step is running, so their writes happen together."""
    folder = Path(os.environ["DWS_FAULT_BARRIER"])
    (folder / name).touch()
    deadline = time.monotonic() + BARRIER_SECONDS
    while len(list(folder.iterdir())) < len(SHARDS):
        if time.monotonic() > deadline:
            raise RuntimeError(f"shard {name}: the other steps never started")
        time.sleep(0.1)


def _shard(name: str, index: int):
    @asset(name=f"shard_{name}", metadata=dws_ref("intermediate-data", f"shards/{name}"))
    def shard() -> DataFrame:
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        _barrier(name)
        return spark.range(1000 * (index + 1)).withColumnRenamed("id", "x")

    return shard


def shards_job() -> JobDefinition:
    """The job the step processes rebuild (the workspace comes from DWS_FAULT_WS)."""
    io = SparkWorkspaceIOManager(workspace=WorkspaceResource(root=EnvVar("DWS_FAULT_WS")))
    defs = Definitions(assets=[_shard(name, i) for i, name in enumerate(SHARDS)],
                       resources={"io_manager": io}, jobs=[define_asset_job("shards")])
    return defs.resolve_job_def("shards")


def _journal_ops(ws: Workspace) -> list[dict]:
    lines = []
    for path in sorted(ws.store.journal_dir.glob("*.jsonl")):
        data = path.read_bytes()
        assert data.endswith(b"\n"), f"{path} ends with a torn line"
        lines.extend(line for line in data.splitlines() if line.strip())
    return [orjson.loads(line) for line in lines]  # every line whole JSON


@pytest.mark.slow
@pytest.mark.spark
def test_multiprocess_executor_writes_four_assets_at_once(
        spark, tmp_path, instance, monkeypatch):
    ws = make_workspace(tmp_path / "ws")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DWS_FAULT_WS", str(ws.root))
    monkeypatch.setenv("DWS_FAULT_BARRIER", str(barrier))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    config = {"execution": {"config": {"multiprocess": {"max_concurrent": len(SHARDS)}}}}
    with execute_job(reconstructable(shards_job), instance=instance,
                     run_config=config) as result:
        assert result.success
        run_id = result.run_id
        pids = {event.pid for event in result.all_events if event.step_key}
    assert len(pids) >= len(SHARDS)  # one process per step

    ws = Workspace.open(ws.root)
    ops = _journal_ops(ws)
    records = [op["record"] for op in ops if op["op"] == "record"]
    assert sorted(r["ref"] for r in records) == sorted(
        f"intermediate-data/shards/{name}" for name in SHARDS)  # each once, none lost
    for index, name in enumerate(SHARDS):
        ref = f"intermediate-data/shards/{name}"
        state = ws.store.get(ref)
        assert state.status == "ok" and state.owner == f"shard_{name}"
        assert state.record["step"]["run_id"] == run_id
        assert state.version == ws.version_of(ref)
        data = spark.read.parquet(str(ws.local_path(ref)))
        assert data.count() == 1000 * (index + 1)

    # The sensor finds the same lineage in the event log and one START and COMPLETE each,
    # for the four assets and for the Dagster run itself.
    outcome = process_events(instance, ws)
    assert outcome.applied.records == 0 and outcome.pending == 0
    keys = [event_key(e) for e in Outbox(ws).events()]
    assert Counter(kind for _, kind in keys) == {"START": 5, "COMPLETE": 5}
    assert len(set(keys)) == len(keys)
    assert check_parents(list(Outbox(ws).events())) == {run_id}


SCRIPT = r"""
import sys
from pathlib import Path
from dws_dagster import LineageBuilder

root, tag, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
for n in range(steps):
    builder = (LineageBuilder().with_step_name(f"{tag}-{n}").with_parameters({"n": n})
               .with_workspace_directory(root).with_input_ref("src/shared"))
    with builder.eval() as lineage:
        lineage.add_output_ref(f"inter/{tag}/{n}")
        out = Path(root, "data", "inter", tag, str(n))
        out.mkdir(parents=True, exist_ok=True)
        (out / "part-0.csv").write_text(f"{tag},{n}\n")
print("ok")
"""


def test_script_processes_recording_lineage_at_once_lose_nothing(ws: Workspace) -> None:
    shared = ws.local_path("src/shared")
    shared.mkdir(parents=True)
    (shared / "data.csv").write_text("a,b\n1,2\n")
    tags, steps = ("p1", "p2", "p3", "p4"), 25
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(ws.root), tag, str(steps)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in tags]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]

    ws = Workspace.open(ws.root)
    ops = _journal_ops(ws)
    recorded = Counter(op["record"]["ref"] for op in ops
                       if op["op"] == "record" and op["record"]["step"]["kind"] == "script")
    expected = {f"inter/{tag}/{n}" for tag in tags for n in range(steps)}
    assert set(recorded) == expected and set(recorded.values()) == {1}
    source_version = ws.version_of("src/shared")
    for ref in expected:
        state = ws.store.get(ref)
        assert state.status == "ok" and state.version == ws.version_of(ref)
        assert state.record["inputs"] == [{"ref": "src/shared", "version": source_version}]
