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
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from dws_dagster.errors import DwsError
from dws_dagster.ol.transport_emit import Emitter
from dws_dagster.ol.transport_text import error_text, redact
from dws_dagster.workspace.store import schema

if TYPE_CHECKING:
    from openlineage.client.transport import Transport

    from dws_dagster.workspace.store.database import Database
    from dws_dagster.workspace.workspace import Workspace

BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 300.0
#: How long a deliverer's claim lasts without renewal; a deliverer that died is replaced once
#: it runs out. Above any transport timeout (the lease is renewed when half of it is spent).
LEASE_SECONDS = 120.0
#: While sending, events are marked delivered at least this often (a crash re-sends at most
#: what was sent since).
CHECKPOINT_SECONDS = 1.0
#: Pending events read per query while delivering or reading the archive.
PAGE_SIZE = 500
#: Ids per UPDATE ... WHERE id IN (...) (SQLite's default limit of bound parameters is 32766).
MARK_CHUNK = 500
MAX_ERROR_CHARS = 2000
#: `dws_ol_events.event_type` is a String(16): OpenLineage's types are at most 8 characters.
MAX_EVENT_TYPE_CHARS = 16

Key = tuple[str, str]

_EVENTS = schema.ol_events
_DELIVERY = schema.ol_delivery


class OutboxError(DwsError):
    """The OpenLineage outbox cannot take, read or send events as asked."""


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def parse_time(text: str, *, what: str = "time") -> dt.datetime:
    """An aware datetime from ISO-8601 text: a date means its midnight, no zone means UTC."""
    try:
        value = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise OutboxError(
            f"{what}: {text!r} is not an ISO-8601 date or datetime; write it like 2026-05-01 or "
            "2026-05-01T12:00:00+00:00"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="microseconds")


def _from_iso(text: str | None) -> dt.datetime | None:
    return None if text is None else parse_time(text)


def time_key(value: dt.datetime) -> str:
    """`value` as stored in `dws_ol_events.event_time`: UTC, fixed width, so that comparing
    the text compares the instants (`events(since)` filters in the database)."""
    return _aware(value).astimezone(dt.UTC).isoformat(timespec="microseconds")


def event_key(event: Mapping[str, Any]) -> Key:
    """What makes two events the same for the outbox: (run.runId, eventType)."""
    run = event.get("run")
    return (
        str(run.get("runId")) if isinstance(run, Mapping) else "",
        str(event.get("eventType", "")),
    )


def _describe(event: Mapping[str, Any]) -> str:
    run_id, event_type = event_key(event)
    return f"run {run_id} {event_type} ({event.get('eventTime')})"


def event_row(event: Any, index: int = 0) -> dict[str, Any]:
    """Validate one event and give its `dws_ol_events` columns (no workspace, no spool time):
    `run_id`, `event_type`, `event_time` (see `time_key`) and `body` (JSON, sorted keys)."""
    if not isinstance(event, Mapping):
        raise OutboxError(
            f"event #{index} is a {type(event).__name__}, not an OpenLineage "
            "RunEvent dict; pass the dicts the event builders return"
        )
    run: Any = event.get("run")
    problems = []
    if (
        not isinstance(run, Mapping)
        or not isinstance(run.get("runId"), str)
        or not run.get("runId")
    ):
        problems.append("run.runId")
    event_type = event.get("eventType")
    if not isinstance(event_type, str) or not event_type or len(event_type) > MAX_EVENT_TYPE_CHARS:
        problems.append("eventType")
    try:
        when = parse_time(event.get("eventTime"))  # type: ignore[arg-type]
    except OutboxError:
        problems.append("eventTime")
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
            f"event #{index} ({_describe(event)}) is not JSON: {exc}; pass plain "
            "JSON data (strings, numbers, lists, dicts)"
        ) from None
    return {
        "run_id": run["runId"],
        "event_type": event_type,
        "event_time": time_key(when),
        "body": body.decode(),
    }


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
        return {**asdict(self), "next_attempt_at": _iso(self.next_attempt_at)}


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
            data[name] = _iso(data[name])
        return data


@dataclass
class _Delivery:
    """The workspace's `dws_ol_delivery` row."""

    holder: str | None = None
    lease_until: float = 0.0
    delivered: int = 0
    attempts: int = 0
    next_attempt_at: str | None = None
    last_error: str | None = None
    last_error_at: str | None = None
    last_delivery_at: str | None = None


_DELIVERY_COLUMNS = [getattr(_DELIVERY.c, name) for name in _Delivery.__dataclass_fields__]


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
            return insert_events(connection, ws_id, rows, spooled=_iso(utc_now()) or "")

    # ------------------------------------------------------------------ delivery

    def deliver(
        self,
        transport: Transport,
        *,
        budget_seconds: float = 30.0,
        now: dt.datetime | None = None,
        ignore_backoff: bool = False,
    ) -> DeliveryReport:
        """Send pending events oldest first until none is left, the budget is spent, or one
        fails; a failure sets the next attempt time (exponential backoff with jitter), before
        which calls send nothing unless `ignore_backoff`. Another deliverer holding the lease
        makes the call return at once with `busy`."""
        now = _aware(now or utc_now())
        if transport.kind == "noop":
            return self._report(self._state(), sent=0, failed=0, paused=True)
        if self.db.in_transaction:
            raise OutboxError(
                "Outbox.deliver was called inside a transaction of the workspace store; it "
                "must not hold one while a catalog answers: deliver after the block ends"
            )
        state = self._state()
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
            return self._deliver_leased(transport, holder, state, budget_seconds, now)
        finally:
            self._release(holder)

    @staticmethod
    def _waiting(state: _Delivery, now: dt.datetime) -> bool:
        waiting_until = _from_iso(state.next_attempt_at)
        return waiting_until is not None and now < waiting_until

    def _take_lease(self, holder: str) -> _Delivery | None:
        """Claim delivery for `holder` unless a live lease is held; the state when taken."""
        wall = time.time()
        with self._writing() as (connection, ws_id):
            taken = connection.execute(
                update(_DELIVERY)
                .where(
                    _DELIVERY.c.workspace_id == ws_id,
                    (_DELIVERY.c.holder.is_(None)) | (_DELIVERY.c.lease_until < wall),
                )
                .values(holder=holder, lease_until=wall + self.lease_seconds)
            ).rowcount
            if not taken:
                exists = connection.execute(
                    select(_DELIVERY.c.workspace_id).where(_DELIVERY.c.workspace_id == ws_id)
                ).first()
                if exists is not None:
                    return None
                # Registered before the outbox had a row (Database.workspace_id adds it).
                connection.execute(
                    insert(_DELIVERY).values(
                        workspace_id=ws_id, holder=holder, lease_until=wall + self.lease_seconds
                    )
                )
            return self._read_state(connection, ws_id)

    def _release(self, holder: str) -> None:
        with self._writing() as (connection, ws_id):
            connection.execute(
                update(_DELIVERY)
                .where(
                    _DELIVERY.c.workspace_id == ws_id,
                    _DELIVERY.c.holder == holder,
                )
                .values(holder=None, lease_until=0.0)
            )

    def _pending_page(self, after: int) -> list[tuple[int, str]]:
        with self._reading() as (connection, ws_id):
            return [
                (int(row[0]), str(row[1]))
                for row in connection.execute(
                    select(_EVENTS.c.id, _EVENTS.c.body)
                    .where(
                        _EVENTS.c.workspace_id == ws_id,
                        _EVENTS.c.pending,
                        _EVENTS.c.id > after,
                    )
                    .order_by(_EVENTS.c.id)
                    .limit(PAGE_SIZE)
                )
            ]

    def _deliver_leased(
        self,
        transport: Transport,
        holder: str,
        state: _Delivery,
        budget_seconds: float,
        now: dt.datetime,
    ) -> DeliveryReport:
        started = time.monotonic()
        renew_every = min(CHECKPOINT_SECONDS, self.lease_seconds / 2)
        last_mark = started
        unmarked: list[int] = []
        sent = 0
        failure: tuple[dict[str, Any], Exception, dt.datetime] | None = None
        after = 0
        stop = False

        def at() -> dt.datetime:
            return now + dt.timedelta(seconds=time.monotonic() - started)

        with Emitter(transport) as emitter:
            while not stop:
                page = self._pending_page(after)
                if not page:
                    break
                for event_id, body in page:
                    if time.monotonic() - started >= budget_seconds:
                        stop = True
                        break
                    if time.monotonic() - last_mark >= renew_every:
                        # Marks what was sent, and renews the lease before the next send.
                        if not self._checkpoint(holder, unmarked, at()):
                            unmarked, stop = [], True  # the lease was lost: stop sending
                            break
                        unmarked, last_mark = [], time.monotonic()
                    event = _event_or_stub(body)
                    try:
                        if "__corrupt__" in event:
                            raise OutboxError(
                                f"event {event_id} of the outbox is not a JSON object; delete "
                                "that row of dws_ol_events (or restore the store from a backup)"
                            )
                        emitter.emit(event, body.encode())
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

    def _mark(self, connection: Connection, ws_id: int, ids: Sequence[int]) -> int:
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

    def _checkpoint(self, holder: str, ids: Sequence[int], at: dt.datetime) -> bool:
        """Mark `ids` delivered and renew the lease, in one short transaction; False if the
        lease is no longer ours (it expired and another deliverer took it)."""
        with self._writing() as (connection, ws_id):
            marked = self._mark(connection, ws_id, ids) if ids else 0
            values: dict[str, Any] = {"lease_until": time.time() + self.lease_seconds}
            if ids:
                values.update(
                    delivered=_DELIVERY.c.delivered + marked,
                    attempts=0,
                    next_attempt_at=None,
                    last_delivery_at=_iso(at),
                )
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
        message = redact(f"sending {_describe(event)} failed: {error_text(exc)}", transport)
        attempts = (0 if succeeded else attempts) + 1
        values: dict[str, Any] = {
            "attempts": attempts,
            "last_error": message[:MAX_ERROR_CHARS],
            "last_error_at": _iso(at),
            "next_attempt_at": _iso(at + dt.timedelta(seconds=self.backoff(attempts))),
        }
        with self._writing() as (connection, ws_id):
            marked = self._mark(connection, ws_id, ids) if ids else 0
            if succeeded:
                values["last_delivery_at"] = _iso(at)
            ours = connection.execute(
                update(_DELIVERY)
                .where(
                    _DELIVERY.c.workspace_id == ws_id,
                    _DELIVERY.c.holder == holder,
                )
                .values(delivered=_DELIVERY.c.delivered + marked, **values)
            ).rowcount
            if not ours and marked:
                connection.execute(
                    update(_DELIVERY)
                    .where(_DELIVERY.c.workspace_id == ws_id)
                    .values(delivered=_DELIVERY.c.delivered + marked)
                )

    def backoff(self, attempts: int) -> float:
        """Seconds to wait after `attempts` failures in a row: doubling from `backoff_base` up to
        `backoff_cap`, times a random factor in [0.5, 1] so that processes spread out."""
        delay = min(self.backoff_cap, self.backoff_base * 2.0 ** min(attempts - 1, 60))
        return delay * (0.5 + self._rng.random() / 2)

    # ------------------------------------------------------------------ state

    def _read_state(self, connection: Connection, ws_id: int) -> _Delivery:
        row = connection.execute(
            select(*_DELIVERY_COLUMNS).where(_DELIVERY.c.workspace_id == ws_id)
        ).first()
        if row is None:
            return _Delivery()
        state = _Delivery(*row)
        for name in ("next_attempt_at", "last_error_at", "last_delivery_at"):
            value = getattr(state, name)
            if value is not None:
                try:
                    parse_time(value, what=name)
                except DwsError:
                    raise OutboxError(
                        f"workspace store {self.shown}: the OpenLineage outbox's delivery "
                        f"state is corrupt ({name} {str(value)[:40]!r} is not an ISO time); "
                        "set it to NULL in dws_ol_delivery"
                    ) from None
        return state

    def _state(self) -> _Delivery:
        with self._reading() as (connection, ws_id):
            return self._read_state(connection, ws_id)

    def _pending_count(self) -> int:
        with self._reading() as (connection, ws_id):
            return int(
                connection.execute(
                    select(func.count())
                    .select_from(_EVENTS)
                    .where(_EVENTS.c.workspace_id == ws_id, _EVENTS.c.pending)
                ).scalar()
                or 0
            )

    def _report(
        self, state: _Delivery, *, sent: int, failed: int, busy: bool = False, paused: bool = False
    ) -> DeliveryReport:
        failing = state.attempts > 0
        return DeliveryReport(
            sent=sent,
            failed=failed,
            pending=self._pending_count(),
            next_attempt_at=_from_iso(state.next_attempt_at) if failing else None,
            last_error=state.last_error if failing else None,
            attempts=state.attempts,
            busy=busy,
            paused=paused,
        )

    # ------------------------------------------------------------------ reading

    def status(self) -> OutboxStatus:
        with self._reading() as (connection, ws_id):
            state = self._read_state(connection, ws_id)
            pending = int(
                connection.execute(
                    select(func.count())
                    .select_from(_EVENTS)
                    .where(_EVENTS.c.workspace_id == ws_id, _EVENTS.c.pending)
                ).scalar()
                or 0
            )
            first = (
                connection.execute(
                    select(_EVENTS.c.body)
                    .where(
                        _EVENTS.c.workspace_id == ws_id,
                        _EVENTS.c.pending,
                    )
                    .order_by(_EVENTS.c.id)
                    .limit(1)
                ).scalar()
                if pending
                else None
            )
        leased = state.holder is not None and state.lease_until > time.time()
        return OutboxStatus(
            pending=pending,
            delivered=state.delivered,
            oldest_pending_time=None if first is None else _event_or_stub(first).get("eventTime"),
            attempts=state.attempts,
            next_attempt_at=_from_iso(state.next_attempt_at),
            last_error=state.last_error,
            last_error_at=_from_iso(state.last_error_at),
            last_delivery_at=_from_iso(state.last_delivery_at),
            store=self.shown,
            deliverer=state.holder if leased else None,
            lease_until=dt.datetime.fromtimestamp(state.lease_until, dt.UTC) if leased else None,
        )

    def events(self, since: dt.datetime | None = None) -> Iterator[dict[str, Any]]:
        """Every event ever spooled, in spool order, read a page at a time; with `since`, those
        whose eventTime is at or after it (a naive `since` is UTC)."""
        after = 0
        while True:
            with self._reading() as (connection, ws_id):
                query = select(_EVENTS.c.id, _EVENTS.c.body).where(
                    _EVENTS.c.workspace_id == ws_id, _EVENTS.c.id > after
                )
                if since is not None:
                    query = query.where(_EVENTS.c.event_time >= time_key(since))
                rows = connection.execute(query.order_by(_EVENTS.c.id).limit(PAGE_SIZE)).all()
            for event_id, body in rows:
                event = _event_or_stub(body)
                if "__corrupt__" in event:
                    raise OutboxError(
                        f"workspace store {self.shown}: OpenLineage outbox event {event_id} is "
                        "not a JSON object; delete that row of dws_ol_events (or restore the "
                        "store from a backup)"
                    )
                yield event
            if len(rows) < PAGE_SIZE:
                return
            after = rows[-1][0]

    def count(self, since: dt.datetime | None = None) -> int:
        """How many events `events(since)` gives."""
        with self._reading() as (connection, ws_id):
            query = select(func.count()).select_from(_EVENTS).where(_EVENTS.c.workspace_id == ws_id)
            if since is not None:
                query = query.where(_EVENTS.c.event_time >= time_key(since))
            return int(connection.execute(query).scalar() or 0)

    def replay(
        self,
        transport: Transport,
        since: dt.datetime | None = None,
        progress: Callable[[dict[str, Any]], Any] | None = None,
    ) -> int:
        """Send archived events again, in order (to backfill a new catalog); what is pending or
        delivered is not touched. Returns how many were sent."""
        if transport.kind == "noop":
            raise OutboxError(
                "OpenLineage is disabled (noop transport): a replay would reach no "
                "catalog; configure a transport first"
            )
        sent = 0
        for event in self.events(since):
            try:
                transport.emit(event)  # type: ignore[arg-type]
            except Exception as exc:
                message = redact(error_text(exc), transport)[:MAX_ERROR_CHARS]
                raise OutboxError(
                    f"replay stopped after {sent} event(s): sending {_describe(event)} failed: "
                    f"{message}; fix the transport, then resume with 'dws-dagster openlineage "
                    f"replay --since {event.get('eventTime')}'"
                ) from None
            sent += 1
            if progress is not None:
                progress(event)
        return sent


def _event_or_stub(body: str) -> dict[str, Any]:
    """A stored event's JSON, or a stub saying it is corrupt (read from the database:
    untrusted)."""
    try:
        event = orjson.loads(body)
    except orjson.JSONDecodeError:
        event = None
    return event if isinstance(event, dict) else {"__corrupt__": True}
