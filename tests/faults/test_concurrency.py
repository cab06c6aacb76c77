"""Many processes writing one workspace at once: Dagster's multiprocess executor materializing
four assets into the same resource side by side (one process and Spark JVM per step, released
together by a barrier), script processes recording lineage through the lineage API at the same
time, script processes racing for one ref (rule (a): exactly one wins), and writers killed with
SIGKILL in the middle of their transactions. No record is lost or corrupted, and nobody is
blocked by a writer that died."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
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
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.outbox.event_rows import event_key
from dws_dagster.workspace.records import LineageRecord, StepInfo
from tests.conftest import ROOT
from tests.ol.ol_parents import check_parents
from tests.support.pipeline import make_workspace
from tests.support.store_db import STORES, db_dump, on_store, sql

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
        spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate()
        )
        _barrier(name)
        return spark.range(1000 * (index + 1)).withColumnRenamed("id", "x")

    return shard


def shards_job() -> JobDefinition:
    """The job the step processes rebuild (the workspace comes from DWS_FAULT_WS)."""
    io = SparkWorkspaceIOManager(workspace=WorkspaceResource(root=EnvVar("DWS_FAULT_WS")))
    defs = Definitions(
        assets=[_shard(name, i) for i, name in enumerate(SHARDS)],
        resources={"io_manager": io},
        jobs=[define_asset_job("shards")],
    )
    return defs.resolve_job_def("shards")


@pytest.fixture(params=STORES)
def ws(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    """The script-process tests run on both stores: SQLite (the default) and PostgreSQL."""
    yield from on_store(request, tmp_path, monkeypatch)


def _journal_ops(ws: Workspace) -> list[dict]:
    """The store's history as its rows hold it (read with SQL): each operation, with the
    record it wrote."""
    rows = sql(
        ws,
        "SELECT o.op, o.ref, r.body FROM dws_operations o LEFT JOIN dws_records r "
        "ON r.id = o.record_id WHERE o.workspace_id = :ws ORDER BY o.id",
    )
    return [
        {"op": op, "ref": ref, **({"record": orjson.loads(body)} if body else {})}
        for op, ref, body in rows
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_multiprocess_executor_writes_four_assets_at_once(spark, tmp_path, instance, monkeypatch):
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
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    config = {"execution": {"config": {"multiprocess": {"max_concurrent": len(SHARDS)}}}}
    with execute_job(reconstructable(shards_job), instance=instance, run_config=config) as result:
        assert result.success
        run_id = result.run_id
        pids = {event.pid for event in result.all_events if event.step_key}
    assert len(pids) >= len(SHARDS)  # one process per step

    ws = Workspace.open(ws.root)
    ops = _journal_ops(ws)
    records = [op["record"] for op in ops if op["op"] == "record"]
    assert sorted(r["ref"] for r in records) == sorted(
        f"intermediate-data/shards/{name}" for name in SHARDS
    )  # each once, none lost
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
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(ws.root), tag, str(steps)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in tags
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]

    ws = Workspace.open(ws.root)
    ops = _journal_ops(ws)
    recorded = Counter(
        op["record"]["ref"]
        for op in ops
        if op["op"] == "record" and op["record"]["step"]["kind"] == "script"
    )
    expected = {f"inter/{tag}/{n}" for tag in tags for n in range(steps)}
    assert set(recorded) == expected and set(recorded.values()) == {1}
    source_version = ws.version_of("src/shared")
    for ref in expected:
        state = ws.store.get(ref)
        assert state.status == "ok" and state.version == ws.version_of(ref)
        assert state.record["inputs"] == [{"ref": "src/shared", "version": source_version}]


RACE = r"""
import sys
from pathlib import Path
from dws_dagster import LineageBuilder
from dws_dagster.errors import LineageConflictError

root, tag, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
from dws_dagster import Workspace
Workspace.open(root).store.refs()  # opened before the start, as a running step would be
(go.parent / f"ready-{tag}").touch()
while not go.exists():  # released together
    pass
builder = (LineageBuilder().with_step_name(f"writer-{tag}").with_parameters({})
           .with_workspace_directory(root).with_input_ref("src/shared")
           .with_output_ref("inter/contested"))
try:
    with builder.eval():
        out = Path(root, "data", "inter", "contested")
        out.mkdir(parents=True, exist_ok=True)
        (out / "part-0.csv").write_text(tag + "\n")
        print("body ran")
except LineageConflictError as exc:
    print("refused:", exc)
    sys.exit(3)
print("won")
"""


def test_processes_racing_for_one_ref_leave_exactly_one_writer(
    ws: Workspace, tmp_path: Path
) -> None:
    """Rule (a) across processes: of eight steps claiming the same output at once, exactly one
    claims it and runs; the others are refused before their body runs, and the store holds the
    winner's claim and record only."""
    shared = ws.local_path("src/shared")
    shared.mkdir(parents=True)
    (shared / "data.csv").write_text("a\n1\n")
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(ws.root), str(n), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    while len(list(tmp_path.glob("ready-*"))) < len(procs):
        assert all(proc.poll() is None for proc in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    go.touch()
    outcomes = [(proc.wait(timeout=300), *proc.communicate()) for proc in procs]
    winners = [out for code, out, _ in outcomes if code == 0]
    refused = [out for code, out, _ in outcomes if code == 3]
    assert len(winners) == 1 and len(refused) == 7, outcomes
    assert "body ran" in winners[0]
    assert all(
        "body ran" not in out and "may not write ref inter/contested" in out for out in refused
    )
    winner = next(f"writer-{n}" for n, (code, _, _) in enumerate(outcomes) if code == 0)
    state = Workspace.open(ws.root).store.get("inter/contested")
    assert state.owner == winner and state.status == "ok"
    ops = [op for op in _journal_ops(ws) if op["ref"] == "inter/contested"]
    assert [op["op"] for op in ops] == ["claim", "record"]
    assert ops[1]["record"]["step"]["name"] == winner
    assert (ws.local_path("inter/contested") / "part-0.csv").read_text() == winner.removeprefix(
        "writer-"
    ) + "\n"


HOLDER = r"""
import sys, time
from dws_dagster import Workspace
from dws_dagster.workspace.records import LineageRecord, StepInfo

store = Workspace.open(sys.argv[1]).store
with store.locked():
    store.commit([LineageRecord(ref=f"inter/doomed/{n}", version="v", step=StepInfo(name="doomed"))
                  for n in range(50)])
    store.claim("doomed", ["inter/doomed-claim"])
    print("holding", flush=True)
    time.sleep(600)  # killed here, its transaction open
"""

LOOPER = r"""
import sys
from dws_dagster import Workspace
from dws_dagster.workspace.records import LineageRecord, StepInfo

store = Workspace.open(sys.argv[1]).store
for n in range(100000):
    store.commit([LineageRecord(ref=f"inter/loop/{n}", version="v", step=StepInfo(name="loop"))])
    print(n, flush=True)
"""


def _start(code: str, ws: Workspace) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, str(ws.root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _integrity(ws: Workspace) -> None:
    """The database is whole (PostgreSQL checks its foreign keys at every commit)."""
    if ws.store.settings.dialect == "sqlite":
        assert sql(ws, "PRAGMA integrity_check") == [("ok",)]
        assert sql(ws, "PRAGMA foreign_key_check") == []


def test_a_writer_killed_holding_the_lock_loses_nothing_and_blocks_nobody(ws: Workspace) -> None:
    """SIGKILL of a process inside its write transaction: what it had not committed is gone
    whole, what was committed before stays, and the next writer (another process) takes the
    lock: SQLite releases it with the process, PostgreSQL with its connection."""
    ws.store.commit([LineageRecord(ref="inter/before", version="v1", step=StepInfo(name="b"))])
    before = db_dump(ws)
    holder = _start(HOLDER, ws)
    assert holder.stdout.readline().strip() == "holding", holder.stderr.read()
    holder.kill()  # SIGKILL
    holder.wait(timeout=60)
    assert holder.returncode == -9
    assert db_dump(ws) == before  # nothing of the dead transaction (PostgreSQL: rolled back)
    after = _start(LOOPER.replace("range(100000)", "range(3)"), ws)
    out, err = after.communicate(timeout=300)
    assert after.returncode == 0, err  # not refused for a lock held by the dead process
    store = Workspace.open(ws.root).store
    assert store.refs() == ["inter/before", "inter/loop/0", "inter/loop/1", "inter/loop/2"]
    store.claim("other", ["inter/doomed-claim"])  # the dead process's claim never was
    _integrity(ws)


def test_a_writer_killed_while_committing_loses_no_commit(ws: Workspace) -> None:
    """SIGKILL of a process committing in a loop, at whatever point it reached (in a commit,
    between two): every commit it reported is there, the store is whole, and writing goes on."""
    looper = _start(LOOPER, ws)
    reported = -1
    while reported < 30:
        reported = int(looper.stdout.readline())
    looper.kill()
    looper.wait(timeout=60)
    store = Workspace.open(ws.root).store
    loop_refs = [ref for ref in store.refs() if ref.startswith("inter/loop/")]
    numbers = sorted(int(ref.rsplit("/", 1)[1]) for ref in loop_refs)
    assert numbers == list(range(len(numbers))) and len(numbers) >= reported + 1
    assert len([op for op in _journal_ops(ws) if op["op"] == "record"]) == len(numbers)
    _integrity(ws)
    store.commit([LineageRecord(ref="inter/after", version="v", step=StepInfo(name="a"))])
    assert Workspace.open(ws.root).store.get("inter/after").version == "v"
