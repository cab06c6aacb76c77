"""The outbox's delivery state in the workspace store (the workspace's `dws_ol_delivery` row:
the lease, the count of delivered events, the current run of failures): read and checked, the
lease taken, renewed and released, and each checkpoint or failure recorded with the events it
marks delivered.

Functions over a connection the caller opened: `outbox.Outbox` decides the transactions, so
that none is held while a catalog answers. Each function is one short statement or a few.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from dws_dagster.errors import OutboxError
from dws_dagster.ol.outbox.damaged_rows import damaged_delivery, quoted
from dws_dagster.ol.outbox.event_table import mark_delivered
from dws_dagster.ol.outbox.times import parse_time
from dws_dagster.ol.timestamps import iso_or_none
from dws_dagster.store import schema

_DELIVERY = schema.ol_delivery


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
            raise damaged_delivery(shown, ws_id, f"{name} {quoted(value)} is not {expected}")
    for name in ("next_attempt_at", "last_error_at", "last_delivery_at"):
        value = getattr(state, name)
        if value is not None:
            try:
                if type(value) is not str:
                    raise OutboxError("not text")
                parse_time(value, what=name)
            except (OutboxError, OverflowError):
                raise damaged_delivery(
                    shown, ws_id, f"{name} {quoted(value)} is not an ISO time"
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
    marked = mark_delivered(connection, ws_id, ids) if ids else 0
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
    marked = mark_delivered(connection, ws_id, ids) if ids else 0
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
