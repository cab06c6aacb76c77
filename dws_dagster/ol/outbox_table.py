"""The outbox's tables in the workspace store: its events (`dws_ol_events`, a row per spooled
event) and its delivery state (the workspace's `dws_ol_delivery` row: the lease, the count of
delivered events, the current run of failures).

Functions over a connection the caller opened: `outbox.Outbox` decides the transactions, so
that none is held while a catalog answers. Each function is one short statement or a few.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Integer, and_, func, insert, select, type_coerce, update
from sqlalchemy.engine import Connection

from dws_dagster.errors import DwsError, WorkspaceConfigError
from dws_dagster.ol.timestamps import assume_utc, iso_or_none
from dws_dagster.workspace.store import schema

#: Events read per query while delivering or reading the archive.
PAGE_SIZE = 500
#: Ids per UPDATE ... WHERE id IN (...) (SQLite's default limit of bound parameters is 32766).
MARK_CHUNK = 500
#: `dws_ol_events.event_type` is a String(16): OpenLineage's types are at most 8 characters.
MAX_EVENT_TYPE_CHARS = 16

Key = tuple[str, str]

_EVENTS = schema.ol_events
_DELIVERY = schema.ol_delivery


class OutboxError(DwsError):
    """The OpenLineage outbox cannot take or send events as asked (events that are not
    RunEvents, a transport that is disabled, ...). Damage to the outbox's own rows is a
    `WorkspaceConfigError`, as for any damaged data of the workspace.

    Examples:
        Met through the command line, which prints its message and exits 1:

        .. code-block:: console

            $ OPENLINEAGE_DISABLED=true dws-dagster openlineage replay
            error: OpenLineage is disabled (noop transport): a replay would reach no catalog; ...
    """


#: How to recover from a damaged row of `dws_ol_events`, said with every such damage found.
EVENT_ADVICE = (
    "delete that row of dws_ol_events (its event is then never sent), or restore the store "
    "from a backup"
)
#: How to recover from a damaged `dws_ol_delivery` row.
DELIVERY_ADVICE = (
    "delete the workspace's row of dws_ol_delivery (it is made again; only the count of "
    "delivered events and the last error are lost), or restore the store from a backup"
)


def damaged_event(shown: str, event_id: Any, problem: str) -> WorkspaceConfigError:
    """The error for a `dws_ol_events` row no spooler could have written."""
    return WorkspaceConfigError(
        f"workspace store {shown}: OpenLineage outbox event {event_id} (a row of "
        f"dws_ol_events) is damaged: {problem}; {EVENT_ADVICE}"
    )


def damaged_delivery(shown: str, ws_id: int, problem: str) -> WorkspaceConfigError:
    """The error for a `dws_ol_delivery` row no deliverer could have written."""
    return WorkspaceConfigError(
        f"workspace store {shown}: the OpenLineage outbox's delivery state (the row of "
        f"workspace {ws_id} in dws_ol_delivery) is damaged: {problem}; {DELIVERY_ADVICE}"
    )


def _shown(value: Any, chars: int = 40) -> str:
    """A damaged value as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= chars else text[: chars - 1] + "…"


# ----------------------------------------------------------------------------------- times


def parse_time(text: str, *, what: str = "time") -> dt.datetime:
    """An aware datetime from ISO-8601 text: a date means its midnight, no zone means UTC."""
    try:
        value = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise OutboxError(
            f"{what}: {text!r} is not an ISO-8601 date or datetime; write it like 2026-05-01 or "
            "2026-05-01T12:00:00+00:00"
        ) from None
    return assume_utc(value)


def parse_time_or_none(text: str | None) -> dt.datetime | None:
    """A time of the delivery state (`iso_or_none` text), None staying None."""
    return None if text is None else parse_time(text)


def time_key(value: dt.datetime) -> str:
    """`value` as stored in `dws_ol_events.event_time`: UTC, fixed width, so that comparing
    the text compares the instants (`events(since)` filters in the database)."""
    return assume_utc(value).astimezone(dt.UTC).isoformat(timespec="microseconds")


# ---------------------------------------------------------------------------------- events


def event_key(event: Mapping[str, Any]) -> Key:
    """What makes two events the same for the outbox: (run.runId, eventType)."""
    run = event.get("run")
    return (
        str(run.get("runId")) if isinstance(run, Mapping) else "",
        str(event.get("eventType", "")),
    )


def describe_event(event: Mapping[str, Any]) -> str:
    """An event as error messages name it."""
    run_id, event_type = event_key(event)
    return f"run {run_id} {event_type} ({event.get('eventTime')})"


def _key_columns(event: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The `run_id`, `event_type` and `event_time` columns an event is stored under, and the
    names of the fields that cannot give them (missing or invalid)."""
    columns: dict[str, str] = {}
    problems = []
    run: Any = event.get("run")
    run_id = run.get("runId") if isinstance(run, Mapping) else None
    if isinstance(run_id, str) and run_id:
        columns["run_id"] = run_id
    else:
        problems.append("run.runId")
    event_type = event.get("eventType")
    if isinstance(event_type, str) and event_type and len(event_type) <= MAX_EVENT_TYPE_CHARS:
        columns["event_type"] = event_type
    else:
        problems.append("eventType")
    when = event.get("eventTime")
    try:
        if not isinstance(when, str):
            raise OutboxError("not text")
        columns["event_time"] = time_key(parse_time(when))
    except (OutboxError, ValueError, OverflowError):
        problems.append("eventTime")
    return columns, problems


def event_row(event: Any, index: int = 0) -> dict[str, Any]:
    """Validate one event and give its `dws_ol_events` columns (no workspace, no spool time):
    `run_id`, `event_type`, `event_time` (see `time_key`) and `body` (JSON, sorted keys)."""
    if not isinstance(event, Mapping):
        raise OutboxError(
            f"event #{index} is a {type(event).__name__}, not an OpenLineage "
            "RunEvent dict; pass the dicts the event builders return"
        )
    columns, problems = _key_columns(event)
    if problems:
        raise OutboxError(
            f"event #{index} cannot be spooled: missing or invalid {', '.join(problems)}; the "
            "outbox takes OpenLineage RunEvents with run.runId, an eventType (at most "
            f"{MAX_EVENT_TYPE_CHARS} characters) and an ISO-8601 eventTime"
        )
    try:
        body = orjson.dumps(dict(event), option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise OutboxError(
            f"event #{index} ({describe_event(event)}) is not JSON: {exc}; pass plain "
            "JSON data (strings, numbers, lists, dicts)"
        ) from None
    return {**columns, "body": body.decode()}


#: The columns `checked_event` checks, in the order the queries below select them.
EVENT_COLUMNS = (_EVENTS.c.id, _EVENTS.c.run_id, _EVENTS.c.event_type, _EVENTS.c.event_time)


def checked_event(row: Sequence[Any], shown: str) -> dict[str, Any]:
    """The event of a `dws_ol_events` row (`EVENT_COLUMNS` and the body), checked like any file
    of the workspace: the database can be edited by hand, or restored from another version,
    and what is sent to a catalog must be the RunEvent that was spooled. A body that is not
    one, or that disagrees with the columns it was stored under, is damage
    (`WorkspaceConfigError` naming the row; `shown` names the store)."""
    event_id, run_id, event_type, event_time, body = row
    if type(body) is not str:
        raise damaged_event(shown, event_id, f"its body is not text ({_shown(body)})")
    try:
        event = orjson.loads(body)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        raise damaged_event(shown, event_id, f"its body is not a JSON object ({_shown(body)})")
    columns, problems = _key_columns(event)
    if problems:
        raise damaged_event(
            shown,
            event_id,
            f"its body is not an OpenLineage RunEvent (missing or invalid {', '.join(problems)})",
        )
    stored = {"run_id": run_id, "event_type": event_type, "event_time": event_time}
    for name, value in stored.items():
        if value != columns[name]:
            raise damaged_event(
                shown,
                event_id,
                f"its {name} column {_shown(value)} is not its body's ({_shown(columns[name])})",
            )
    return event


def insert_events(
    connection: Connection,
    workspace_id: int,
    rows: Sequence[dict[str, Any]],
    *,
    spooled: str,
    pending: bool = True,
) -> int:
    """Insert the `event_row`s whose key the workspace's outbox does not hold yet, in order;
    returns how many. The caller holds the workspace's write lock (no two inserters race for
    a key, and ids are committed in increasing order)."""
    fresh: dict[Key, dict[str, Any]] = {}
    for row in rows:
        fresh.setdefault((row["run_id"], row["event_type"]), row)
    run_ids = sorted({run_id for run_id, _ in fresh})
    for start in range(0, len(run_ids), MARK_CHUNK):
        for run_id, event_type in connection.execute(
            select(_EVENTS.c.run_id, _EVENTS.c.event_type).where(
                _EVENTS.c.workspace_id == workspace_id,
                _EVENTS.c.run_id.in_(run_ids[start : start + MARK_CHUNK]),
            )
        ):
            fresh.pop((run_id, event_type), None)
    if fresh:
        connection.execute(
            insert(_EVENTS),
            [
                {**row, "workspace_id": workspace_id, "spooled": spooled, "pending": pending}
                for row in fresh.values()
            ],
        )
    return len(fresh)


def pending_page(connection: Connection, ws_id: int, after: int) -> list[Any]:
    """The rows (`EVENT_COLUMNS` and the body; see `checked_event`) of the next `PAGE_SIZE`
    pending events after id `after`, in spool order."""
    return list(
        connection.execute(
            select(*EVENT_COLUMNS, _EVENTS.c.body)
            .where(
                _EVENTS.c.workspace_id == ws_id,
                _EVENTS.c.pending,
                _EVENTS.c.id > after,
            )
            .order_by(_EVENTS.c.id)
            .limit(PAGE_SIZE)
        ).all()
    )


def pending_count(connection: Connection, ws_id: int) -> int:
    return int(
        connection.execute(
            select(func.count())
            .select_from(_EVENTS)
            .where(_EVENTS.c.workspace_id == ws_id, _EVENTS.c.pending)
        ).scalar()
        or 0
    )


def first_pending_row(connection: Connection, ws_id: int) -> Any:
    """The row (see `checked_event`) of the first pending event in spool order, or None."""
    return connection.execute(
        select(*EVENT_COLUMNS, _EVENTS.c.body)
        .where(
            _EVENTS.c.workspace_id == ws_id,
            _EVENTS.c.pending,
        )
        .order_by(_EVENTS.c.id)
        .limit(1)
    ).first()


def check_pending_flags(connection: Connection, ws_id: int, shown: str) -> None:
    """Refuse an outbox whose `pending` column holds something other than true or false:
    SQLite keeps any value in a BOOLEAN column, and a damaged one would make its event read as
    delivered (never sent) or pending by chance. PostgreSQL's boolean holds nothing else."""
    if connection.dialect.name != "sqlite":
        return
    # Ranges the (workspace, pending, id) index answers without a scan, one query each (SQLite
    # does not split an OR into ranges): it orders every number before any text or blob, so
    # `> 1` also finds those.
    flag = type_coerce(_EVENTS.c.pending, Integer)
    row = None
    for condition in (flag > 1, flag < 0, and_(flag > 0, flag < 1)):
        row = connection.execute(
            select(_EVENTS.c.id, flag).where(_EVENTS.c.workspace_id == ws_id, condition).limit(1)
        ).first()
        if row is not None:
            break
    if row is not None:
        raise damaged_event(
            shown, row[0], f"its pending column {_shown(row[1])} is neither true (1) nor false (0)"
        )


def archive_page(
    connection: Connection, ws_id: int, after: int, since: dt.datetime | None
) -> list[Any]:
    """The rows (see `checked_event`) of the next `PAGE_SIZE` events, pending or delivered,
    after id `after`; with `since`, those whose eventTime is at or after it."""
    query = select(*EVENT_COLUMNS, _EVENTS.c.body).where(
        _EVENTS.c.workspace_id == ws_id, _EVENTS.c.id > after
    )
    if since is not None:
        query = query.where(_EVENTS.c.event_time >= time_key(since))
    return list(connection.execute(query.order_by(_EVENTS.c.id).limit(PAGE_SIZE)).all())


def archive_count(connection: Connection, ws_id: int, since: dt.datetime | None) -> int:
    query = select(func.count()).select_from(_EVENTS).where(_EVENTS.c.workspace_id == ws_id)
    if since is not None:
        query = query.where(_EVENTS.c.event_time >= time_key(since))
    return int(connection.execute(query).scalar() or 0)


def _mark(connection: Connection, ws_id: int, ids: Sequence[int]) -> int:
    """Mark events delivered; returns how many were pending (a counter must not count an
    event another deliverer marked already)."""
    marked = 0
    for start in range(0, len(ids), MARK_CHUNK):
        marked += connection.execute(
            update(_EVENTS)
            .where(
                _EVENTS.c.workspace_id == ws_id,
                _EVENTS.c.pending,
                _EVENTS.c.id.in_(ids[start : start + MARK_CHUNK]),
            )
            .values(pending=False)
        ).rowcount
    return marked


# -------------------------------------------------------------------------- delivery state


@dataclass
class DeliveryState:
    """The workspace's `dws_ol_delivery` row."""

    holder: str | None = None
    lease_until: float = 0.0
    delivered: int = 0
    attempts: int = 0
    next_attempt_at: str | None = None
    last_error: str | None = None
    last_error_at: str | None = None
    last_delivery_at: str | None = None


_DELIVERY_COLUMNS = [getattr(_DELIVERY.c, name) for name in DeliveryState.__dataclass_fields__]


def read_state(connection: Connection, ws_id: int, shown: str) -> DeliveryState:
    """The delivery row (defaults if the workspace has none yet), checked: a value no
    deliverer could have written is a `WorkspaceConfigError` naming it (`shown` names the
    store), not a wrong count, a lease that never ends, or a crash further on."""
    row = connection.execute(
        select(*_DELIVERY_COLUMNS).where(_DELIVERY.c.workspace_id == ws_id)
    ).first()
    if row is None:
        return DeliveryState()
    state = DeliveryState(*row)
    for name, expected, ok in (
        ("holder", "text or NULL", _text_or_none),
        ("lease_until", "a number of seconds", _seconds),
        ("delivered", "a count", _count),
        ("attempts", "a count", _count),
        ("last_error", "text or NULL", _text_or_none),
    ):
        value = getattr(state, name)
        if not ok(value):
            raise damaged_delivery(shown, ws_id, f"{name} {_shown(value)} is not {expected}")
    for name in ("next_attempt_at", "last_error_at", "last_delivery_at"):
        value = getattr(state, name)
        if value is not None:
            try:
                if type(value) is not str:
                    raise OutboxError("not text")
                parse_time(value, what=name)
            except (OutboxError, OverflowError):
                raise damaged_delivery(
                    shown, ws_id, f"{name} {_shown(value)} is not an ISO time"
                ) from None
    state.lease_until = float(state.lease_until)
    return state


def _text_or_none(value: Any) -> bool:
    return value is None or type(value) is str


def _seconds(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def take_lease(
    connection: Connection, ws_id: int, holder: str, *, wall: float, until: float
) -> bool:
    """Claim delivery for `holder` until `until` unless a lease live at `wall` is held."""
    taken = connection.execute(
        update(_DELIVERY)
        .where(
            _DELIVERY.c.workspace_id == ws_id,
            (_DELIVERY.c.holder.is_(None)) | (_DELIVERY.c.lease_until < wall),
        )
        .values(holder=holder, lease_until=until)
    ).rowcount
    if taken:
        return True
    exists = connection.execute(
        select(_DELIVERY.c.workspace_id).where(_DELIVERY.c.workspace_id == ws_id)
    ).first()
    if exists is not None:
        return False
    # Registered before the outbox had a row (Database.workspace_id adds it).
    connection.execute(
        insert(_DELIVERY).values(workspace_id=ws_id, holder=holder, lease_until=until)
    )
    return True


def release_lease(connection: Connection, ws_id: int, holder: str) -> None:
    connection.execute(
        update(_DELIVERY)
        .where(
            _DELIVERY.c.workspace_id == ws_id,
            _DELIVERY.c.holder == holder,
        )
        .values(holder=None, lease_until=0.0)
    )


def record_checkpoint(
    connection: Connection,
    ws_id: int,
    holder: str,
    ids: Sequence[int],
    *,
    at: dt.datetime,
    lease_seconds: float,
) -> bool:
    """Mark `ids` delivered and renew the lease for `lease_seconds` from now (once the
    marking got the write lock); False if the lease is no longer `holder`'s (it expired and
    another deliverer took it)."""
    marked = _mark(connection, ws_id, ids) if ids else 0
    values: dict[str, Any] = {"lease_until": time.time() + lease_seconds}
    if ids:
        values.update(
            delivered=_DELIVERY.c.delivered + marked,
            attempts=0,
            next_attempt_at=None,
            last_delivery_at=iso_or_none(at),
        )
    return _update_held(connection, ws_id, holder, marked, values)


def record_failure(
    connection: Connection,
    ws_id: int,
    holder: str,
    ids: Sequence[int],
    *,
    attempts: int,
    error: str,
    at: dt.datetime,
    next_attempt_at: dt.datetime,
    succeeded: bool,
) -> None:
    """Mark `ids` (sent before the failure) delivered and record the failure: the run of
    `attempts`, its `error`, and when to try again."""
    values: dict[str, Any] = {
        "attempts": attempts,
        "last_error": error,
        "last_error_at": iso_or_none(at),
        "next_attempt_at": iso_or_none(next_attempt_at),
    }
    marked = _mark(connection, ws_id, ids) if ids else 0
    if succeeded:
        values["last_delivery_at"] = iso_or_none(at)
    values["delivered"] = _DELIVERY.c.delivered + marked
    _update_held(connection, ws_id, holder, marked, values)


def _update_held(
    connection: Connection, ws_id: int, holder: str, marked: int, values: dict[str, Any]
) -> bool:
    """Set `values` in the delivery row if `holder` still holds the lease; else count the
    `marked` events all the same (they were sent). True if the lease is `holder`'s."""
    ours = connection.execute(
        update(_DELIVERY)
        .where(
            _DELIVERY.c.workspace_id == ws_id,
            _DELIVERY.c.holder == holder,
        )
        .values(**values)
    ).rowcount
    if not ours and marked:
        connection.execute(
            update(_DELIVERY)
            .where(_DELIVERY.c.workspace_id == ws_id)
            .values(delivered=_DELIVERY.c.delivered + marked)
        )
    return bool(ours)
