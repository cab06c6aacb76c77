"""The OpenLineage outbox and transport: a real store (SQLite, and PostgreSQL on a throwaway
server), a real HTTP receiver, real processes (concurrent deliverers, one killed with -9)."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select, update

from dws_dagster import Workspace
from dws_dagster._compat.openlineage import transport_types
from dws_dagster.errors import DwsError, OutboxError, TransportConfigError
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.outbox.event_rows import event_key
from dws_dagster.ol.transport.factory import make_transport
from dws_dagster.store import schema
from tests.conftest import ROOT
from tests.ol.ol_receiver import Receiver

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
SECRET_PASSWORD = "Pa55-w0rd-xyzzy"
SECRET_KEY = "key-SECRET-4242-abcd"

pytestmark = pytest.mark.both_stores


def run_event(
    run_id: str, event_type: str, minutes: float = 0, job: str = "hourly"
) -> dict[str, Any]:
    """A minimal OpenLineage RunEvent as the event builders produce it (plain JSON data)."""
    return {
        "eventTime": (T0 + dt.timedelta(minutes=minutes)).isoformat(),
        "eventType": event_type,
        "producer": "https://example.com/dws-dagster/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id, "facets": {}},
        "job": {"namespace": "dws-tests", "name": job, "facets": {}},
        "inputs": [{"namespace": "file", "name": f"/data/{job}/in", "facets": {}}],
        "outputs": [{"namespace": "file", "name": f"/data/{job}/out", "facets": {}}],
    }


def runs(count: int, start: float = 0) -> list[dict[str, Any]]:
    """START/COMPLETE of `count` runs, interleaved the way overlapping runs report."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    events = [run_event(i, "START", start + n, job=f"job{n}") for n, i in enumerate(ids)]
    events += [
        run_event(i, "COMPLETE", start + count + n, job=f"job{n}") for n, i in enumerate(ids)
    ]
    return events


def keys(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [event_key(event) for event in events]


def delivery_row(ws: Workspace) -> dict[str, Any]:
    """The workspace's raw `dws_ol_delivery` row (what a secret must never reach)."""
    table = schema.ol_delivery
    with ws.store.db.transaction() as connection:
        row = (
            connection.execute(select(table).where(table.c.workspace_id == ws.store.workspace_id))
            .mappings()
            .one()
        )
    return dict(row)


def set_lease(ws: Workspace, holder: str | None, until: float) -> None:
    """Write the delivery lease as another deliverer (one that runs, or one that died) left it."""
    table = schema.ol_delivery
    with ws.store.db.transaction() as connection:
        connection.execute(
            update(table)
            .where(table.c.workspace_id == ws.store.workspace_id)
            .values(holder=holder, lease_until=until)
        )


def pending_ids(ws: Workspace) -> list[int]:
    table = schema.ol_events
    with ws.store.db.transaction() as connection:
        return list(
            connection.execute(
                select(table.c.id)
                .where(table.c.workspace_id == ws.store.workspace_id, table.c.pending)
                .order_by(table.c.id)
            ).scalars()
        )


@pytest.fixture(autouse=True)
def on_both_stores(store_backend: str) -> str:
    """Every test on the default SQLite store, and again on PostgreSQL (conftest's
    `both_stores`: DWS_STORE_URL, which subprocesses inherit, and a fresh schema)."""
    return store_backend


@pytest.fixture(autouse=True)
def no_openlineage_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenLineage configuration from the machine running the tests."""
    for key in list(os.environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "cwd")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver on a known port, not started: connections are refused until `start()`."""
    catalog = Receiver()
    yield catalog
    catalog.stop()


# ---------------------------------------------------------------------- delivery


def test_spool_and_deliver_over_http(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.start()
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    transport, description = make_transport(ws)
    assert transport.kind == "http"
    assert f"{receiver.url}/api/v1/lineage" in description and "OPENLINEAGE_URL" in description
    assert "no client retries" in description

    events = runs(3)
    outbox = Outbox(ws)
    assert outbox.spool(events) == 6
    assert outbox.status().pending == 6
    assert outbox.status().oldest_pending_time == events[0]["eventTime"]

    report = outbox.deliver(transport, budget_seconds=60)
    assert (report.sent, report.failed, report.pending) == (6, 0, 0)
    assert receiver.events == events  # exactly as spooled, in order
    status = outbox.status()
    assert (status.pending, status.delivered, status.attempts) == (0, 6, 0)
    assert status.oldest_pending_time is None and status.last_delivery_at is not None

    again = outbox.deliver(transport, budget_seconds=60)
    assert again.sent == 0 and receiver.attempts == 6


def test_catalog_down_then_failing_then_back_loses_nothing(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)  # not started: connection refused
    transport, _ = make_transport(ws)
    outbox = Outbox(ws, rng=random.Random(7))
    first, second = runs(3), runs(2, start=100)
    assert outbox.spool(first) == 6

    # Down: each call makes one attempt, records it, and backs off.
    now = T0
    report = outbox.deliver(transport, now=now)
    assert (report.sent, report.failed, report.pending, report.attempts) == (0, 1, 6, 1)
    assert report.next_attempt_at is not None and report.next_attempt_at > now
    assert "Connection refused" in (report.last_error or "")
    assert report.last_error.startswith(f"sending run {first[0]['run']['runId']} START")

    early = outbox.deliver(transport, now=now + dt.timedelta(milliseconds=100))
    assert (early.sent, early.failed, early.attempts) == (0, 0, 1)  # waiting: no attempt

    now = report.next_attempt_at
    report = outbox.deliver(transport, now=now)
    assert (report.failed, report.attempts) == (1, 2)

    # Up, but answering 500 (then hanging up): one request per call, no client retries.
    receiver.start()
    receiver.fail_next(2)
    assert outbox.spool(second) == 4  # spooling goes on while delivery fails
    for attempts in (1, 2):
        now = report.next_attempt_at
        report = outbox.deliver(transport, now=now)
        assert report.failed == 1 and report.sent == 0 and receiver.attempts == attempts
        assert "500" in (report.last_error or "")
    receiver.fail_next(1, status=0)
    now = report.next_attempt_at
    report = outbox.deliver(transport, now=now)
    assert report.failed == 1 and receiver.attempts == 3 and report.attempts == 5

    # Two accepted, then one the catalog stored but answered 500 for: sent again later.
    receiver.fail_next(1, after=2, record=True)
    now = report.next_attempt_at
    report = outbox.deliver(transport, now=now)
    assert (report.sent, report.failed, report.pending) == (2, 1, 8)
    assert receiver.attempts == 6

    now = report.next_attempt_at
    report = outbox.deliver(transport, now=now)
    assert (report.sent, report.failed, report.pending, report.attempts) == (8, 0, 0, 0)
    assert report.next_attempt_at is None and report.last_error is None

    spooled = first + second
    received = receiver.events
    assert len(received) == len(spooled) + 1  # the one at-least-once duplicate
    unique: dict[tuple[str, str], dict[str, Any]] = {}
    for event in received:
        assert unique.setdefault(event_key(event), event) == event  # duplicates are identical
    assert list(unique) == keys(spooled) and list(unique.values()) == spooled
    for run_id in {event["run"]["runId"] for event in spooled}:
        order = [e["eventType"] for e in received if e["run"]["runId"] == run_id]
        assert order[0] == "START" and order[-1] == "COMPLETE"
        assert order.index("COMPLETE") > order.index("START")
    status = outbox.status()
    assert (status.pending, status.delivered, status.attempts) == (0, 10, 0)
    assert "500" in (status.last_error or "")  # the last problem stays visible


def test_backoff_doubles_up_to_the_cap_with_jitter(ws: Workspace) -> None:
    outbox = Outbox(ws, backoff_base=1.0, backoff_cap=8.0, rng=random.Random(3))
    for attempts in range(1, 9):
        ceiling = min(8.0, 2.0 ** (attempts - 1))
        delay = outbox.backoff(attempts)
        assert ceiling / 2 <= delay <= ceiling
    assert outbox.backoff(10_000) <= 8.0


def test_deliver_stays_within_its_budget_and_one_deliverer_at_a_time(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    receiver.start()
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    transport, _ = make_transport(ws)
    outbox = Outbox(ws)
    outbox.spool(runs(2))
    report = outbox.deliver(transport, budget_seconds=0)
    assert (report.sent, report.failed, report.pending) == (0, 0, 4) and receiver.attempts == 0
    assert delivery_row(ws)["holder"] is None  # the lease is given back after each call

    set_lease(ws, "elsewhere:42:abcd", time.time() + 600)  # another process delivering
    busy = Outbox(ws).deliver(transport, ignore_backoff=True)
    assert busy.busy and (busy.sent, busy.pending) == (0, 4) and receiver.attempts == 0
    assert outbox.status().deliverer == "elsewhere:42:abcd"
    assert outbox.status().to_json()["lease_until"] is not None
    code, out, _ = cli("openlineage", "status", "-w", ws.root)
    assert code == 0 and "delivering: elsewhere:42:abcd (lease until " in out
    code, out, _ = cli("openlineage", "deliver", "-w", ws.root)
    assert code == 0 and "another process is delivering now; 4 event(s) pending" in out

    set_lease(ws, "elsewhere:42:abcd", time.time() - 1)  # it died: its lease ran out
    assert outbox.status().deliverer is None
    assert outbox.deliver(transport).sent == 4 and receiver.events == list(outbox.events())
    assert delivery_row(ws)["holder"] is None


def test_deliver_refuses_to_run_inside_a_store_transaction(ws: Workspace) -> None:
    """Delivery must not hold a transaction (and the write lock) while a catalog answers."""
    outbox = Outbox(ws)
    outbox.spool(runs(1))
    transport, _ = make_transport(ws)
    with ws.store.locked(), pytest.raises(OutboxError, match="inside a transaction"):
        outbox.deliver(transport)
    assert outbox.status().pending == 2


# ---------------------------------------------------------------------- spooling


def test_spool_is_idempotent(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = runs(2)
    outbox = Outbox(ws)
    assert outbox.spool(events) == 4
    assert outbox.spool(events) == 0
    assert Outbox(ws).spool(events) == 0  # another object (or process) reads the same keys
    extra = run_event(str(uuid.uuid4()), "START")
    assert outbox.spool([extra, extra, *events]) == 1
    assert outbox.count() == 5 and list(outbox.events()) == [*events, extra]

    receiver.start()
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    outbox.deliver(make_transport(ws)[0])
    assert Outbox(ws).spool([*events, extra]) == 0  # delivered events count too
    assert outbox.status().delivered == 5 and len(receiver.events) == 5

    bad = {"eventType": "START", "eventTime": "2026-03-01T00:00:00Z", "run": {}}
    new = run_event(str(uuid.uuid4()), "START")
    with pytest.raises(OutboxError, match=r"event #1 .*run\.runId"):
        outbox.spool([new, bad])
    with pytest.raises(OutboxError, match="eventTime"):
        outbox.spool([{**new, "eventTime": "last tuesday"}])
    with pytest.raises(OutboxError, match="eventType"):
        outbox.spool([{**new, "eventType": "X" * 17}])
    with pytest.raises(OutboxError, match="not an OpenLineage RunEvent"):
        outbox.spool([new, "START"])  # type: ignore[list-item]
    with pytest.raises(OutboxError, match="not JSON"):
        outbox.spool([{**new, "extra": {1, 2}}])
    assert outbox.count() == 5 and outbox.status().pending == 0  # all or nothing


def test_spool_in_a_transaction_commits_or_rolls_back_with_it(ws: Workspace) -> None:
    """The sensor spools a batch's events in the transaction holding its lineage: both are
    committed, or neither."""
    outbox = Outbox(ws)
    kept, lost = runs(1), runs(1, start=10)

    class Crash(Exception):
        pass

    with pytest.raises(Crash), ws.store.locked():
        assert outbox.spool(lost) == 2
        ws.store.observe_source("src/a.csv", "v1")
        raise Crash
    assert outbox.count() == 0 and ws.store.get("src/a.csv") is None

    with ws.store.locked():
        assert outbox.spool(kept) == 2
        ws.store.observe_source("src/a.csv", "v1")
    assert list(outbox.events()) == kept and ws.store.get("src/a.csv") is not None
    assert outbox.spool(kept + lost) == 2  # the rolled-back events were never spooled


def test_events_since_compares_instants_in_any_zone(ws: Workspace) -> None:
    outbox = Outbox(ws)
    zone = dt.timezone(dt.timedelta(hours=-5))
    early = run_event(str(uuid.uuid4()), "START", 0)
    late = {
        **run_event(str(uuid.uuid4()), "START", 0),
        "eventTime": (T0 + dt.timedelta(minutes=30)).astimezone(zone).isoformat(),
    }
    naive = {
        **run_event(str(uuid.uuid4()), "START", 0),
        "eventTime": (T0 + dt.timedelta(minutes=10)).replace(tzinfo=None).isoformat(),
    }
    assert outbox.spool([late, early, naive]) == 3
    assert list(outbox.events()) == [late, early, naive]  # spool order, as spooled
    assert list(outbox.events(T0 + dt.timedelta(minutes=5))) == [late, naive]
    assert outbox.count(T0 + dt.timedelta(minutes=10)) == 2  # at or after
    assert list(outbox.events((T0 + dt.timedelta(minutes=20)).replace(tzinfo=None))) == [late]
    assert outbox.count(T0 + dt.timedelta(days=1)) == 0


SPOOLER = """
import sys, uuid
from dws_dagster import Workspace
from dws_dagster.ol.outbox.durable import Outbox

root, tag = sys.argv[1], sys.argv[2]
outbox = Outbox(Workspace.open(root))

def event(run_id, kind, n):
    return {"eventTime": f"2026-03-01T12:{n % 60:02d}:00+00:00", "eventType": kind,
            "producer": "https://example.com/tests", "schemaURL": "https://openlineage.io/x",
            "run": {"runId": run_id}, "job": {"namespace": "t", "name": f"job{n}"},
            "inputs": [], "outputs": []}

shared = [str(uuid.UUID(int=n + 1)) for n in range(40)]
for n in range(120):
    mine = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{tag}/{n}"))
    outbox.spool([event(mine, "START", n), event(shared[n % 40], "START", n)])
    outbox.spool([event(mine, "COMPLETE", n)])
print("ok")
"""


def _child_env() -> dict[str, str]:
    """The environment of a child process: this checkout first on the path, the same store
    (DWS_STORE_URL when set), no OpenLineage configuration."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENLINEAGE")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_processes_spooling_and_delivering_at_once_lose_nothing(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.start()
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    transport, _ = make_transport(ws)
    spoolers = [
        subprocess.Popen(
            [sys.executable, "-c", SPOOLER, str(ws.root), tag],
            env=_child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    outbox = Outbox(ws)
    while any(proc.poll() is None for proc in spoolers):
        outbox.deliver(transport)  # delivering while the others spool
        time.sleep(0.01)
    for proc in spoolers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    outbox.deliver(transport)

    archived = list(outbox.events())
    assert len(archived) == 2 * 120 * 2 + 40  # own START+COMPLETE per process, shared STARTs
    assert len(set(keys(archived))) == len(archived)
    assert receiver.events == archived  # each exactly once, in spool order
    status = outbox.status()
    assert (status.pending, status.delivered) == (0, len(archived))


DELIVERER = """
import sys, time
from pathlib import Path
from dws_dagster import Workspace
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.transport.factory import make_transport

root, go, lease = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
ws = Workspace.open(root)
outbox = Outbox(ws, lease_seconds=lease)
transport, _ = make_transport(ws)
outbox.status()  # connected: ready
print("ready", flush=True)
while not go.exists():
    time.sleep(0.005)
sent = busy = 0
while True:
    report = outbox.deliver(transport, budget_seconds=0.05)
    sent += report.sent
    busy += report.busy
    if report.failed:
        raise SystemExit(f"delivery failed: {report.last_error}")
    if not report.busy and report.pending == 0:
        break
print(f"sent {sent} busy {busy}", flush=True)
"""


def test_two_deliverers_in_two_processes_send_each_event_once_in_order(
    ws: Workspace, receiver: Receiver, tmp_path: Path
) -> None:
    """Two sensors (two processes; on PostgreSQL they could be two machines) delivering one
    backlog at once, in short turns (a budget of 50 ms a call): the lease lets one send at a
    time, and every event reaches the catalog exactly once, in spool order."""
    receiver.start()
    events = runs(150)
    outbox = Outbox(ws)
    assert outbox.spool(events) == 300
    go = tmp_path / "go"
    env = {**_child_env(), "OPENLINEAGE_URL": receiver.url}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", DELIVERER, str(ws.root), str(go), "60"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready", (
                child.communicate()[1]
            )
        go.touch()
        outputs = [child.communicate(timeout=300) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    sent = [int(out.split()[1]) for out, _ in outputs]
    assert sum(sent) == 300
    assert receiver.events == events  # exactly once each, in spool order
    status = outbox.status()
    assert (status.pending, status.delivered, status.deliverer) == (0, 300, None)


KILLED_DELIVERER = """
import sys
from dws_dagster import Workspace
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.transport.factory import make_transport

root, lease = sys.argv[1], float(sys.argv[2])
ws = Workspace.open(root)
transport, _ = make_transport(ws)
Outbox(ws, lease_seconds=lease).deliver(transport, budget_seconds=600)
print("finished")  # the test kills it before: reaching here fails the test
"""


def _wait_until(condition: Any, what: str, deadline_seconds: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_seconds
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def test_deliverer_killed_mid_delivery_is_replaced_when_its_lease_expires(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 of a deliverer while it sends: its lease keeps others out until it expires
    (it can no longer renew it), then the next deliverer resends what was not marked
    delivered, from the first such event, in order; nothing is lost."""
    receiver.start()
    events = runs(40)
    outbox = Outbox(ws, lease_seconds=3.0)
    assert outbox.spool(events) == 80
    receiver.slow_next(80, seconds=0.05)  # each request 50 ms: a checkpoint every ~20
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    transport, _ = make_transport(ws)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_DELIVERER, str(ws.root), "3"],
        env={**_child_env(), "OPENLINEAGE_URL": receiver.url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # Killed once some events are marked delivered and more were sent since.
        _wait_until(
            lambda: (
                child.poll() is not None
                or (
                    outbox.status().delivered > 0
                    and receiver.attempts > outbox.status().delivered + 2
                )
            ),
            "the deliverer marked events and went on sending",
        )
        assert child.poll() is None, child.communicate()[1]
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    marked = outbox.status().delivered
    lease = delivery_row(ws)
    assert lease["holder"] is not None and lease["holder"].split(":")[1] == str(child.pid)
    assert 0 < marked < 80 and pending_ids(ws)

    receiver.slow_next(0, seconds=0)
    before = time.time()
    first = outbox.deliver(transport)
    after = time.time()
    if after < lease["lease_until"]:  # called while the dead deliverer's lease still held
        assert first.busy and first.sent == 0
    if before > lease["lease_until"]:
        assert not first.busy
    _wait_until(lambda: outbox.deliver(transport).pending == 0, "the lease expired")

    status = outbox.status()
    assert (status.pending, status.delivered, status.deliverer) == (0, 80, None)
    received = receiver.events
    # What the dead deliverer sent (at least the marked events), then everything from the
    # first event it had not marked: a suffix resent, nothing skipped, nothing reordered.
    sent_before = len(received) - (80 - marked)
    assert sent_before >= marked
    assert received[:sent_before] == events[:sent_before]
    assert received[sent_before:] == events[marked:]


def test_an_unreachable_store_is_a_clear_error_without_its_password(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "DWS_STORE_URL", f"postgresql+psycopg2://alice:{SECRET_PASSWORD}@127.0.0.1:1/lineage"
    )
    outbox = Outbox(Workspace.open(ws.root))
    for call in (outbox.status, lambda: outbox.spool(runs(1)), lambda: list(outbox.events())):
        with pytest.raises(DwsError) as caught:
            call()
        message = str(caught.value)
        assert "127.0.0.1:1/lineage" in message and SECRET_PASSWORD not in message


# ---------------------------------------------------------------------- configuration


def test_without_configuration_events_go_to_a_file(ws: Workspace) -> None:
    transport, description = make_transport(ws)
    path = ws.meta_dir / "openlineage" / "events.jsonl"
    assert transport.kind == "file"
    assert str(path) in description and "no OpenLineage configuration" in description
    outbox = Outbox(ws)
    first, second = runs(1), runs(1, start=10)
    outbox.spool(first)
    assert outbox.deliver(transport).sent == 2
    outbox.spool(second)
    assert outbox.deliver(transport).sent == 2
    assert [json.loads(line) for line in path.read_text().splitlines()] == first + second


def _write_config(path: Path, transport: dict[str, Any]) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"transport": transport}))
    return path


def test_config_files_workspace_before_home_after_cwd(
    ws: Workspace, receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.start()
    home = _write_config(
        tmp_path / "home/.openlineage/openlineage.yml",
        {"type": "file", "log_file_path": str(tmp_path / "home.jsonl")},
    )
    assert str(home) in make_transport(ws)[1]
    ours = _write_config(ws.root / "openlineage.yml", {"type": "http", "url": receiver.url})
    transport, description = make_transport(ws)
    assert transport.kind == "http" and str(ours) in description
    assert "OPENLINEAGE_CONFIG" not in os.environ  # handed to the client only while it resolves
    assert transport.config.retry["total"] == 0  # no `retry` configured: none
    outbox = Outbox(ws)
    outbox.spool(runs(1))
    assert outbox.deliver(transport).sent == 2 and len(receiver.events) == 2

    cwd = _write_config(
        Path.cwd() / "openlineage.yml", {"type": "http", "url": receiver.url, "retry": {"total": 3}}
    )
    transport, description = make_transport(ws)
    assert str(cwd) in description and "client retries: 3" in description
    assert transport.config.retry["total"] == 3  # configured retries are kept

    explicit = _write_config(
        tmp_path / "elsewhere.yml", {"type": "file", "log_file_path": str(tmp_path / "x.jsonl")}
    )
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(explicit))
    assert str(explicit) in make_transport(ws)[1]
    assert os.environ["OPENLINEAGE_CONFIG"] == str(explicit)
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "missing.yml"))
    with pytest.raises(TransportConfigError, match="OPENLINEAGE_CONFIG"):
        make_transport(ws)


def test_environment_variables_and_bad_configuration(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", receiver.url)
    transport, description = make_transport(ws)
    assert transport.kind == "http" and "OPENLINEAGE__ variables" in description
    assert transport.config.retry["total"] == 0

    monkeypatch.delenv("OPENLINEAGE__TRANSPORT__URL")
    with pytest.raises(TransportConfigError, match="url"):
        make_transport(ws)
    monkeypatch.delenv("OPENLINEAGE__TRANSPORT__TYPE")
    (ws.root / "openlineage.yml").write_text("transport: [unclosed\n")
    with pytest.raises(TransportConfigError, match="openlineage.yml"):
        make_transport(ws)
    _write_config(ws.root / "openlineage.yml", {"type": "http"})
    with pytest.raises(TransportConfigError, match=r"openlineage\.yml\) is invalid.*url"):
        make_transport(ws)


def test_two_catalogs_each_get_every_event(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's composite transport succeeds when any catalog takes the event; the outbox
    makes it fail when one does not, so the catalog that was down gets the event later."""
    with Receiver() as marquez:
        datahub = Receiver()  # down
        monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "composite")
        for name, catalog in (("MARQUEZ", marquez), ("DATAHUB", datahub)):
            monkeypatch.setenv(f"OPENLINEAGE__TRANSPORT__TRANSPORTS__{name}__TYPE", "http")
            monkeypatch.setenv(f"OPENLINEAGE__TRANSPORT__TRANSPORTS__{name}__URL", catalog.url)
        transport, description = make_transport(ws)
        assert transport.kind == "composite" and "stops at the first failing" in description
        assert marquez.url in description and datahub.url in description
        outbox = Outbox(ws)
        events = runs(2)
        outbox.spool(events)
        report = outbox.deliver(transport, now=T0)
        assert report.failed == 1 and report.pending == 4
        with datahub:
            report = outbox.deliver(transport, now=report.next_attempt_at)
            assert (report.sent, report.pending) == (4, 0)
            assert datahub.events == events
        assert [e for e in marquez.events if e != events[0]] == events[1:]  # + re-sent first


def test_disabled_keeps_events_pending(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    receiver.start()
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    transport, description = make_transport(ws)
    assert transport.kind == "noop" and "OPENLINEAGE_DISABLED" in description
    outbox = Outbox(ws)
    outbox.spool(runs(1))
    report = outbox.deliver(transport)
    assert report.paused and (report.sent, report.pending) == (0, 2)
    with pytest.raises(OutboxError, match="disabled"):
        outbox.replay(transport)
    code, out, _ = cli("openlineage", "deliver", "-w", ws.root)
    assert code == 0 and "disabled" in out

    monkeypatch.delenv("OPENLINEAGE_DISABLED")
    assert outbox.deliver(make_transport(ws)[0]).sent == 2
    assert receiver.events == list(outbox.events())


def test_secrets_never_reach_status_or_stored_errors(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    receiver.start()
    receiver.fail_next(1)
    url = receiver.url.replace("http://", f"http://alice:{SECRET_PASSWORD}@")
    monkeypatch.setenv("OPENLINEAGE_URL", url)
    monkeypatch.setenv("OPENLINEAGE_API_KEY", SECRET_KEY)
    transport, description = make_transport(ws)
    assert not [k for k in os.environ if k.startswith("OPENLINEAGE__")]  # client's aliases undone
    outbox = Outbox(ws)
    outbox.spool(runs(1))
    report = outbox.deliver(transport)  # 500: the client's error names the URL with user-info
    assert report.failed == 1 and "500" in (report.last_error or "")
    assert receiver.requests[0]["headers"].get("Authorization")  # credentials were sent
    receiver.stop()
    outbox.deliver(transport, ignore_backoff=True)  # refused

    outputs = [description, report.last_error or "", str(delivery_row(ws)), str(outbox.status())]
    for args in (
        ("openlineage", "status"),
        ("openlineage", "status", "--format", "json"),
        ("openlineage", "deliver", "--format", "json"),
        ("openlineage", "deliver"),
    ):
        code, out, err = cli(*args, "-w", ws.root)
        outputs += [out, err]
    text = "\n".join(outputs)
    assert "Connection refused" in text and "127.0.0.1" in text
    for secret in (SECRET_PASSWORD, SECRET_KEY, "alice:", "alice@"):
        assert secret not in text


# ---------------------------------------------------------------------- archive and CLI


def test_cli_status_deliver_and_replay(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    receiver.start()
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    events = [
        run_event(str(uuid.uuid4()), kind, day * 24 * 60 + n)
        for day in range(3)
        for n, kind in enumerate(("START", "COMPLETE"))
    ]
    for index in range(0, 6, 2):  # each day's START and COMPLETE share a run
        events[index + 1]["run"] = events[index]["run"]
    Outbox(ws).spool(events)

    code, out, _ = cli("openlineage", "status", "-w", ws.root)
    assert code == 0 and "pending:    6" in out and receiver.url in out
    assert f"OpenLineage outbox (in the workspace store {ws.store.shown})" in out
    assert "delivering:" not in out
    code, out, _ = cli("openlineage", "status", "--format", "json", "-w", ws.root)
    data = json.loads(out)
    assert (data["pending"], data["delivered"]) == (6, 0) and receiver.url in data["transport"]
    assert data["store"] == ws.store.shown and data["deliverer"] is None
    password = ws.store_settings.password
    assert password is None or password not in out  # the store is shown without it
    assert data["oldest_pending_time"] == events[0]["eventTime"]

    code, out, _ = cli("openlineage", "deliver", "-w", ws.root, "--budget", "60")
    assert code == 0 and "sent 6 event(s)" in out
    assert receiver.events == events

    code, out, _ = cli("openlineage", "replay", "--since", "2026-03-02", "--dry-run", "-w", ws.root)
    assert code == 0 and "would replay 4" in out and receiver.attempts == 6
    code, out, _ = cli("openlineage", "replay", "--since", "2026-03-02", "-w", ws.root)
    assert code == 0 and "replayed 4" in out
    assert receiver.events[6:] == events[2:]
    since = dt.datetime(2026, 3, 3, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert list(Outbox(ws).events(since)) == events[4:]  # zones are compared as instants
    code, out, _ = cli("openlineage", "replay", "-w", ws.root)
    assert code == 0 and "replayed 6" in out and receiver.events[10:] == events
    assert Outbox(ws).status().delivered == 6  # the delivery position is untouched

    code, _, err = cli("openlineage", "replay", "--since", "last week", "-w", ws.root)
    assert code == 1 and "--since" in err and "ISO-8601" in err

    receiver.stop()
    Outbox(ws).spool(runs(1, start=5000))
    code, out, _ = cli("openlineage", "deliver", "-w", ws.root)
    assert code == 1 and "Connection refused" in out and "2 pending" in out
    code, out, _ = cli("openlineage", "status", "-w", ws.root)
    assert "failing:    1 attempt(s)" in out and "last error:" in out
    code, _, err = cli("openlineage", "replay", "--since", "2026-03-03", "-w", ws.root)
    assert code == 1 and "replay stopped after 0 event(s)" in err
    assert "--since 2026-03-03T12:00:00+00:00" in err


def test_file_delivery_writes_the_events_the_clients_file_transport_writes(tmp_path: Path) -> None:
    """The outbox appends a spooled line as it is when it has nothing for the client's
    null-removal pass to remove: the file holds, line for line, the JSON the client's file
    transport writes (in compact form), also around events that do hold nulls, empty objects
    in lists, or the word null in a string, which go through the client."""
    from openlineage.client.transport.file import FileConfig, FileTransport

    from dws_dagster.ol.transport.emitter import Emitter, emit

    plain = run_event(str(uuid.uuid4()), "COMPLETE")
    plain["run"]["facets"] = {"tags": {"tags": [{"key": "k", "value": "é ✓"}], "n": 1.5}}
    nulls = {**run_event(str(uuid.uuid4()), "START"), "inputs": None}
    empties = {**run_event(str(uuid.uuid4()), "START"), "outputs": [{}, {"name": "x"}]}
    worded = {
        **run_event(str(uuid.uuid4()), "START"),
        "job": {"namespace": "null", "name": "a,{}b"},
    }
    events = [plain, nulls, empties, worded]
    lines = [orjson.dumps(event, option=orjson.OPT_SORT_KEYS) + b"\n" for event in events]
    ours = FileTransport(FileConfig(log_file_path=str(tmp_path / "ours.jsonl"), append=True))
    theirs = FileTransport(FileConfig(log_file_path=str(tmp_path / "theirs.jsonl"), append=True))
    for line in lines:
        emit(ours, orjson.loads(line), line)
        theirs.emit(orjson.loads(line))
    # A delivery keeps the file open across events, those it writes itself and those it leaves
    # to the client (nulls, empty objects) interleaved: the same events, in the same order.
    batch = FileTransport(FileConfig(log_file_path=str(tmp_path / "batch.jsonl"), append=True))
    with Emitter(batch) as emitter:
        for line in lines:
            emitter.emit(orjson.loads(line), line)
    client = (tmp_path / "theirs.jsonl").read_bytes().splitlines(keepends=True)
    for name in ("ours.jsonl", "batch.jsonl"):
        written = (tmp_path / name).read_bytes().splitlines(keepends=True)
        assert [json.loads(line) for line in written] == [json.loads(line) for line in client]
        # the events with nothing to remove are their spooled lines; the others the client's
        assert written == [lines[0], client[1], client[2], client[3]]
    assert "inputs" not in json.loads(client[1])


def test_an_unknown_transport_type_is_one_line_and_nothing_else(
    ws: Workspace, tmp_path: Path
) -> None:
    """`type: zzcarrierpigeon`, in openlineage.yml or `OPENLINEAGE__TRANSPORT__TYPE`: `deliver`
    fails with one line naming the type and the ones there are, and `status` shows it as
    the transport; nothing else reaches stderr (the client logs its failed import, which
    Python's last-resort handler would print). Real processes: no test logging in between."""
    events_file = ws.meta_dir / "openlineage" / "events.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env["PYTHONPATH"] = str(ROOT)
    config = ws.root / "openlineage.yml"
    for source in ("file", "variable"):
        run_env = dict(env)
        if source == "file":
            config.write_text("transport:\n  type: zzcarrierpigeon\n")
            where = str(config)
        else:
            config.unlink()
            run_env["OPENLINEAGE__TRANSPORT__TYPE"] = "zzcarrierpigeon"
            where = "OPENLINEAGE__ variables"
        refusal = (
            f"the OpenLineage transport configuration ({where}) names the transport type "
            "'zzcarrierpigeon', which the OpenLineage client does not have; use one of "
        )
        advice = (
            ", or the import path of a Transport class (module.Class); or remove the "
            f"configuration to write events to {events_file}"
        )

        def run(*args: str, env: dict[str, str] = run_env) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "dws_dagster.cli", "openlineage", *args, "-w", ws.root],
                env=env,
                cwd=tmp_path / "cwd",
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )

        deliver = run("deliver")
        assert (deliver.returncode, deliver.stdout) == (1, ""), deliver
        types = ", ".join(transport_types())
        assert deliver.stderr == f"error: {refusal}{types}{advice}\n"
        assert "http, kafka" in types
        status = run("status")
        assert (status.returncode, status.stderr) == (0, ""), status
        assert f"  transport:  not usable: {refusal}{types}{advice}\n" in status.stdout
    assert not events_file.parent.exists()


def test_commands_that_only_read_the_outbox_create_nothing(
    ws: Workspace, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """`openlineage status` (text and JSON) and `replay --dry-run`, with events pending and
    none delivered, under the default transport (a file never written yet) and an HTTP one:
    every file, row and folder of the workspace is as it was — no empty
    `.dataworkspace/openlineage/` for the default file."""
    from tests.support.store_db import workspace_state

    def tree() -> tuple[Any, list[str]]:
        folders = sorted(str(p.relative_to(ws.root)) for p in ws.root.rglob("*") if p.is_dir())
        return workspace_state(ws), folders

    Outbox(ws).spool(runs(2))
    for transport in ("default", "http"):
        if transport == "http":
            monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
        before = tree()
        for args in (["status"], ["status", "--format", "json"], ["replay", "--dry-run"]):
            code, out, err = cli("openlineage", *args, "-w", ws.root)
            assert (code, err) == (0, ""), (args, err)
            assert tree() == before, (transport, args)
    assert not (ws.meta_dir / "openlineage").exists()
    monkeypatch.delenv("OPENLINEAGE_URL")  # sending to the default file makes it, of course
    code, out, _ = cli("openlineage", "deliver", "-w", ws.root)
    assert code == 0 and "sent 4 event(s)" in out
    assert len((ws.meta_dir / "openlineage" / "events.jsonl").read_text().splitlines()) == 4
