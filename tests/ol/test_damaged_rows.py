"""The OpenLineage outbox's rows are untrusted input, like any file of the workspace.

Every column of `dws_ol_events` and `dws_ol_delivery` is damaged by class (hypothesis): values
of the wrong type, text that is not what the column holds, a body that is not the RunEvent its
row was stored under. Whatever reads a damaged row (the outbox's status, a delivery, the
sensor's work `process_events`, the archive a replay sends) refuses with the one error class
for damaged workspace data, `WorkspaceConfigError`, naming the table, the row and what to do,
and changes nothing: no event is sent, no row and no file is written, and no folder is made.
A damaged column nothing reads (`spooled`) changes nothing either. Real stores (SQLite, which
keeps any value in any column, and PostgreSQL for what its typed columns let through), a real
Dagster instance and the daemon's own sensor loop.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, type_coerce, update
from sqlalchemy.types import NullType

from dws_dagster import Workspace, WorkspaceConfigError, process_events
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.transport.factory import make_transport
from dws_dagster.store import schema
from tests.ol.test_outbox import runs
from tests.support.store_db import db_dump, workspace_state

EVENTS = "dws_ol_events"
DELIVERY = "dws_ol_delivery"


def tree(ws: Workspace) -> tuple[Any, list[str]]:
    """The workspace's files and store rows (`workspace_state`: a delivery that refuses may
    have taken and given back its lease, which SQLite's log records, but no row differs), and
    every folder under it: a refusal leaves them as they were, an empty folder included."""
    folders = sorted(str(p.relative_to(ws.root)) for p in ws.root.rglob("*") if p.is_dir())
    return workspace_state(ws), folders


def outbox_workspace(root: Path) -> tuple[Workspace, int]:
    """A workspace whose outbox has delivered two events (to its default file) and holds two
    pending; and the id of the first pending event's row."""
    ws = Workspace.init(root)
    outbox = Outbox(ws)
    first, second = runs(1), runs(1, start=10)
    outbox.spool(first)
    transport, _ = make_transport(ws)
    try:
        assert outbox.deliver(transport).sent == 2
    finally:
        transport.close()
    outbox.spool(second)
    events = schema.ol_events
    with ws.store.db.engine.connect() as connection:
        first_pending = connection.execute(
            select(func.min(events.c.id)).where(
                events.c.workspace_id == ws.store.workspace_id, events.c.pending
            )
        ).scalar()
    return ws, int(first_pending)


def _where(table: str, row: int) -> tuple[Any, Any]:
    found = schema.ol_events if table == EVENTS else schema.ol_delivery
    return found, (found.c.id if table == EVENTS else found.c.workspace_id) == row


def stored(ws: Workspace, table: str, column: str, row: int) -> Any:
    """What the column holds now, as the database gives it back (no type conversion)."""
    found, where = _where(table, row)
    with ws.store.db.engine.connect() as connection:
        return connection.execute(
            select(type_coerce(found.c[column], NullType())).where(where)
        ).scalar()


def set_column(ws: Workspace, table: str, column: str, row: int, value: Any) -> None:
    """Write `value` into the row behind the code's back, as it is (no type conversion)."""
    found, where = _where(table, row)
    with ws.store.db.engine.begin() as connection:
        changed = connection.execute(
            update(found).where(where).values({column: type_coerce(value, NullType())})
        ).rowcount
    assert changed == 1


def not_iso(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return True
    return False


# ------------------------------------------------------------------------ damage by class

_other_texts = st.text(min_size=1, max_size=30)
#: What a SQL integer column holds.
_int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def _body_damage(original: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Bodies that are not the RunEvent the row was stored under."""
    json_values = st.recursive(
        st.none() | st.booleans() | _int64 | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=3),
        max_leaves=5,
    )

    def without(key: str) -> dict[str, Any]:
        return {k: v for k, v in original.items() if k != key}

    def with_field(path: tuple[str, ...], value: Any) -> dict[str, Any]:
        changed = orjson.loads(orjson.dumps(original))
        target = changed
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
        return changed

    when = dt.datetime.fromisoformat(original["eventTime"])
    objects = st.one_of(
        st.sampled_from(["run", "eventType", "eventTime"]).map(without),
        _other_texts.filter(lambda v: v != original["run"]["runId"]).map(
            lambda v: with_field(("run", "runId"), v)
        ),
        st.text(min_size=1, max_size=16)
        .filter(lambda v: v != original["eventType"])
        .map(lambda v: with_field(("eventType",), v)),
        st.datetimes(timezones=st.just(dt.UTC))
        .filter(lambda v: v != when)
        .map(lambda v: with_field(("eventTime",), v.isoformat())),
        st.text().filter(not_iso).map(lambda v: with_field(("eventTime",), v)),
        json_values.map(lambda v: with_field(("run", "runId"), v)),
    )
    return st.one_of(
        st.binary(min_size=1),
        st.text().filter(lambda v: not _json_object(v)),
        json_values.map(lambda v: orjson.dumps(v).decode()),
        objects.map(lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()),
    )


def _json_object(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def _anything() -> st.SearchStrategy[Any]:
    return st.one_of(st.binary(), st.text(), _int64, st.floats(allow_nan=False), st.booleans())


#: column -> (table, strategy of damage given the row's original value (None: any value),
#: whether the damage is harmless: nothing reads the column)
COLUMNS: dict[str, tuple[str, Callable[[Any], st.SearchStrategy[Any]], bool]] = {
    "body": (EVENTS, lambda body: _body_damage(orjson.loads(body)), False),
    "run_id": (EVENTS, lambda v: st.one_of(st.binary(), _other_texts), False),
    "event_type": (EVENTS, lambda v: st.one_of(st.binary(), _other_texts), False),
    "event_time": (EVENTS, lambda v: st.one_of(st.binary(), st.text(), _int64), False),
    "pending": (EVENTS, lambda v: _anything(), False),
    "spooled": (EVENTS, lambda v: _anything(), True),
    "holder": (DELIVERY, lambda v: st.binary(), False),
    "lease_until": (
        DELIVERY,
        lambda v: st.one_of(st.text(), st.binary(), st.just(math.inf)),
        False,
    ),
    "delivered": (DELIVERY, lambda v: _anything(), False),
    "attempts": (DELIVERY, lambda v: _anything(), False),
    "next_attempt_at": (
        DELIVERY,
        lambda v: st.one_of(st.binary(), st.text(), _int64),
        False,
    ),
    "last_error": (DELIVERY, lambda v: st.binary(), False),
    "last_error_at": (DELIVERY, lambda v: st.one_of(st.binary(), st.text(), _int64), False),
    "last_delivery_at": (
        DELIVERY,
        lambda v: st.one_of(st.binary(), st.text(), _int64),
        False,
    ),
}


def _damaged(column: str, value: Any, original: Any) -> bool:
    """Whether `value`, as the column now holds it, is something the outbox never writes
    there (SQLite turns text that looks like a number into one in numeric columns, and a
    number into text in text columns: the value read back decides)."""
    if value == original and type(value) is type(original):
        return False
    if column in ("run_id", "event_type", "event_time", "body"):
        return True  # no longer what the body and the other columns say
    if column == "pending":
        return not (type(value) is int and value in (0, 1))
    if column in ("holder", "last_error"):
        return value is not None and type(value) is not str
    if column == "lease_until":
        return type(value) not in (int, float) or not math.isfinite(value)
    if column in ("delivered", "attempts"):
        return type(value) is not int or value < 0
    if column.endswith("_at"):
        return value is not None and (type(value) is not str or not_iso(value))
    return False  # spooled: read by nothing


# ------------------------------------------------------------------------ what must hold


def refused(call: Callable[[], Any], table: str, row: str) -> WorkspaceConfigError:
    with pytest.raises(WorkspaceConfigError) as caught:
        call()
    message = str(caught.value)
    assert table in message and row in message, message
    assert "restore the store from a backup" in message and "delete" in message, message
    assert "\n" not in message
    return caught.value


def check_every_reader(
    ws: Workspace, instance: Any, table: str, column: str, row: int, harmful: bool
) -> None:
    """status, deliver (to the default file), process_events and the archive a replay sends
    (which does not read `pending` or the delivery row) either refuse, naming the row, and
    change nothing (harmful damage), or work (harmless)."""
    events_file = ws.meta_dir / "openlineage" / "events.jsonl"
    before = tree(ws)
    named = f"event {row}" if table == EVENTS else f"workspace {row}"
    outbox = Outbox(Workspace.open(ws.root))
    transport, _ = make_transport(ws)
    saved: list[int] = []
    readers: list[tuple[str, Callable[[], Any]]] = [
        ("status", outbox.status),
        ("deliver", lambda: outbox.deliver(transport, ignore_backoff=True)),
        ("process_events", lambda: process_events(instance, ws, save_cursor=saved.append)),
    ]
    if table == EVENTS and column != "pending":
        readers.append(("events", lambda: list(outbox.events())))
    try:
        if not harmful:
            assert outbox.status().pending == 2
            assert outbox.deliver(transport).sent == 2
            assert len(events_file.read_text().splitlines()) == 4
            assert process_events(instance, ws).pending == 0
            return
        for name, call in readers:
            refused(call, table, named)
            assert tree(ws) == before, name  # nothing sent, marked or recorded; no folder made
        assert saved == []  # the sensor's cursor did not move
    finally:
        transport.close()


FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)


@FUZZ
@given(data=st.data())
def test_every_damaged_column_is_named_by_every_reader(
    tmp_path: Path, instance: Any, clean_ol_env: None, data: st.DataObject
) -> None:
    column = data.draw(st.sampled_from(sorted(COLUMNS)), label="column")
    table, damages, harmless = COLUMNS[column]
    ws, first_pending = outbox_workspace(tmp_path / uuid.uuid4().hex)
    row = first_pending if table == EVENTS else ws.store.workspace_id
    original = stored(ws, table, column, row)
    value = data.draw(damages(original), label="value")
    set_column(ws, table, column, row, value)
    now = stored(ws, table, column, row)
    harmful = _damaged(column, now, original)
    assume(harmful or harmless)  # a value SQLite turned back into a valid one
    check_every_reader(ws, instance, table, column, row, harmful and not harmless)


# --------------------------------------------------------------- both stores, the sensor


@pytest.mark.both_stores
@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        (EVENTS, "body", '{"eventType": "START"'),
        (EVENTS, "run_id", "another-run"),
        (EVENTS, "event_time", "2026-13-01T00:00:00+00:00"),
        (DELIVERY, "next_attempt_at", "tomorrow"),
        (DELIVERY, "last_delivery_at", "not a time"),
    ],
)
def test_text_damage_on_both_stores(
    tmp_path: Path,
    store_backend: str,
    instance: Any,
    clean_ol_env: None,
    table: str,
    column: str,
    value: str,
) -> None:
    """What a PostgreSQL store's typed columns let through (text) is named there too."""
    ws, first_pending = outbox_workspace(tmp_path / "ws")
    row = first_pending if table == EVENTS else ws.store.workspace_id
    set_column(ws, table, column, row, value)
    check_every_reader(ws, instance, table, column, row, True)


TICK_DEFINITIONS = """
from dagster import Definitions
from dws_dagster import WorkspaceResource, lineage_sensor

defs = Definitions(sensors=[lineage_sensor(
    workspace=WorkspaceResource(root={root!r}), time_budget_seconds=5)])
"""


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [(EVENTS, "body", b"\x00\xff"), (DELIVERY, "attempts", "three")],
)
def test_the_sensors_tick_fails_names_the_row_and_keeps_its_cursor(
    tmp_path: Path, instance: Any, clean_ol_env: None, table: str, column: str, value: Any
) -> None:
    """The daemon's own evaluation: the tick fails with the message naming the table and the
    row, and stores no cursor; once the row is repaired, its work goes through."""
    from dagster._core.scheduler.instigation import TickStatus

    from tests.support.sensor_ticks import tick_sensors

    ws, first_pending = outbox_workspace(tmp_path / "ws")
    row = first_pending if table == EVENTS else ws.store.workspace_id
    original = stored(ws, table, column, row)
    set_column(ws, table, column, row, value)
    definitions = tmp_path / "tick_definitions.py"
    definitions.write_text(TICK_DEFINITIONS.format(root=str(ws.root)))
    before = db_dump(ws)

    tick = tick_sensors(instance, definitions)["dws_lineage_sensor"]
    assert tick.status == TickStatus.FAILURE and tick.cursor is None
    message = tick.error.to_string() if tick.error else ""
    assert "WorkspaceConfigError" in message and table in message, message
    assert (f"event {row}" if table == EVENTS else f"workspace {row}") in message
    assert "restore the store from a backup" in message
    assert db_dump(ws) == before

    # Repaired: the work the tick does goes through, from the same (absent) cursor.
    set_column(ws, table, column, row, original)
    outcome = process_events(instance, Workspace.open(ws.root), time_budget_seconds=5)
    assert (outcome.delivered, outcome.pending) == (2, 0)


def test_the_cli_names_the_damage_in_one_line_and_creates_nothing(
    tmp_path: Path, clean_ol_env: None, cli: Any
) -> None:
    """`openlineage status` and `deliver` on a damaged outbox: exit 1, one line on stderr
    naming the row, and the workspace as it was — no `.dataworkspace/openlineage/` folder made
    where the outbox's default file was never written."""
    ws = Workspace.init(tmp_path / "ws")
    Outbox(ws).spool(runs(1))
    set_column(ws, DELIVERY, "last_error_at", ws.store.workspace_id, "soon")
    before = tree(ws)
    for action in ("status", "deliver"):
        for extra in ([], ["--format", "json"]):
            code, out, err = cli("openlineage", action, *extra, "-w", ws.root)
            assert (code, out) == (1, ""), (action, out, err)
            assert err.startswith("error: workspace store ") and err.count("\n") == 1, err
            assert DELIVERY in err and "last_error_at 'soon' is not an ISO time" in err
            assert tree(ws) == before, action
    assert not (ws.meta_dir / "openlineage").exists()
