"""The upgrade from the journal format: a workspace written by dws_dagster at commit 60b9e85
(tests/data/journal_workspace/, made by tests/data/make_journal_workspace.py running that
code) is imported into the workspace store the first time it is opened, on SQLite and on
PostgreSQL.

Compared with what the journal-format code itself reported about the workspace
(tests/data/journal_workspace.expected.json, computed by the same script): the current lineage
of every ref, every history operation in order, every past good record (`find_record`), both
snapshots (tags, message, metrics, results copies, manifests), and the OpenLineage outbox
(every event, which are pending, the delivery counters and last error).

Also: a corrupt file imports nothing and names the file; re-opening imports nothing twice; a
process killed in the middle of the import, or an exception before the commit, leaves no
partial import; two processes opening at once import once.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from dws_dagster import Workspace
from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace.snapshots.history import list_snapshots
from dws_dagster.workspace.store import journal_import, schema
from dws_dagster.workspace.store.database import database_for, forget_databases
from dws_dagster.workspace.store.journal_format import FOLDERS, _event
from tests.conftest import ROOT, tree_state

pytestmark = pytest.mark.both_stores

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "journal_workspace"
EXPECTED = json.loads((DATA / "journal_workspace.expected.json").read_text())
HASHES = [entry["hash"] for entry in EXPECTED["snapshots"]]
TABLES = {
    "records": schema.records,
    "operations": schema.operations,
    "refs": schema.refs,
    "snapshots": schema.snapshots,
    "tags": schema.snapshot_tags,
    "snapshot_refs": schema.snapshot_refs,
    "events": schema.ol_events,
}


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def old_ws(tmp_path: Path, store_backend: str) -> Path:
    """A fresh copy of the journal-format workspace."""
    del store_backend
    root = tmp_path / "ws"
    shutil.copytree(FIXTURE, root)
    return root


def meta(root: Path) -> Path:
    return root / ".dataworkspace"


def rows(root: Path) -> dict[str, Any]:
    """Row counts of the workspace's tables and its `imported` mark, read without opening the
    workspace's store (which would import)."""
    ws = Workspace.open(root)
    db = database_for(ws.store_settings)
    ws_id = db.workspace_id(ws.name)
    with db.transaction() as connection:
        found: dict[str, Any] = {
            name: connection.execute(
                select(func.count()).select_from(table).where(table.c.workspace_id == ws_id)
            ).scalar()
            for name, table in TABLES.items()
        }
        found["imported"] = connection.execute(
            select(schema.workspaces.c.imported).where(schema.workspaces.c.id == ws_id)
        ).scalar()
    return found


def journal_tree(root: Path) -> dict[str, str]:
    return {
        path: digest
        for path, digest in tree_state(meta(root)).items()
        if not path.startswith("store.db")
    }


def fixture_tree() -> dict[str, str]:
    return tree_state(FIXTURE / ".dataworkspace")


def norm(op: dict[str, Any]) -> dict[str, Any]:
    """A history operation without what the two stores write differently: the journal's
    record and fail lines had no time (the database's rows do), and it wrote `unknown: false`
    where the database writes nothing."""
    op = dict(op)
    if op["op"] in ("record", "fail"):
        op.pop("at", None)
    if op["op"] == "fail" and not op.get("unknown"):
        op.pop("unknown", None)
    return op


def assert_imported(root: Path) -> None:
    """Everything the journal-format code reported is what the database store reports now."""
    ws = Workspace.open(root)
    store = ws.store
    assert ws.name == EXPECTED["name"]
    assert {ref: state.to_json() for ref, state in store.items()} == EXPECTED["state"]
    assert {ref: state.status for ref, state in store.items()} == EXPECTED["statuses"]
    assert [norm(op) for op in store.history()] == [norm(op) for op in EXPECTED["history"]]
    for ref, version, record in EXPECTED["find_record"]:
        assert store.find_record(ref, version) == record, (ref, version)
    assert [info.to_json() for info in list_snapshots(ws)] == EXPECTED["snapshots"]
    for digest, refs in EXPECTED["manifests"].items():
        assert {ref: state.to_json() for ref, state in store.snapshot_items(digest)} == refs
    assert_outbox(ws)


def assert_outbox(ws: Workspace) -> None:
    expected = EXPECTED["outbox"]
    events, delivery = schema.ol_events, schema.ol_delivery
    with ws.store.reading() as connection:
        found = connection.execute(
            select(
                events.c.body,
                events.c.pending,
                events.c.run_id,
                events.c.event_type,
                events.c.event_time,
            )
            .where(events.c.workspace_id == ws.store.workspace_id)
            .order_by(events.c.id)
        ).all()
        counters = (
            connection.execute(
                select(delivery).where(delivery.c.workspace_id == ws.store.workspace_id)
            )
            .mappings()
            .one()
        )
    assert [orjson.loads(row.body) for row in found] == expected["events"]
    for row in found:
        event = orjson.loads(row.body)
        # The time as the outbox keys it: UTC, fixed width (text order is time order).
        assert (row.run_id, row.event_type, row.event_time) == (
            event["run"]["runId"],
            event["eventType"],
            event["eventTime"].replace("+00:00", ".000000+00:00"),
        )
        # The body is the line the journal outbox sent: sorted keys, compact.
        assert row.body.encode() == orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
    assert [orjson.loads(row.body) for row in found if row.pending] == expected["pending"]
    status = expected["status"]
    pending = [row for row in found if row.pending]
    assert len(pending) == status["pending"] > 0
    assert len(found) - len(pending) == status["delivered"] > 0
    assert orjson.loads(pending[0].body)["eventTime"] == status["oldest_pending_time"]
    for name in (
        "delivered",
        "attempts",
        "last_error",
        "last_error_at",
        "last_delivery_at",
        "next_attempt_at",
    ):
        assert counters[name] == status[name], name
    assert status["last_error"] and status["attempts"] == 1


def assert_moved(root: Path) -> None:
    """The journal-format folders are out of the way, kept whole in journal-imported/."""
    for folder in FOLDERS:
        assert not (meta(root) / folder).exists()
    kept = tree_state(meta(root) / journal_import.IMPORTED_DIR)
    assert kept == {
        path: digest
        for path, digest in fixture_tree().items()
        if path.split("/")[0] in ("lineage", "snapshots", "openlineage")
    }


def expected_rows() -> dict[str, int]:
    return {
        "operations": len(EXPECTED["history"]),
        "refs": len(EXPECTED["state"]),
        "snapshots": 2,
        "tags": 2,
        "snapshot_refs": sum(map(len, EXPECTED["manifests"].values())),
        "events": len(EXPECTED["outbox"]["events"]),
    }


# ------------------------------------------------------------------------------- tests


def test_fixture_is_what_the_journal_code_wrote() -> None:
    """The fixture has what the tests rely on: a journal tail after current.json, a reset, a
    failure with unknown, a claim, a forget, two snapshots (one with two tags and a results
    copy), pending and delivered events across two outbox segments, and no absolute path."""
    lineage = FIXTURE / ".dataworkspace" / "lineage"
    current = json.loads((lineage / "current.json").read_text())
    assert current["position"] == {"segment": 2, "offset": 0}
    assert (lineage / "journal" / "00000002.jsonl").stat().st_size > 0
    ops = {op["op"] for op in EXPECTED["history"]}
    assert ops == {"record", "fail", "claim", "forget", "reset"}
    assert any(op["op"] == "fail" and op["unknown"] for op in EXPECTED["history"])
    assert "pending" in EXPECTED["statuses"].values()
    assert "unknown" in EXPECTED["statuses"].values()
    assert [len(entry["tags"]) for entry in EXPECTED["snapshots"]] == [2, 0]
    assert all(entry["results"] for entry in EXPECTED["snapshots"])
    assert len(list((FIXTURE / ".dataworkspace/openlineage/outbox/journal").glob("*.jsonl"))) == 2
    for path in [*FIXTURE.rglob("*"), DATA / "journal_workspace.expected.json"]:
        if path.is_file():
            assert str(ROOT).encode() not in path.read_bytes(), path


def test_first_open_imports_everything(old_ws: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dws_dagster"):
        assert_imported(old_ws)
    assert_moved(old_ws)
    messages = [r.getMessage() for r in caplog.records if "journal-format" in r.getMessage()]
    assert len(messages) == 1 and "journal-imported" in messages[0], messages
    found = rows(old_ws)
    assert found["imported"] is not None
    assert {name: found[name] for name in expected_rows()} == expected_rows()


def test_imported_records_are_the_store_own(old_ws: Path) -> None:
    """Each record is stored as the store stores it (same body, same digest): writing it again
    through the store finds the imported row instead of adding one."""
    ws = Workspace.open(old_ws)
    store = ws.store
    table = schema.records
    with store.locked() as connection:
        found = connection.execute(
            select(table.c.id, table.c.body, table.c.good).where(
                table.c.workspace_id == store.workspace_id
            )
        ).all()
        assert found
        for record_id, body, good in found:
            assert store._record_id(connection, orjson.loads(body), good=good) == record_id
    assert rows(old_ws)["records"] == len(found)


def test_reopening_imports_nothing_twice(old_ws: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert_imported(old_ws)
    before = rows(old_ws)
    forget_databases()  # as a new process would
    assert_imported(old_ws)
    assert rows(old_ws) == before
    # The old folders come back (another copy of the workspace, a checkout): the store says
    # they were imported, so they are only moved, beside the first backup.
    for folder in FOLDERS:
        shutil.copytree(FIXTURE / ".dataworkspace" / folder, meta(old_ws) / folder)
    forget_databases()
    with caplog.at_level(logging.WARNING, logger="dws_dagster"):
        assert_imported(old_ws)
    assert rows(old_ws) == before
    assert "imported into the workspace store" in caplog.text and "before" in caplog.text
    for folder in FOLDERS:
        assert not (meta(old_ws) / folder).exists()
        backup = meta(old_ws) / journal_import.IMPORTED_DIR / folder
        assert backup.is_dir() and backup.with_name(backup.name + ".2").is_dir()


def test_torn_last_lines_are_ignored(old_ws: Path) -> None:
    """A crash in the middle of an append left a line without its end: the journal readers
    ignored it, so does the import."""
    for path in (
        meta(old_ws) / "lineage/journal/00000002.jsonl",
        meta(old_ws) / "openlineage/outbox/journal/00000002.jsonl",
    ):
        with open(path, "ab") as handle:
            handle.write(b'{"op": "record", "record": {"ref": "inter/torn", "vers')
    assert_imported(old_ws)


def test_without_current_json_the_whole_journal_is_folded(old_ws: Path) -> None:
    """No current.json: the journal store replayed every operation, the reset among them
    (which reads its snapshot's manifest); the import folds the same state."""
    (meta(old_ws) / "lineage/current.json").unlink()
    assert_imported(old_ws)


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("2026-05-01T12:00:00+02:00", "2026-05-01T10:00:00.000000+00:00"),
        ("2026-05-01T10:00:00.5", "2026-05-01T10:00:00.500000+00:00"),  # no zone: UTC
        ("2026-05-01", "2026-05-01T00:00:00.000000+00:00"),  # a date: its midnight
    ],
)
def test_event_times_are_stored_as_the_outbox_keys_them(written: str, stored: str) -> None:
    line = (
        orjson.dumps(
            {"eventType": "START", "eventTime": written, "run": {"runId": "r"}},
            option=orjson.OPT_SORT_KEYS,
        )
        + b"\n"
    )
    event = _event(line, Path("journal.jsonl"), 0, max_time=40, max_type=16)
    assert (event.event_time, event.line) == (stored, line.rstrip(b"\n"))


def _line(path: Path, number: int, change: Callable[[Any], Any]) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[number] = orjson.dumps(change(orjson.loads(lines[number]))) + b"\n"
    path.write_bytes(b"".join(lines))


def _prepend(path: Path, line: bytes) -> None:
    path.write_bytes(line + path.read_bytes())


def _json_file(path: Path, change: Callable[[Any], Any]) -> None:
    path.write_bytes(orjson.dumps(change(orjson.loads(path.read_bytes()))))


def _set(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    data[key] = value
    return data


def _bad_ref(op: dict[str, Any]) -> dict[str, Any]:
    op["record"]["ref"] = "inter/../etc"
    return op


def _index(data: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    change(data["snapshots"][1])
    return data


CORRUPTIONS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "journal line not JSON": (
        "lineage/journal/00000001.jsonl",
        lambda m: _prepend(m / "lineage/journal/00000001.jsonl", b"{not json\n"),
    ),
    "journal op escaping its resource": (
        "lineage/journal/00000002.jsonl",
        lambda m: _line(m / "lineage/journal/00000002.jsonl", 0, _bad_ref),
    ),
    "journal op unknown": (
        "lineage/journal/00000001.jsonl",
        lambda m: _line(
            m / "lineage/journal/00000001.jsonl", 3, lambda op: _set(op, "op", "rewrite")
        ),
    ),
    "journal segment unreadable": (
        "lineage/journal/00000003.jsonl",
        lambda m: (m / "lineage/journal/00000003.jsonl").mkdir(),
    ),  # reading it fails (as root too)
    "current.json not JSON": (
        "current.json",
        lambda m: (m / "lineage/current.json").write_bytes(b'{"format": 1, "pos'),
    ),
    "current.json position inside a line": (
        "current.json",
        lambda m: _json_file(
            m / "lineage/current.json", lambda d: _set(d, "position", {"segment": 2, "offset": 5})
        ),
    ),
    "current.json state": (
        "current.json",
        lambda m: _json_file(
            m / "lineage/current.json",
            lambda d: _set(d, "refs", {**d["refs"], "inter/prep": {"owner": 3}}),
        ),
    ),
    "index duplicate tag": (
        "index.json",
        lambda m: _json_file(
            m / "snapshots/index.json", lambda d: _index(d, lambda e: _set(e, "tags", ["v1"]))
        ),
    ),
    "index bad hash": (
        "index.json",
        lambda m: _json_file(
            m / "snapshots/index.json", lambda d: _index(d, lambda e: _set(e, "hash", "../x"))
        ),
    ),
    "manifest missing": (
        f"{HASHES[1]}.json",
        lambda m: (m / f"snapshots/{HASHES[1]}.json").unlink(),
    ),
    "manifest of another snapshot": (
        f"{HASHES[1]}.json",
        lambda m: shutil.copy(m / f"snapshots/{HASHES[0]}.json", m / f"snapshots/{HASHES[1]}.json"),
    ),
    "outbox state": (
        "state.json",
        lambda m: _json_file(
            m / "openlineage/outbox/state.json", lambda d: _set(d, "delivered", -1)
        ),
    ),
    "outbox state time": (
        "state.json",
        lambda m: _json_file(
            m / "openlineage/outbox/state.json", lambda d: _set(d, "last_error_at", "yesterday")
        ),
    ),
    "outbox line not an object": (
        "outbox/journal/00000002.jsonl",
        lambda m: (m / "openlineage/outbox/journal/00000002.jsonl").write_bytes(b"[1, 2]\n"),
    ),
    "outbox event without run id": (
        "outbox/journal/00000001.jsonl",
        lambda m: _line(
            m / "openlineage/outbox/journal/00000001.jsonl", 1, lambda e: _set(e, "run", {})
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_file_imports_nothing(old_ws: Path, case: str) -> None:
    name, corrupt = CORRUPTIONS[case]
    corrupt(meta(old_ws))
    before = journal_tree(old_ws)
    ws = Workspace.open(old_ws)
    with pytest.raises(WorkspaceConfigError) as caught:
        ws.store.items()
    message = str(caught.value)
    assert name in message and "Nothing was imported" in message, message
    assert "Traceback" not in message
    url = os.environ.get("DWS_STORE_URL")
    if url:  # the store is named, never with its password
        assert make_url(url).password not in message and str(make_url(url).host) in message
    found = rows(old_ws)
    assert found["imported"] is None
    assert not any(found[table] for table in TABLES), found
    assert journal_tree(old_ws) == before  # nothing moved
    # The same store object tries again once the file is fixed.
    shutil.rmtree(meta(old_ws) / "lineage")
    shutil.rmtree(meta(old_ws) / "snapshots")
    shutil.rmtree(meta(old_ws) / "openlineage")
    for folder in FOLDERS:
        shutil.copytree(FIXTURE / ".dataworkspace" / folder, meta(old_ws) / folder)
    assert {ref: state.to_json() for ref, state in ws.store.items()} == EXPECTED["state"]


def test_exception_before_commit_leaves_nothing(
    old_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error after everything but the outbox was written (injected: the boundary where a
    disk or server failure would strike) rolls the whole import back."""
    before = journal_tree(old_ws)

    def fail(self: Any) -> None:
        raise RuntimeError("injected failure before the commit")

    ws = Workspace.open(old_ws)
    with monkeypatch.context() as patch:  # not monkeypatch.undo(): DWS_STORE_URL stays
        patch.setattr(journal_import._Import, "_outbox", fail)
        with pytest.raises(RuntimeError, match="injected"):
            ws.store.items()
    found = rows(old_ws)
    assert found["imported"] is None and not any(found[table] for table in TABLES), found
    assert journal_tree(old_ws) == before
    assert ws.store.get("inter/prep") is not None  # the same store object tries again
    assert_imported(old_ws)
    assert_moved(old_ws)


def test_crash_between_commit_and_move_is_finished_next_time(
    old_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(meta_dir: Path, backup: Path) -> None:
        raise KeyboardInterrupt  # as if the process died right after the commit

    with monkeypatch.context() as patch:
        patch.setattr(journal_import, "_move_away", crash)
        with pytest.raises(KeyboardInterrupt):
            Workspace.open(old_ws).store.items()
    imported = rows(old_ws)
    assert imported["imported"] is not None and imported["operations"]
    assert all((meta(old_ws) / folder).exists() for folder in FOLDERS)
    forget_databases()
    assert_imported(old_ws)
    assert rows(old_ws) == imported
    assert_moved(old_ws)


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


_KILLED = """
import sys, time
from pathlib import Path
from dws_dagster import Workspace
from dws_dagster.workspace.store import journal_import

root, marker = sys.argv[1], Path(sys.argv[2])
original = journal_import._Import._snapshots

def stall(self):
    original(self)  # history and snapshots written, inside the open transaction
    marker.write_text("inside")
    time.sleep(600)  # killed here

journal_import._Import._snapshots = stall
Workspace.open(root).store.items()
"""


def test_kill_9_in_the_middle_of_the_import_leaves_nothing(old_ws: Path, tmp_path: Path) -> None:
    marker = tmp_path / "inside"
    before = journal_tree(old_ws)
    process = _python(_KILLED, str(old_ws), str(marker))
    try:
        deadline = time.monotonic() + 120  # a safety net, not an assertion on time
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the importer never reached its stall"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGKILL
    found = rows(old_ws)
    assert found["imported"] is None and not any(found[table] for table in TABLES), found
    assert journal_tree(old_ws) == before
    assert_imported(old_ws)
    assert_moved(old_ws)


_OPEN_AT_ONCE = """
import sys, time
from pathlib import Path
from dws_dagster import Workspace

root, go = sys.argv[1], Path(sys.argv[2])
while not go.exists():
    time.sleep(0.01)
print(len(Workspace.open(root).store.refs()))
"""


def test_concurrent_first_opens_import_once(old_ws: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    processes = [_python(_OPEN_AT_ONCE, str(old_ws), str(go)) for _ in range(3)]
    go.write_text("go")
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert [out.strip() for out, _err in outputs] == [str(len(EXPECTED["state"]))] * 3
    imports = sum("imported its journal-format lineage" in err for _out, err in outputs)
    assert imports == 1, outputs
    found = rows(old_ws)
    assert {name: found[name] for name in expected_rows()} == expected_rows()
    assert_imported(old_ws)
    assert_moved(old_ws)


def test_a_store_with_lineage_is_not_merged_with_journal_files(old_ws: Path) -> None:
    """A workspace used with the database store, then given journal-format files again: two
    histories; refused, nothing changed, until the files are moved away."""
    aside = old_ws.parent / "aside"
    aside.mkdir()
    for folder in ("lineage", "snapshots", "openlineage"):
        os.rename(meta(old_ws) / folder, aside / folder)
    ws = Workspace.open(old_ws)
    ws.store.claim("fresh", ["inter/fresh"])
    assert not (meta(old_ws) / journal_import.IMPORTED_DIR).exists()  # nothing to import
    forget_databases()
    for folder in ("lineage", "snapshots", "openlineage"):
        os.rename(aside / folder, meta(old_ws) / folder)
    before = rows(old_ws)
    with pytest.raises(WorkspaceConfigError, match="already holds lineage") as caught:
        Workspace.open(old_ws).store.refs()
    assert "move those folders out" in str(caught.value)
    assert "fix or restore that file" not in str(caught.value)
    assert rows(old_ws) == before
    assert all((meta(old_ws) / folder).exists() for folder in FOLDERS)


def test_files_that_cannot_move_stay_and_are_not_imported_again(
    old_ws: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The backup folder cannot be made (here a file takes its name; a read-only workspace
    copy does the same): the import stands, the files stay where they are, a warning says so,
    and later opens neither import them again nor fail."""
    (meta(old_ws) / journal_import.IMPORTED_DIR).write_text("in the way")
    with caplog.at_level(logging.WARNING, logger="dws_dagster"):
        assert_imported(old_ws)
    assert "move it yourself" in caplog.text
    imported = rows(old_ws)
    assert imported["imported"] is not None
    assert all((meta(old_ws) / folder).is_dir() for folder in FOLDERS)
    forget_databases()
    assert_imported(old_ws)
    assert rows(old_ws) == imported
