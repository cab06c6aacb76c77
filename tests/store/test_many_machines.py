"""Several machines, no shared folder: worker processes that each have their OWN copy of the
workspace folder (no `.dataworkspace/` shared between them), one PostgreSQL store, and data
resources in one common folder standing in for object storage (`file://` URIs).

Released together, the workers run script steps through the lineage API: some write the same
ref (exactly one wins, the others are refused before writing), some read two versions of one
input (refused before the body runs), many are consistent. The lineage must then be what the
same steps give run one after another, and a worker killed (SIGKILL) in the middle of its
commits loses nothing it committed and blocks nobody.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import Workspace
from dws_dagster.ol.job_names import asset_job_name
from tests.conftest import ROOT, STORE_DATABASE

pytestmark = [pytest.mark.slow]

MACHINES = 3
OWN_STEPS = 8

#: A worker: waits at the barrier, runs its plan of script steps, prints each step's outcome.
WORKER = r"""
import json, os, sys, time
from pathlib import Path
from dws_dagster import LineageBuilder, Workspace
from dws_dagster.errors import DwsError

root, plan = Path(sys.argv[1]), json.loads(sys.argv[2])
barrier, parties = Path(sys.argv[3]), int(sys.argv[4])
ws = Workspace.open(root, search_parents=False)
(barrier / str(os.getpid())).touch()
deadline = time.monotonic() + 300
while len(list(barrier.iterdir())) < parties:
    if time.monotonic() > deadline:
        raise SystemExit("the other workers never started")
    time.sleep(0.01)
outcomes = []
for step in plan:
    builder = (LineageBuilder().with_step_name(step["name"])
               .with_parameters(step.get("parameters", {})).with_workspace_directory(root))
    builder = (builder.with_input_refs(step["inputs"]) if step["inputs"]
               else builder.with_no_inputs())
    wrote = []
    try:
        with builder.eval() as lineage:
            for ref, text in step["outputs"].items():
                lineage.add_output_ref(ref)
                folder = ws.local_path(ref)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "part-0.csv").write_text(text)
                wrote.append(ref)
        outcomes.append([step["name"], "ok", wrote])
    except DwsError as exc:
        outcomes.append([step["name"], type(exc).__name__, wrote])
    print(json.dumps(outcomes[-1]), flush=True)
"""


def _step(
    name: str, inputs: list[str], outputs: dict[str, str], parameters: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"name": name, "inputs": inputs, "outputs": outputs, "parameters": parameters or {}}


def _machine(seed: Path, machines: Path, number: int) -> Path:
    """A machine's own copy of the workspace folder (its definition, as a code image has)."""
    root = machines / f"machine-{number}"
    shutil.copytree(seed, root)
    return root


def _start(
    root: Path, plan: list[dict[str, Any]], barrier: Path, parties: int
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root), json.dumps(plan), str(barrier), str(parties)],
        cwd=root,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _outcomes(process: subprocess.Popen[str]) -> list[list[Any]]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _seed(tmp_path: Path) -> tuple[Path, Path]:
    """The workspace definition every machine gets, and the common data folder."""
    common = tmp_path / "object-store"
    (common / "src" / "trips").mkdir(parents=True)
    (common / "src" / "trips" / "part-0.csv").write_text("a\n1\n2\n")
    seed = tmp_path / "seed"
    ws = Workspace.init(seed, name="fleet")
    ws.add_resource("src", "source-data", uri=(common / "src").as_uri())
    ws.add_resource("inter", "intermediate-data", uri=(common / "inter").as_uri())
    return seed, common


def _lineage(ws: Workspace) -> dict[str, Any]:
    """ref -> (writer, version, inputs' versions, parameters): what must not depend on the
    order steps ran in or on which machine ran them."""
    view = {}
    for ref, state in ws.store.items():
        record = state.record or {}
        view[ref] = (
            state.owner,
            record.get("version"),
            sorted((i["ref"], i["version"]) for i in record.get("inputs", ())),
            record.get("parameters"),
            state.status,
        )
    return view


@pytest.fixture
def postgres_store(postgres_server, monkeypatch, request) -> str:
    """DWS_STORE_URL for every process: one PostgreSQL store, a schema of its own."""
    from dws_dagster.store.database import forget_databases

    monkeypatch.setenv("DWS_STORE_URL", postgres_server.url(STORE_DATABASE))
    schema = f"fleet_{abs(hash(request.node.nodeid)) % 10**12}_{os.getpid()}"
    monkeypatch.setenv("DWS_STORE_SCHEMA", schema)
    yield schema
    forget_databases()


def test_machines_without_a_shared_folder_keep_the_rules_and_lose_nothing(
    tmp_path, postgres_store, monkeypatch
):
    seed, _common = _seed(tmp_path)
    machines = tmp_path / "machines"
    # Before the workers: inter/a at v1, inter/b built from it, then inter/a rewritten (v2):
    # reading inter/a with inter/b now mixes two versions of inter/a.
    setup = [
        _step("prep", ["src/trips"], {"inter/a": "v1\n"}, {"round": 1}),
        _step("feature", ["inter/a"], {"inter/b": "b\n"}),
        _step("prep", ["src/trips"], {"inter/a": "v2\n"}, {"round": 2}),
    ]
    barrier = tmp_path / "barrier-setup"
    barrier.mkdir()
    assert [o[1] for o in _outcomes(_start(_machine(seed, machines, 0), setup, barrier, 1))] == [
        "ok",
        "ok",
        "ok",
    ]

    plans = []
    for number in range(1, MACHINES + 1):
        plan = [
            _step(f"contender_{number}", ["inter/a"], {"inter/contested": f"{number}\n"}),
            _step(f"mixer_{number}", ["inter/a", "inter/b"], {f"inter/mixed_{number}": "never\n"}),
        ]
        plan += [
            _step(
                f"own_{number}_{k}",
                ["inter/a"],
                {f"inter/m{number}/k{k}": f"{number}-{k}\n"},
                {"k": k},
            )
            for k in range(OWN_STEPS)
        ]
        plans.append(plan)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    workers = [
        _start(_machine(seed, machines, number), plan, barrier, MACHINES)
        for number, plan in enumerate(plans, start=1)
    ]
    outcomes = [_outcomes(worker) for worker in workers]

    contest = [o for per in outcomes for o in per if o[0].startswith("contender_")]
    winners = [o for o in contest if o[1] == "ok"]
    assert len(winners) == 1, contest
    assert {o[1] for o in contest if o[1] != "ok"} == {"LineageConflictError"}
    assert all(o[2] == [] for o in contest if o[1] != "ok")  # refused before writing
    mixers = [o for per in outcomes for o in per if o[0].startswith("mixer_")]
    assert {o[1] for o in mixers} == {"LineageConsistencyError"}
    assert not any((_common / "inter" / f"mixed_{n}").exists() for n in range(1, MACHINES + 1))
    own = [o for per in outcomes for o in per if o[0].startswith("own_")]
    assert len(own) == MACHINES * OWN_STEPS and {o[1] for o in own} == {"ok"}

    # The same steps one after another on one machine (its own schema) give the same lineage.
    fleet = Workspace.open(machines / "machine-1")
    concurrent = _lineage(fleet)
    monkeypatch.setenv("DWS_STORE_SCHEMA", postgres_store + "_serial")
    serial_seed, serial_common = _seed(tmp_path / "serial")
    winner = int(winners[0][0].rsplit("_", 1)[1])
    serial_plan = setup + [
        step
        for number, plan in enumerate(plans, start=1)
        for step in plan
        if not step["name"].startswith(("contender_", "mixer_"))
        or step["name"] == f"contender_{winner}"
    ]
    barrier = tmp_path / "barrier-serial"
    barrier.mkdir()
    _outcomes(_start(serial_seed, serial_plan, barrier, 1))
    assert _lineage(Workspace.open(serial_seed)) == concurrent
    monkeypatch.setenv("DWS_STORE_SCHEMA", postgres_store)

    # Every step that ran is in the history exactly once per output it recorded.
    records = [op["record"]["ref"] for op in fleet.store.history() if op["op"] == "record"]
    expected = ["src/trips", "inter/a", "inter/b", "inter/a", "inter/contested"] + [
        f"inter/m{n}/k{k}" for n in range(1, MACHINES + 1) for k in range(OWN_STEPS)
    ]
    assert sorted(records) == sorted(expected)


def test_a_worker_killed_mid_commit_loses_nothing_and_blocks_nobody(tmp_path, postgres_store):
    seed, _common = _seed(tmp_path)
    machines = tmp_path / "machines"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    plan = [_step(f"busy_{k}", ["src/trips"], {f"inter/busy/k{k}": f"{k}\n"}) for k in range(400)]
    victim = _start(_machine(seed, machines, 1), plan, barrier, 1)
    done: list[str] = []
    assert victim.stdout is not None
    for line in victim.stdout:  # let it commit a few steps, then kill it mid-stream
        done.append(json.loads(line)[0])
        if len(done) >= 5:
            break
    time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    # Another machine writes at once: the killed one's lock went with its connection.
    other_barrier = tmp_path / "barrier-2"
    other_barrier.mkdir()
    after = _outcomes(
        _start(
            _machine(seed, machines, 2),
            [_step("after_kill", ["src/trips"], {"inter/after": "x\n"})],
            other_barrier,
            1,
        )
    )
    assert after == [["after_kill", "ok", ["inter/after"]]]
    store = Workspace.open(machines / "machine-2").store
    recorded = {ref for ref, state in store.items() if state.record is not None}
    # Every step the victim reported done is recorded; whatever it was doing when killed is
    # either whole (claim and record) or a claim without a record, never half a record.
    assert {f"inter/busy/k{name.split('_')[1]}" for name in done} <= recorded
    for ref, state in store.items():
        if ref.startswith("inter/busy/") and state.record is None:
            assert state.owner is not None and state.attempt is None


# ------------------------------------------------------------------ Dagster on several machines

#: The assets every Dagster machine defines (its code image): `fare` and `fare_stats`, which
#: the test materializes before the workers start, the second from an older `fare`.
SHARED_ASSETS = r"""
from dagster import asset
from pyspark.sql import DataFrame, functions as F
from dws_dagster import dws_ref, dws_source_asset

trips = dws_source_asset("trips", "src", "trips", format="csv")

@asset(metadata=dws_ref("inter", "dag/fare"))
def fare(trips: DataFrame) -> DataFrame:
    return trips.select("fare")

@asset(metadata=dws_ref("inter", "dag/fare_stats"))
def fare_stats(fare: DataFrame) -> DataFrame:
    return fare.agg(F.sum("fare").alias("total"))
"""

#: A Dagster worker: its own Spark driver, the PostgreSQL Dagster instance of DAGSTER_HOME, the
#: IO manager over its own copy of the workspace folder. It materializes its own asset,
#: contends with the other machines for one ref, then tries an asset whose inputs carry two
#: versions of `fare` (refused before its body runs, which would leave a file behind).
DAGSTER_WORKER = (
    SHARED_ASSETS
    + r"""
import os, sys, time
from pathlib import Path
from dagster import DagsterInstance, materialize
from pyspark.sql import SparkSession
from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource

root, number = Path(sys.argv[1]), int(sys.argv[2])
barrier, parties = Path(sys.argv[3]), int(sys.argv[4])
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
instance = DagsterInstance.get()

@asset(name=f"mixer_{number}", metadata=dws_ref("inter", f"dag/m{number}/mixed"))
def mixer(fare: DataFrame, fare_stats: DataFrame) -> DataFrame:
    (root / f"mixer-{number}-body-ran").touch()
    return fare.crossJoin(fare_stats)

@asset(name=f"by_zone_{number}", metadata=dws_ref("inter", f"dag/m{number}/by_zone"))
def by_zone(trips: DataFrame) -> DataFrame:
    return trips.groupBy("zone").agg(F.count(F.lit(1)).alias("trips"))

@asset(name=f"contender_{number}", metadata=dws_ref("inter", "dag/contested"))
def contender(trips: DataFrame) -> DataFrame:
    return trips.withColumn("machine", F.lit(number))

resources = {"io_manager": SparkWorkspaceIOManager(workspace=WorkspaceResource(root=str(root)))}
(barrier / str(number)).touch()
deadline = time.monotonic() + 600
while len(list(barrier.iterdir())) < parties:
    if time.monotonic() > deadline:
        raise SystemExit("the other machines never started")
    time.sleep(0.05)
own = materialize([trips, by_zone], instance=instance, resources=resources,
                  selection=[f"by_zone_{number}"], raise_on_error=False)
contest = materialize([trips, contender], instance=instance, resources=resources,
                      selection=[f"contender_{number}"], raise_on_error=False)
mix = materialize([trips, fare, fare_stats, mixer], instance=instance, resources=resources,
                  selection=[f"mixer_{number}"], raise_on_error=False)
refusals = [event.step_failure_data.error.to_string()
            for event in mix.get_step_failure_events()]
mix_error = "LineageConsistencyError" if any(
    "LineageConsistencyError" in text and "two versions of ref inter/dag/fare" in text
    for text in refusals) else "other"
print(own.success, contest.success, mix.success, mix_error, flush=True)
"""
)


def _dagster_home(folder: Path, server: Any, database: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "dagster.yaml").write_text(
        server.dagster_yaml(database, "DWS_TEST_DAGSTER_PG_PASSWORD")
    )
    return folder


@pytest.mark.spark
def test_dagster_runs_on_machines_without_a_shared_folder_then_a_sensor_on_a_fourth(
    spark, tmp_path, postgres_store, postgres_server, monkeypatch
):
    from dagster import DagsterInstance, materialize

    from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource, process_events
    from dws_dagster.ol.transport.factory import make_transport
    from tests.ol.ol_receiver import Receiver

    monkeypatch.setenv("DWS_TEST_DAGSTER_PG_PASSWORD", postgres_server.password)
    dagster_db = postgres_server.create_database("fleet_dagster")
    seed, common = _seed(tmp_path)
    trips_csv = common / "src" / "trips" / "part-0.csv"
    trips_csv.write_text("zone,fare\n" + "".join(f"{i % 3},{5 + i}\n" for i in range(30)))
    machines = tmp_path / "machines"
    # Before the workers, on a machine of its own: fare, fare_stats from it, then new trips
    # and fare again. Reading fare with fare_stats now mixes two versions of fare.
    shared: dict[str, Any] = {}
    exec(SHARED_ASSETS, shared)  # the workers' own asset code, run here too
    setup_root = _machine(seed, machines, 0)
    io_manager = SparkWorkspaceIOManager(workspace=WorkspaceResource(root=str(setup_root)))
    chain = [shared["trips"], shared["fare"], shared["fare_stats"]]
    with DagsterInstance.ephemeral() as setup_instance:
        materialize(chain, instance=setup_instance, resources={"io_manager": io_manager})
        trips_csv.write_text(trips_csv.read_text() + "0,99\n")
        materialize(
            chain, instance=setup_instance, resources={"io_manager": io_manager}, selection=["fare"]
        )
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    workers = []
    for number in range(1, MACHINES + 1):
        root = _machine(seed, machines, number)
        home = _dagster_home(tmp_path / f"dagster-home-{number}", postgres_server, dagster_db)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(home)}
        workers.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    DAGSTER_WORKER,
                    str(root),
                    str(number),
                    str(barrier),
                    str(MACHINES),
                ],
                cwd=root,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=900)
        assert worker.returncode == 0, err[-3000:]
        results.append(out.split())
    assert [own for own, *_ in results] == ["True"] * MACHINES
    assert sorted(contest for _, contest, *_ in results) == ["False"] * (MACHINES - 1) + ["True"]
    winner = 1 + [contest for _, contest, *_ in results].index("True")
    assert [(mixed, error) for *_, mixed, error in results] == [
        ("False", "LineageConsistencyError")
    ] * MACHINES
    assert not list(machines.glob("machine-*/mixer-*-body-ran"))  # refused before the body
    assert not any(
        (common / "inter" / "dag" / f"m{n}" / "mixed").exists() for n in range(1, MACHINES + 1)
    )

    # The lineage sensor on a fourth machine: its own workspace copy, the same instance.
    sensor_root = _machine(seed, machines, 4)
    sensor_home = _dagster_home(tmp_path / "dagster-home-4", postgres_server, dagster_db)
    with Receiver() as receiver:
        monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
        ws = Workspace.open(sensor_root)
        instance = DagsterInstance.from_config(str(sensor_home))
        try:
            outcome = process_events(instance, ws, after_storage_id=0)
            assert outcome.cursor > 0
            again = process_events(instance, ws, after_storage_id=0)  # a replay: nothing new
        finally:
            instance.dispose()
        transport, _ = make_transport(ws)
        from dws_dagster.ol.outbox.durable import Outbox

        Outbox(ws).deliver(transport, budget_seconds=60)
        keys = [(e["run"]["runId"], e["eventType"]) for e in receiver.events]
    assert again.spooled == 0
    assert len(keys) == len(set(keys)) and keys, "each event delivered once"
    lineage = dict(ws.store.items())
    for number in range(1, MACHINES + 1):
        assert lineage[f"inter/dag/m{number}/by_zone"].status == "ok"
    assert lineage["inter/dag/contested"].owner == f"contender_{winner}"
    assert not any(
        name.startswith("contested") and name != "contested"
        for name in os.listdir(common / "inter" / "dag")
    )
    completes = {e["job"]["name"] for e in receiver.events if e["eventType"] == "COMPLETE"}
    assert {asset_job_name(f"by_zone_{n}") for n in range(1, MACHINES + 1)} | {
        asset_job_name(f"contender_{winner}")
    } <= completes


def test_the_deployment_guide_says_which_files_of_the_workspace_folder_each_machine_keeps(
    tmp_path,
) -> None:
    """docs/deployment.md says one thing: the store's database and the data are shared, the
    `.dataworkspace/` folder is not; its opening names every entry a working workspace's
    folder holds (the definition kept in git, or what is the machine's own)."""
    from dws_dagster.snapshots.take import take_snapshot

    guide = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    assert not re.search(r"must (?:stay )?shared:? the workspace's `\.dataworkspace/`", guide)
    opening = guide.split("\n\n")[1]
    assert "`.dataworkspace/` folder\nitself is not shared" in opening, opening
    ws = Workspace.init(tmp_path / "w")
    ws.add_resource("src", "source-data", path="data/src")
    (ws.root / "data/src").mkdir(parents=True, exist_ok=True)
    (ws.root / "data/src/a.csv").write_text("a\n1\n")
    take_snapshot(ws, "s1")
    entries = {p.name.removesuffix("-wal").removesuffix("-shm") for p in ws.meta_dir.iterdir()}
    assert {"config.json", "resources.json", "store.db", "objects"} <= entries
    # `cache/` is made once a snapshot has file hashes to keep (files older than a few seconds).
    for name in entries | {"cache", "openlineage", "replays", "restore-in-progress.json"}:
        assert f"`{name}" in opening, f"{name} under .dataworkspace/ is not in {opening!r}"
