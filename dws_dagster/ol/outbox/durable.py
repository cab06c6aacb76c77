"""A durable outbox for OpenLineage events in the workspace store, so that nothing is lost while
a catalog is down and no event is sent twice by two deliverers.

**Spooling** inserts each event into `dws_ol_events` under the workspace's write lock, keyed
by (workspace, runId, eventType): re-spooling an event adds nothing. The lineage sensor spools
inside the transaction that applies the batch, so a batch's lineage and its events commit
together or not at all. Spool order is the row id: spoolers hold the write lock until they
commit, so ids become visible in increasing order and a deliverer reading pending rows by id
never skips one that commits later.

**Delivery** is claimed with a lease in the workspace's `dws_ol_delivery` row (`holder`,
`lease_until`), taken and renewed by short conditional UPDATEs, never by a transaction held
while the transport is called: a catalog that answers in 30 s must not hold a row lock (or,
on SQLite, the database's write lock) for 30 s. Rows are not claimed one by one
(`FOR UPDATE SKIP LOCKED`): two deliverers sending different events at once would send a
run's COMPLETE before its START; one deliverer per workspace keeps spool order, and a second
one finding the lease held returns `busy`. A deliverer that died stops renewing, and its lease
expires after `lease_seconds` (the lease is renewed well before, so keep it above the
transport's timeout; clocks of the machines must agree within a fraction of it).

Events are marked delivered in checkpoints: after each `CHECKPOINT_SECONDS` of sending (or
sooner when half the lease is spent), at the end of a call and on the first failure, each in
one short transaction that also renews the lease. A marking per event would cost a commit
(an fsync) per event; a crash re-sends at most the events sent since the last checkpoint,
in order, and catalogs deduplicate by (runId, eventType, eventTime): delivery is
at-least-once, in spool order, one event at a time, and the first failure ends the call, so a
run's later event is never sent before an earlier one. Delivered events stay in the table:
they are the archive `events()` and `replay()` read.

The tables' rows and statements are in `event_rows`, `event_table` and `delivery_table`, the
reports in `report`; this module holds the transactions and the delivery loop.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from dws_dagster.errors import OutboxError, WorkspaceConfigError
from dws_dagster.ol.outbox.delivery_table import (
    DeliveryState,
    read_state,
    record_checkpoint,
    record_failure,
    release_lease,
    take_lease,
)
from dws_dagster.ol.outbox.event_rows import checked_event, describe_event, event_row
from dws_dagster.ol.outbox.event_table import (
    PAGE_SIZE,
    archive_count,
    archive_page,
    check_pending_flags,
    insert_events,
    pending_count,
    pending_page,
)
from dws_dagster.ol.outbox.status_report import (
    DeliveryReport,
    OutboxStatus,
    delivery_report,
    read_status,
)
from dws_dagster.ol.outbox.times import parse_time_or_none
from dws_dagster.ol.timestamps import assume_utc, iso_or_none, utc_now
from dws_dagster.ol.transport.deadline import watching
from dws_dagster.ol.transport.emitter import Emitter
from dws_dagster.ol.transport.factory import prepare_default_file
from dws_dagster.ol.transport.text import error_text, redact

if TYPE_CHECKING:
    from openlineage.client.transport import Transport

    from dws_dagster.store.database import Database
    from dws_dagster.workspace.definition import Workspace

BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 300.0
#: How long a deliverer's claim lasts without renewal; a deliverer that died is replaced once
#: it runs out. Above any transport timeout (the lease is renewed when half of it is spent).
LEASE_SECONDS = 120.0
#: While sending, events are marked delivered at least this often (a crash re-sends at most
#: what was sent since).
CHECKPOINT_SECONDS = 1.0
MAX_ERROR_CHARS = 2000
#: The longest one event may take to be sent, answer included, however slowly the catalog
#: answers (the transport's timeout bounds each read only).
DEADLINE_SECONDS = 30.0


class Outbox:
    """The durable spool of OpenLineage events of one workspace, in its store.

    The object holds no state but its settings: every call reads the database, so any number
    of objects, processes and machines share one outbox.
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        backoff_base: float = BACKOFF_BASE_SECONDS,
        backoff_cap: float = BACKOFF_CAP_SECONDS,
        lease_seconds: float | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.workspace = workspace
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.lease_seconds = float(LEASE_SECONDS if lease_seconds is None else lease_seconds)
        if self.lease_seconds <= 0:
            raise OutboxError(f"lease_seconds must be positive, got {lease_seconds}")
        self._rng = rng or random.Random()

    # ------------------------------------------------------------------ database

    @property
    def store(self) -> Any:
        return self.workspace.store

    @property
    def db(self) -> Database:
        return self.store.db

    @property
    def shown(self) -> str:
        """The store holding the outbox, as it may be printed (never its password)."""
        return str(self.store.shown)

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Database errors as DwsErrors naming the store (never its password)."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise self.db.describe_error(exc, f"{action} (OpenLineage outbox)") from None

    @contextmanager
    def _reading(self) -> Iterator[tuple[Connection, int]]:
        ws_id = self.store.workspace_id
        with self._guard("read"), self.db.transaction() as connection:
            yield connection, ws_id

    @contextmanager
    def _writing(self) -> Iterator[tuple[Connection, int]]:
        """A short transaction of the deliverer: it does not take the workspace's write lock
        (delivery does not change lineage). Its first statement is a write, so SQLite takes
        its write lock at once (waiting for it) instead of upgrading a stale read."""
        ws_id = self.store.workspace_id
        with self._guard("write"), self.db.transaction() as connection:
            yield connection, ws_id

    # ------------------------------------------------------------------ spooling

    def spool(self, events: Sequence[Mapping[str, Any]]) -> int:
        """Durably add the events whose (runId, eventType) the outbox does not hold yet, so a
        caller that re-processes after a crash adds no duplicates. Returns how many were added.
        All or nothing: one invalid event refuses the whole call. Inside an open write
        transaction (the sensor's batch) the events commit with it."""
        rows = [event_row(event, index) for index, event in enumerate(events)]
        if not rows:
            return 0
        ws_id = self.store.workspace_id
        with self._guard("spool events"), self.db.transaction(write_for=ws_id) as connection:
            return insert_events(connection, ws_id, rows, spooled=iso_or_none(utc_now()) or "")

    # ------------------------------------------------------------------ delivery

    def deliver(
        self,
        transport: Transport,
        *,
        budget_seconds: float = 30.0,
        now: dt.datetime | None = None,
        ignore_backoff: bool = False,
        deadline_seconds: float | None = None,
    ) -> DeliveryReport:
        """Send pending events oldest first until none is left, the budget is spent, or one
        fails; a failure sets the next attempt time (exponential backoff with jitter), before
        which calls send nothing unless `ignore_backoff`. Another deliverer holding the lease
        makes the call return at once with `busy`.

        No event starts once `budget_seconds` are spent, and each must be sent, its answer
        read, within `deadline_seconds` (default `DEADLINE_SECONDS`), or it fails
        (`DeliveryDeadlineError`) and stays pending: a call lasts at most its budget plus
        one deadline, however slowly a catalog answers."""
        if deadline_seconds is not None and not deadline_seconds > 0:
            raise OutboxError(
                f"the delivery deadline must be a positive number of seconds, got "
                f"{deadline_seconds}"
            )
        deadline = DEADLINE_SECONDS if deadline_seconds is None else deadline_seconds
        now = assume_utc(now or utc_now())
        if transport.kind == "noop":
            return self._report(self._state(), sent=0, failed=0, paused=True)
        if self.db.in_transaction:
            raise OutboxError(
                "Outbox.deliver was called inside a transaction of the workspace store; it "
                "must not hold one while a catalog answers: deliver after the block ends"
            )
        state = self.check()
        if self._waiting(state, now) and not ignore_backoff:
            return self._report(state, sent=0, failed=0)
        if self._pending_count() == 0:
            return self._report(state, sent=0, failed=0)  # an idle tick writes nothing
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        leased = self._take_lease(holder)
        if leased is None:  # another process is sending these very events
            return self._report(self._state(), sent=0, failed=0, busy=True)
        state = leased
        try:
            if self._waiting(state, now) and not ignore_backoff:
                return self._report(state, sent=0, failed=0)  # it failed just now
            return self._deliver_leased(transport, holder, state, budget_seconds, deadline, now)
        finally:
            self._release(holder)

    @staticmethod
    def _waiting(state: DeliveryState, now: dt.datetime) -> bool:
        waiting_until = parse_time_or_none(state.next_attempt_at)
        return waiting_until is not None and now < waiting_until

    def _take_lease(self, holder: str) -> DeliveryState | None:
        """Claim delivery for `holder` unless a live lease is held; the state when taken."""
        wall = time.time()
        with self._writing() as (connection, ws_id):
            if not take_lease(
                connection, ws_id, holder, wall=wall, until=wall + self.lease_seconds
            ):
                return None
            return read_state(connection, ws_id, self.shown)

    def _release(self, holder: str) -> None:
        with self._writing() as (connection, ws_id):
            release_lease(connection, ws_id, holder)

    def _pending_page(self, after: int) -> list[Any]:
        with self._reading() as (connection, ws_id):
            return pending_page(connection, ws_id, after)

    def _deliver_leased(
        self,
        transport: Transport,
        holder: str,
        state: DeliveryState,
        budget_seconds: float,
        deadline: float,
        now: dt.datetime,
    ) -> DeliveryReport:
        started = time.monotonic()
        renew_every = min(CHECKPOINT_SECONDS, self.lease_seconds / 2)
        last_mark = started
        unmarked: list[int] = []
        sent = 0
        failure: tuple[dict[str, Any], Exception, dt.datetime] | None = None
        damage: WorkspaceConfigError | None = None
        after = 0
        stop = False

        def at() -> dt.datetime:
            return now + dt.timedelta(seconds=time.monotonic() - started)

        prepare_default_file(transport, self.workspace)
        with Emitter(transport) as emitter:
            while not stop:
                page = self._pending_page(after)
                if not page:
                    break
                for row in page:
                    if time.monotonic() - started >= budget_seconds:
                        stop = True
                        break
                    if time.monotonic() - last_mark >= renew_every:
                        # Marks what was sent, and renews the lease before the next send.
                        if not self._checkpoint(holder, unmarked, at()):
                            unmarked, stop = [], True  # the lease was lost: stop sending
                            break
                        unmarked, last_mark = [], time.monotonic()
                    event_id, body = row[0], row[-1]
                    try:
                        event = checked_event(row, self.shown)
                    except WorkspaceConfigError as exc:
                        damage, stop = exc, True  # not the catalog's failure: no backoff
                        break
                    try:
                        emitter.emit(event, body.encode(), deadline)
                    except Exception as exc:
                        failure = (event, exc, at())
                        stop = True
                        break
                    unmarked.append(event_id)
                    sent += 1
                    after = event_id
        if failure is None:
            if unmarked:
                self._checkpoint(holder, unmarked, at())
            if damage is not None:  # what was sent before it is marked; it is named
                raise damage
        else:
            event, error, when = failure
            self._failed(
                holder,
                unmarked,
                event,
                error,
                transport,
                when,
                succeeded=sent > 0,
                attempts=state.attempts,
            )
        return self._report(self._state(), sent=sent, failed=int(failure is not None))

    def _checkpoint(self, holder: str, ids: Sequence[int], at: dt.datetime) -> bool:
        """Mark `ids` delivered and renew the lease, in one short transaction; False if the
        lease is no longer ours (it expired and another deliverer took it)."""
        with self._writing() as (connection, ws_id):
            return record_checkpoint(
                connection, ws_id, holder, ids, at=at, lease_seconds=self.lease_seconds
            )

    def _failed(
        self,
        holder: str,
        ids: Sequence[int],
        event: Mapping[str, Any],
        exc: Exception,
        transport: Transport,
        at: dt.datetime,
        *,
        succeeded: bool,
        attempts: int,
    ) -> None:
        """Mark what was sent and record the failure and the next attempt time."""
        message = redact(f"sending {describe_event(event)} failed: {error_text(exc)}", transport)
        attempts = (0 if succeeded else attempts) + 1
        next_attempt_at = at + dt.timedelta(seconds=self.backoff(attempts))
        with self._writing() as (connection, ws_id):
            record_failure(
                connection,
                ws_id,
                holder,
                ids,
                attempts=attempts,
                error=message[:MAX_ERROR_CHARS],
                at=at,
                next_attempt_at=next_attempt_at,
                succeeded=succeeded,
            )

    def backoff(self, attempts: int) -> float:
        """Seconds to wait after `attempts` failures in a row: doubling from `backoff_base` up to
        `backoff_cap`, times a random factor in [0.5, 1] so that processes spread out."""
        delay = min(self.backoff_cap, self.backoff_base * 2.0 ** min(attempts - 1, 60))
        return delay * (0.5 + self._rng.random() / 2)

    # ------------------------------------------------------------------ state

    def check(self) -> DeliveryState:
        """The delivery state, after checking what a delivery relies on before it sends
        anything (the delivery row, the pending flags): damage is a `WorkspaceConfigError`
        naming the row, so a sensor's tick can fail before it applies anything. Event rows
        are checked as they are read."""
        with self._reading() as (connection, ws_id):
            state = read_state(connection, ws_id, self.shown)
            check_pending_flags(connection, ws_id, self.shown)
            return state

    def _state(self) -> DeliveryState:
        with self._reading() as (connection, ws_id):
            return read_state(connection, ws_id, self.shown)

    def _pending_count(self) -> int:
        with self._reading() as (connection, ws_id):
            return pending_count(connection, ws_id)

    def _report(
        self,
        state: DeliveryState,
        *,
        sent: int,
        failed: int,
        busy: bool = False,
        paused: bool = False,
    ) -> DeliveryReport:
        return delivery_report(
            state, pending=self._pending_count(), sent=sent, failed=failed, busy=busy, paused=paused
        )

    # ------------------------------------------------------------------ reading

    def status(self) -> OutboxStatus:
        with self._reading() as (connection, ws_id):
            return read_status(connection, ws_id, self.shown)

    def events(self, since: dt.datetime | None = None) -> Iterator[dict[str, Any]]:
        """Every event ever spooled, in spool order, read a page at a time; with `since`, those
        whose eventTime is at or after it (a naive `since` is UTC)."""
        after = 0
        while True:
            with self._reading() as (connection, ws_id):
                rows = archive_page(connection, ws_id, after, since)
            for row in rows:
                yield checked_event(row, self.shown)
            if len(rows) < PAGE_SIZE:
                return
            after = rows[-1][0]

    def count(self, since: dt.datetime | None = None) -> int:
        """How many events `events(since)` gives."""
        with self._reading() as (connection, ws_id):
            return archive_count(connection, ws_id, since)

    def replay(
        self,
        transport: Transport,
        since: dt.datetime | None = None,
        progress: Callable[[dict[str, Any]], Any] | None = None,
        deadline_seconds: float = DEADLINE_SECONDS,
    ) -> int:
        """Send archived events again, in order (to backfill a new catalog); what is pending or
        delivered is not touched. Returns how many were sent."""
        if transport.kind == "noop":
            raise OutboxError(
                "OpenLineage is disabled (noop transport): a replay would reach no "
                "catalog; configure a transport first"
            )
        sent = 0
        prepare_default_file(transport, self.workspace)
        for event in self.events(since):
            try:
                with watching(deadline_seconds):
                    transport.emit(event)  # type: ignore[arg-type]
            except Exception as exc:
                message = redact(error_text(exc), transport)[:MAX_ERROR_CHARS]
                raise OutboxError(
                    f"replay stopped after {sent} event(s): sending {describe_event(event)} "
                    f"failed: {message}; fix the transport, then resume with 'dws-dagster "
                    f"openlineage replay --since {event.get('eventTime')}'"
                ) from None
            sent += 1
            if progress is not None:
                progress(event)
        return sent
