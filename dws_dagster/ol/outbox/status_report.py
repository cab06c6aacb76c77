"""What the outbox tells its callers: the report of one delivery call (`DeliveryReport`, which
the lineage sensor turns into its tick's outcome) and the outbox at a glance (`OutboxStatus`,
which `dws-dagster openlineage status` prints), both read from the outbox's tables.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.engine import Connection

from dws_dagster.ol.outbox.delivery_table import DeliveryState, read_state
from dws_dagster.ol.outbox.event_rows import checked_event
from dws_dagster.ol.outbox.event_table import (
    check_pending_flags,
    first_pending_row,
    pending_count,
)
from dws_dagster.ol.outbox.times import parse_time_or_none
from dws_dagster.ol.timestamps import iso_or_none


@dataclass(frozen=True)
class DeliveryReport:
    """What one `Outbox.deliver` call did.

    `failed` is 1 when this call stopped on an error; `last_error`, `attempts` and
    `next_attempt_at` describe the current run of failures (None/0 once delivery works).
    `busy`: another deliverer holds the lease, so this call sent nothing; `paused`: the
    transport is disabled (noop), so events stay pending.
    """

    sent: int
    failed: int
    pending: int
    next_attempt_at: dt.datetime | None = None
    last_error: str | None = None
    attempts: int = 0
    busy: bool = False
    paused: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "next_attempt_at": iso_or_none(self.next_attempt_at)}


def delivery_report(
    state: DeliveryState,
    *,
    pending: int,
    sent: int,
    failed: int,
    busy: bool = False,
    paused: bool = False,
) -> DeliveryReport:
    """The report of a call that ended with the delivery row `state` and `pending` events."""
    failing = state.attempts > 0
    return DeliveryReport(
        sent=sent,
        failed=failed,
        pending=pending,
        next_attempt_at=parse_time_or_none(state.next_attempt_at) if failing else None,
        last_error=state.last_error if failing else None,
        attempts=state.attempts,
        busy=busy,
        paused=paused,
    )


@dataclass(frozen=True)
class OutboxStatus:
    """The outbox at a glance. `oldest_pending_time` is the eventTime of the first pending event
    (in spool order); `attempts` counts failed attempts since the last success; `store` is the
    workspace store holding the outbox (no password); `deliverer` who holds the delivery lease
    now (host:pid:call), until `lease_until` (None: nobody is delivering)."""

    pending: int
    delivered: int
    oldest_pending_time: str | None
    attempts: int
    next_attempt_at: dt.datetime | None
    last_error: str | None
    last_error_at: dt.datetime | None
    last_delivery_at: dt.datetime | None
    store: str
    deliverer: str | None
    lease_until: dt.datetime | None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("next_attempt_at", "last_error_at", "last_delivery_at", "lease_until"):
            data[name] = iso_or_none(data[name])
        return data


def read_status(connection: Connection, ws_id: int, shown: str) -> OutboxStatus:
    """The outbox of workspace `ws_id` in the store `shown` (as it may be printed); damage to
    what it reads (the delivery row, the pending flags, the first pending event) is a
    `WorkspaceConfigError`."""
    state = read_state(connection, ws_id, shown)
    check_pending_flags(connection, ws_id, shown)
    pending = pending_count(connection, ws_id)
    first = first_pending_row(connection, ws_id) if pending else None
    leased = state.holder is not None and state.lease_until > time.time()
    return OutboxStatus(
        pending=pending,
        delivered=state.delivered,
        oldest_pending_time=None if first is None else checked_event(first, shown)["eventTime"],
        attempts=state.attempts,
        next_attempt_at=parse_time_or_none(state.next_attempt_at),
        last_error=state.last_error,
        last_error_at=parse_time_or_none(state.last_error_at),
        last_delivery_at=parse_time_or_none(state.last_delivery_at),
        store=shown,
        deliverer=state.holder if leased else None,
        lease_until=dt.datetime.fromtimestamp(state.lease_until, dt.UTC) if leased else None,
    )
