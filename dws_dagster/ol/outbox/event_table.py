"""The outbox's events in the workspace store (`dws_ol_events`, a row per spooled event):
inserting them in spool order, reading them a page at a time (pending, or the whole archive),
counting them, and marking them delivered.

Functions over a connection the caller opened: `outbox.Outbox` decides the transactions, so
that none is held while a catalog answers. Each function is one short statement or a few.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Integer, and_, func, insert, select, type_coerce, update
from sqlalchemy.engine import Connection

from dws_dagster.ol.outbox.damaged_rows import damaged_event, quoted
from dws_dagster.ol.outbox.event_rows import Key
from dws_dagster.ol.outbox.times import time_key
from dws_dagster.store import schema

#: Events read per query while delivering or reading the archive.
PAGE_SIZE = 500
#: Ids per UPDATE ... WHERE id IN (...) (SQLite's default limit of bound parameters is 32766).
MARK_CHUNK = 500

_EVENTS = schema.ol_events

#: The columns `checked_event` checks, in the order the queries below select them.
EVENT_COLUMNS = (_EVENTS.c.id, _EVENTS.c.run_id, _EVENTS.c.event_type, _EVENTS.c.event_time)


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
            shown, row[0], f"its pending column {quoted(row[1])} is neither true (1) nor false (0)"
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


def mark_delivered(connection: Connection, ws_id: int, ids: Sequence[int]) -> int:
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
