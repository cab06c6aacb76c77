"""The lineage sensor and its OpenLineage delivery under faults: the sensor process killed with
SIGKILL in the middle of a tick (inside a batch's transaction, or while delivering), and a
catalog that refuses connections, answers 500 or answers past the timeout. Nothing is lost,
nothing is stored twice, a batch's lineage and events commit together, ticks keep to their
budget, and delivery resumes by itself.

Real parts: materializations by the Spark IO manager in a Dagster instance on disk (SQLite), the
sensor's work (`process_events`) in a separate Python process killed by the test, and a real
HTTP receiver on 127.0.0.1 (tests/ol/ol_receiver.py).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterEventType, DagsterInstance, EventRecordsFilter

from dws_dagster import Workspace, process_events
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.outbox.event_rows import event_key
from dws_dagster.store.database import forget_databases
from tests.assets.test_io_manager import run
from tests.conftest import ROOT
from tests.ol.ol_parents import check_parents, first_occurrences
from tests.ol.ol_receiver import Receiver
from tests.sensor.test_sensor import scored_assets
from tests.support.pipeline import make_workspace

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: Generous bounds for a child process to reach its point; not assertions on speed.
CHILD_DEADLINE_SECONDS = 300

CHILD = r"""
import sys, time
from pathlib import Path

root, home, point, ready, cursor_file = (sys.argv[1], sys.argv[2], sys.argv[3],
                                         Path(sys.argv[4]), Path(sys.argv[5]))


def stop_here(where):
    ready.write_text(where)  # signal the test, then wait for its SIGKILL
    while True:
        time.sleep(3600)


from dagster import DagsterInstance

from dws_dagster import Workspace, process_events
from dws_dagster.ol.outbox import durable as outbox_module
from dws_dagster.store import lineage_store as store_module

calls = {"spool": 0}
real_spool = outbox_module.Outbox.spool


def counting_spool(self, events):
    calls["spool"] += 1
    return real_spool(self, events)


outbox_module.Outbox.spool = counting_spool
real_apply = store_module.LineageStore.apply


def apply(self, record):
    changed = real_apply(self, record)
    if changed and "first" not in calls:
        calls["first"] = calls["spool"]  # spool calls made before the first record's batch
    elif changed and point == "mid-batch" and calls["spool"] > calls["first"]:
        # A batch after one that committed records dies once it applied a record, its
        # transaction open (not committed).
        stop_here(point)
    return changed


store_module.LineageStore.apply = apply

if point == "mid-spool":
    # A batch after one that committed records dies once its lineage is applied and its
    # events inserted, uncommitted.
    real_insert = outbox_module.insert_events

    def insert_events(connection, workspace_id, rows, **kwargs):
        added = real_insert(connection, workspace_id, rows, **kwargs)
        if added and "first" in calls and calls["spool"] > calls["first"] + 1:
            stop_here(point)
        return added

    outbox_module.insert_events = insert_events
elif point == "mid-delivery":
    # Events sent but not yet marked delivered; a short lease, so the next sensor takes over
    # soon after the kill.
    outbox_module.LEASE_SECONDS = 2.0
    outbox_module.Outbox._checkpoint = lambda self, holder, ids, at: stop_here(point)

with DagsterInstance.from_config(home) as instance:
    process_events(instance, Workspace.open(root), batch_size=5, time_budget_seconds=600,
                   save_cursor=lambda cursor: cursor_file.write_text(str(cursor)))
ready.write_text("finished")  # the point was never reached: the test fails on this
"""


def refs_state(ws: Workspace) -> dict[str, Any]:
    return {ref: state.to_json() for ref, state in ws.store.items()}


@pytest.fixture(scope="module")
def event_log(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """Two runs of the scored pipeline in a Dagster instance on disk; returns the workspace
    template, the instance home and the lineage the IO manager committed."""
    base = tmp_path_factory.mktemp("event_log")
    home = base / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    ws = make_workspace(base / "ws")
    with DagsterInstance.from_config(str(home)) as instance:
        run(scored_assets(), ws, instance)
        run(
            scored_assets(),
            ws,
            instance,
            run_config={"ops": {"hourly": {"config": {"min_fare": 9.0}}}},
        )
    committed = refs_state(Workspace.open(ws.root))
    return ws.root, home, committed


def copy_workspace(template: Path, where: Path, *, keep_lineage: bool = True) -> Workspace:
    forget_databases()  # no open connection (nor WAL) of this process on the copied store
    shutil.copytree(template, where)
    if not keep_lineage:  # a store lost or never written: the sensor rebuilds it
        for path in (where / ".dataworkspace").glob("store.db*"):
            path.unlink()
    return Workspace.open(where)


def materializations(home: Path) -> Counter[tuple[str, str]]:
    """(asset, run id) of every materialization in the event log."""
    with DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_event_records(
            EventRecordsFilter(DagsterEventType.ASSET_MATERIALIZATION), ascending=True
        )
    return Counter(
        (r.event_log_entry.dagster_event.asset_key.to_user_string(), r.event_log_entry.run_id)
        for r in records
    )


def recorded(ws: Workspace) -> Counter[tuple[str, str | None]]:
    """(step, run id) of every materialization record in the store's history."""
    return Counter(
        (op["record"]["step"]["name"], op["record"]["step"].get("run_id"))
        for op in ws.store.history()
        if op["op"] == "record" and op["record"]["step"]["kind"] != "observation"
    )


def spooled_keys(ws: Workspace) -> list[tuple[str, str]]:
    return [event_key(e) for e in Outbox(ws).events()]


class _Stop(Exception):
    """Ends a reference run after the batches the killed sensor committed."""


# ---------------------------------------------------------------------- kill -9 of a tick


KILL_POINTS = ("mid-batch", "mid-spool", "mid-delivery")


@pytest.fixture(scope="module")
def killed_ticks(
    event_log, tmp_path_factory
) -> dict[str, tuple[Workspace, str, str, Receiver, int | None]]:
    """For each point: a copy of the workspace without its store, a receiver, a sensor process
    killed at that point (side by side: no Spark in them), and the cursor of the last batch
    it committed."""
    template, home, _ = event_log
    base = tmp_path_factory.mktemp("ticks")
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENLINEAGE")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(base))
    started = {}
    try:
        for point in KILL_POINTS:
            ws = copy_workspace(template, base / point, keep_lineage=False)
            receiver = Receiver().start()
            ready = base / f"{point}.ready"
            cursor = base / f"{point}.cursor"
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(ws.root),
                    str(home),
                    point,
                    str(ready),
                    str(cursor),
                ],
                env={**env, "OPENLINEAGE_URL": receiver.url},
                cwd=base,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            started[point] = (ws, child, ready, receiver, cursor)
        deadline = time.monotonic() + CHILD_DEADLINE_SECONDS
        results = {}
        for point, (ws, child, ready, receiver, cursor) in started.items():
            while (
                time.monotonic() < deadline
                and child.poll() is None
                and not (ready.exists() and ready.read_text())
            ):
                time.sleep(0.1)
            reached = ready.read_text() if ready.exists() else f"exit {child.poll()}"
            os.killpg(child.pid, signal.SIGKILL)
            _, err = child.communicate()
            committed = int(cursor.read_text()) if cursor.exists() else None
            results[point] = (ws, reached, err.decode(errors="replace"), receiver, committed)
        yield results
    finally:
        for _, child, _, receiver, _ in started.values():
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            receiver.stop()


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sensor_killed_mid_tick_stores_each_materialization_once_and_loses_no_event(
    event_log, killed_ticks, point, clean_ol_env, monkeypatch, tmp_path
):
    template, home, committed = event_log
    ws, reached, stderr, receiver, committed_cursor = killed_ticks[point]
    assert reached == point, f"the sensor did not stop at {point}: {stderr[-3000:]}"

    # What an uninterrupted sensor does with the same event log, for comparison.
    reference = copy_workspace(template, tmp_path / "reference", keep_lineage=False)
    with DagsterInstance.from_config(str(home)) as instance:
        process_events(instance, reference, deliver=False)
    expected_keys = {event_key(e) for e in Outbox(reference).events()}
    assert expected_keys

    if point != "mid-delivery":
        # Killed inside a batch's transaction: the store holds exactly the batches committed
        # before it, lineage and events alike (what a sensor stopped after them holds), and
        # nothing of the batch that died.
        assert committed_cursor is not None
        partial = copy_workspace(template, tmp_path / "partial", keep_lineage=False)

        def stop_after(cursor: int) -> None:
            if cursor == committed_cursor:
                raise _Stop

        with DagsterInstance.from_config(str(home)) as instance, pytest.raises(_Stop):
            process_events(
                instance,
                partial,
                batch_size=5,
                time_budget_seconds=600,
                deliver=False,
                save_cursor=stop_after,
            )
        killed = Workspace.open(ws.root)
        assert recorded(killed) == recorded(partial)
        assert refs_state(killed) == refs_state(partial)
        assert spooled_keys(killed) == spooled_keys(partial)
        assert set(spooled_keys(killed)) < expected_keys  # the rest was never spooled
        assert recorded(killed)  # the kill came after records were committed
    else:
        # The dead deliverer's lease keeps others out until it runs out (2 s in the child).
        deadline = time.monotonic() + CHILD_DEADLINE_SECONDS
        while Outbox(ws).status().deliverer is not None:
            assert time.monotonic() < deadline, "the dead deliverer's lease never expired"
            time.sleep(0.1)

    # The next tick starts from the cursor Dagster saved: none, since the tick never returned.
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    with DagsterInstance.from_config(str(home)) as instance:
        outcome = process_events(instance, Workspace.open(ws.root), time_budget_seconds=120)
    assert outcome.delivery_error is None and outcome.pending == 0

    # Each materialization recorded once.
    lineage = Workspace.open(ws.root)
    dws_materializations = {
        key: n for key, n in materializations(home).items() if key[0] not in ("trips", "zones")
    }
    assert recorded(lineage) == dws_materializations
    assert set(recorded(lineage).values()) == {1}
    # The rebuilt lineage is what the IO manager had committed (plus the sensor's metrics).
    rebuilt = refs_state(lineage)
    assert rebuilt.keys() == committed.keys()
    for ref, state in committed.items():
        assert rebuilt[ref]["record"]["version"] == state["record"]["version"]
        assert rebuilt[ref]["record"]["step"] == state["record"]["step"]

    # The outbox holds every event once; the catalog got every one (at least once).
    outbox = Outbox(lineage)
    spooled = spooled_keys(lineage)
    assert len(spooled) == len(set(spooled)) and set(spooled) == expected_keys
    assert {event_key(e) for e in receiver.events} == expected_keys
    status = outbox.status()
    assert (status.pending, status.delivered) == (0, len(spooled))
    # Each Dagster run's own START and end once, in order around its assets' events, in the
    # outbox and as the catalog first received them.
    with DagsterInstance.from_config(str(home)) as instance:  # pipeline and observation runs
        run_ids = {r.run_id for r in instance.get_runs()}
    assert {run_id for _asset, run_id in dws_materializations} <= run_ids
    assert check_parents(list(outbox.events())) == run_ids
    assert check_parents(first_occurrences(receiver.events)) == run_ids
    if point == "mid-delivery":
        # Sent but not marked as sent: sent again (catalogs deduplicate), never skipped.
        assert len(receiver.events) > len(expected_keys)
    else:
        assert len(receiver.events) == len(expected_keys)  # nothing was sent before the kill


# ---------------------------------------------------------------------- a failing catalog


def _wait_for_backoff(ws: Workspace) -> None:
    """Sleep until the outbox's next attempt is due (waiting, not asserting on time)."""
    due = Outbox(ws).status().next_attempt_at
    if due is not None:
        time.sleep(max(0.0, (due - dt.datetime.now(dt.UTC)).total_seconds()) + 0.05)


def _wait_until(condition, deadline_seconds: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never became true"
        time.sleep(0.05)


def _use_http(ws: Workspace, url: str, timeout: float) -> None:
    (ws.root / "openlineage.yml").write_text(
        f"transport:\n  type: http\n  url: {url}\n  timeout: {timeout}\n"
    )


def test_refusing_failing_and_slow_catalog_loses_nothing_and_resumes(
    event_log, tmp_path, clean_ol_env
):
    template, home, _ = event_log
    ws = copy_workspace(template, tmp_path / "ws")
    receiver = Receiver()  # not started: connections are refused
    _use_http(ws, receiver.url, timeout=1.0)
    with DagsterInstance.from_config(str(home)) as instance:

        def tick():
            return process_events(instance, ws, time_budget_seconds=30)

        first = tick()
        spooled = first.spooled
        assert spooled > 10 and first.delivered == 0 and first.pending == spooled
        assert (
            "refused" in first.delivery_error.lower()
            or "connection" in first.delivery_error.lower()
        )
        # During the backoff a tick sends nothing and returns at once with its lineage done.
        waiting = tick()
        assert waiting.delivered == 0 and waiting.pending == spooled
        assert Outbox(ws).status().attempts == 1

        with receiver:
            receiver.fail_next(1, status=500)
            _wait_for_backoff(ws)
            failed = tick()
            assert failed.delivered == 0 and "500" in failed.delivery_error
            assert receiver.attempts == 1  # one request per attempt, no client retries

            receiver.slow_next(1, seconds=4.0)  # past the 1 s timeout
            _wait_for_backoff(ws)
            slow = tick()
            assert slow.delivered == 0 and "timed out" in slow.delivery_error.lower()
            assert receiver.attempts == 1  # the slow one has not been answered yet
            assert Outbox(ws).status().attempts == 3
            _wait_until(lambda: receiver.attempts == 2)  # the slow answer, stored late

            # Back to normal: the next due tick delivers everything, oldest first.
            _wait_for_backoff(ws)
            resumed = tick()
            assert resumed.delivery_error is None and resumed.pending == 0
            assert resumed.delivered == spooled
            status = Outbox(ws).status()
            # Recovered: no failure run, no wait (the last error stays on record, dated).
            assert status.attempts == 0 and status.next_attempt_at is None

    keys = [event_key(e) for e in Outbox(ws).events()]
    got = [event_key(e) for e in receiver.events]
    assert set(got) == set(keys)  # nothing lost
    # At least once: only the event the slow catalog stored after the timeout came twice;
    # the rest arrived once each, in spool order.
    assert got[0] == keys[0] and got[1:] == keys


def test_slow_catalog_ticks_stop_delivering_when_the_budget_runs_out(
    event_log, tmp_path, clean_ol_env
):
    template, home, _ = event_log
    ws = copy_workspace(template, tmp_path / "ws")
    delay, budget = 0.5, 2.0
    with Receiver() as receiver:
        _use_http(ws, receiver.url, timeout=10.0)
        with DagsterInstance.from_config(str(home)) as instance:
            first = process_events(instance, ws, deliver=False)
            total = first.pending
            assert total > 10
            ticks = []
            while Outbox(ws).status().pending and len(ticks) < total:
                receiver.slow_next(total, seconds=delay)  # every request takes >= delay
                ticks.append(
                    process_events(
                        instance, ws, after_storage_id=first.cursor, time_budget_seconds=budget
                    )
                )
    # No event is started once the budget is spent: each request takes at least `delay`, so
    # a tick makes at most budget / delay + 1 of them, and the backlog spreads over ticks.
    limit = int(budget / delay) + 1
    assert all(t.delivery_error is None for t in ticks)
    assert all(1 <= t.delivered <= limit for t in ticks)
    assert len(ticks) >= -(-total // limit) and ticks[-1].pending == 0
    assert sum(t.delivered for t in ticks) == total
    assert [event_key(e) for e in receiver.events] == [event_key(e) for e in Outbox(ws).events()]
