"""A durable outbox for OpenLineage events, so that nothing is lost while a catalog is down.

Layout under `.dataworkspace/openlineage/outbox/`:

- `journal/NNNNNNNN.jsonl`: every event ever spooled, one JSON object per line, appended under
  `lock` and fsynced. A segment is sealed once it holds `segment_bytes`, and the next append
  starts a new one. A torn last line (a crash mid-append) is ignored by readers and cut by the
  next writer. The journal is the archive `events()` and `replay()` read; it is never pruned.
- `journal/NNNNNNNN.keys.json`: the (runId, eventType) keys of a sealed segment, so that opening
  the outbox reads keys rather than every event ever spooled.
- `state.json`: the delivery position (the end of the last event the transport accepted),
  counts and backoff, rewritten atomically by the one process delivering (`deliver.lock`).

Delivery is at-least-once, in spool order, one event at a time: the position moves only after
the transport returned, and the first failure ends the call, so a run's later event is never
sent before an earlier one. Catalogs deduplicate by (runId, eventType, eventTime).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from filelock import FileLock
from filelock import Timeout as LockTimeout

from ..errors import DwsError, WorkspaceConfigError
from ..workspace import shapes
from ..workspace.digests import key_digest
from ..workspace.files import (
    append_durably,
    atomic_write_bytes,
    atomic_write_json,
    held,
    journal_segments,
    segment_path,
)
from .transport import Emitter, error_text, redact

if TYPE_CHECKING:
    from openlineage.client.transport import Transport

    from ..workspace.config import Workspace

OUTBOX_FORMAT = 1
#: A segment is sealed, and a new one started, once it holds this many bytes.
SEGMENT_BYTES = 8 * 1024 * 1024
LOCK_TIMEOUT_SECONDS = 120.0
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 300.0
#: While sending, the position is saved at least this often (a crash re-sends at most this much).
CHECKPOINT_SECONDS = 1.0
MAX_ERROR_CHARS = 2000

Key = tuple[str, str]


_STATE_ADVICE = ("restore it from a backup, or delete it to send every archived event again "
                 "(catalogs ignore duplicates)")


class OutboxError(DwsError):
    """The OpenLineage outbox cannot take, read or send events as asked."""


class OutboxFileError(OutboxError, WorkspaceConfigError):
    """A file of the outbox (its state or a journal line) is corrupt: a workspace file like any
    other under `.dataworkspace/`, so also a `WorkspaceConfigError`."""


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def parse_time(text: str, *, what: str = "time") -> dt.datetime:
    """An aware datetime from ISO-8601 text: a date means its midnight, no zone means UTC."""
    try:
        value = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise OutboxError(
            f"{what}: {text!r} is not an ISO-8601 date or datetime; write it like 2026-05-01 or "
            "2026-05-01T12:00:00+00:00") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="microseconds")


def _from_iso(text: str | None) -> dt.datetime | None:
    return None if text is None else parse_time(text)


def event_key(event: Mapping[str, Any]) -> Key:
    """What makes two events the same for the outbox: (run.runId, eventType)."""
    run = event.get("run")
    return (str(run.get("runId")) if isinstance(run, Mapping) else "",
            str(event.get("eventType", "")))


def _describe(event: Mapping[str, Any]) -> str:
    run_id, event_type = event_key(event)
    return f"run {run_id} {event_type} ({event.get('eventTime')})"


def _encode(event: Any, index: int) -> tuple[Key, bytes]:
    """Validate one event and give its key and journal line."""
    if not isinstance(event, Mapping):
        raise OutboxError(f"event #{index} is a {type(event).__name__}, not an OpenLineage "
                          "RunEvent dict; pass the dicts the event builders return")
    run = event.get("run")
    problems = []
    if not isinstance(run, Mapping) or not isinstance(run.get("runId"), str) \
            or not run.get("runId"):
        problems.append("run.runId")
    if not isinstance(event.get("eventType"), str) or not event.get("eventType"):
        problems.append("eventType")
    try:
        parse_time(event.get("eventTime"))  # type: ignore[arg-type]
    except OutboxError:
        problems.append("eventTime")
    if problems:
        raise OutboxError(
            f"event #{index} cannot be spooled: missing or invalid {', '.join(problems)}; the "
            "outbox takes OpenLineage RunEvents with run.runId, eventType and an ISO-8601 "
            "eventTime")
    try:
        line = orjson.dumps(dict(event), option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise OutboxError(f"event #{index} ({_describe(event)}) is not JSON: {exc}; pass plain "
                          "JSON data (strings, numbers, lists, dicts)") from None
    return event_key(event), line + b"\n"


@dataclass(frozen=True)
class DeliveryReport:
    """What one `Outbox.deliver` call did.

    `failed` is 1 when this call stopped on an error; `last_error`, `attempts` and
    `next_attempt_at` describe the current run of failures (None/0 once delivery works).
    `busy`: another process was delivering, so this call did nothing; `paused`: the transport
    is disabled (noop), so events stay pending.
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
    (in spool order); `attempts` counts failed attempts since the last success."""

    pending: int
    delivered: int
    oldest_pending_time: str | None
    attempts: int
    next_attempt_at: dt.datetime | None
    last_error: str | None
    last_error_at: dt.datetime | None
    last_delivery_at: dt.datetime | None
    spool_bytes: int
    segments: int

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("next_attempt_at", "last_error_at", "last_delivery_at"):
            data[name] = _iso(data[name])
        return data


@dataclass
class _State:
    """`state.json`: the delivery position and the current run of failures."""

    segment: int = 1
    offset: int = 0
    delivered: int = 0
    attempts: int = 0
    next_attempt_at: str | None = None
    last_error: str | None = None
    last_error_at: str | None = None
    last_delivery_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        position = {"segment": data.pop("segment"), "offset": data.pop("offset")}
        return {"format": OUTBOX_FORMAT, "position": position, **data}

    @classmethod
    def from_json(cls, data: Any, path: Path) -> _State:
        data = shapes.checked("outbox state", data, path, what="outbox state",
                             advice=_STATE_ADVICE)
        for name in ("next_attempt_at", "last_error_at", "last_delivery_at"):
            if data.get(name) is not None:
                try:
                    parse_time(data[name], what=name)
                except DwsError:
                    raise OutboxFileError(
                        f"outbox state {path} is corrupt: {name}: {data[name][:40]!r} is not an "
                        f"ISO time; {_STATE_ADVICE}") from None
        position = data["position"]
        return cls(segment=position["segment"], offset=position["offset"],
                   delivered=data.get("delivered", 0), attempts=data.get("attempts", 0),
                   next_attempt_at=data.get("next_attempt_at"),
                   last_error=data.get("last_error"), last_error_at=data.get("last_error_at"),
                   last_delivery_at=data.get("last_delivery_at"))


class Outbox:
    """The durable spool of OpenLineage events of one workspace, shared by many processes.

    Keep one object per process (and thread): it caches the key index and where it read to, so
    spooling costs a stat call plus the new lines, whatever the length of the history.
    """

    def __init__(self, workspace: Workspace, *, segment_bytes: int = SEGMENT_BYTES,
                 backoff_base: float = BACKOFF_BASE_SECONDS,
                 backoff_cap: float = BACKOFF_CAP_SECONDS,
                 rng: random.Random | None = None) -> None:
        self.workspace = workspace
        self.dir = workspace.meta_dir / "openlineage" / "outbox"
        self.journal_dir = self.dir / "journal"
        self.state_path = self.dir / "state.json"
        self.lock_path = self.dir / "lock"
        self.deliver_lock_path = self.dir / "deliver.lock"
        self.segment_bytes = segment_bytes
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._rng = rng or random.Random()
        self._lock = FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT_SECONDS)
        self._deliver_lock = FileLock(str(self.deliver_lock_path))
        # The key index: the digest of every key read so far, and where reading stopped.
        self._keys: set[int] = set()
        self._segment_keys: list[Key] = []
        self._segment = 0  # 0: nothing read yet
        self._offset = 0
        self._count = 0

    # ------------------------------------------------------------------ files

    def _segment_path(self, number: int) -> Path:
        return segment_path(self.journal_dir, number)

    def _keys_path(self, number: int) -> Path:
        return self.journal_dir / f"{number:08d}.keys.json"

    def _segments(self) -> list[int]:
        return journal_segments(self.journal_dir)

    def _size(self, number: int) -> int:
        try:
            return self._segment_path(number).stat().st_size
        except FileNotFoundError:
            return 0

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with held(self._lock, folder=self.journal_dir, on_timeout=lambda: OutboxError(
                f"could not lock the OpenLineage outbox ({self.lock_path}) within "
                f"{LOCK_TIMEOUT_SECONDS:.0f} s: another process holds it; wait for it, or remove "
                "the lock file if that process is gone")):
            yield

    def _lines(self, number: int, offset: int
               ) -> Iterator[tuple[dict[str, Any], int, bytes]]:
        """(event, offset after its line, the line) for each complete line of a segment from
        `offset`."""
        path = self._segment_path(number)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        start = 0
        while start < end:
            stop = data.index(b"\n", start) + 1
            line = data[start:stop]
            if line.strip():
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    event = None
                if not isinstance(event, dict):
                    raise OutboxFileError(
                        f"outbox journal {path} is corrupt at byte {offset + start} (not a JSON "
                        "object); move that line out of the file (or restore the file from a "
                        "backup)") from None
                yield event, offset + stop, line
            start = stop

    # ------------------------------------------------------------------ key index

    def _refresh(self) -> None:
        """Bring the key index up to date with what every process appended."""
        if self._segment and self._size(self._segment) == self._offset \
                and not self._segment_path(self._segment + 1).exists():
            return  # the common case, in two stat calls
        for number in self._segments():
            if number < self._segment:
                continue
            if number > self._segment:
                self._segment, self._offset, self._segment_keys = number, 0, []
                sealed = self._sealed_keys(number)
                if sealed is not None:
                    self._add_keys(sealed)
                    self._offset = self._size(number)
                    continue
            for event, end, _ in self._lines(number, self._offset):
                self._add_keys([event_key(event)])
                self._offset = end

    def _sealed_keys(self, number: int) -> list[Key] | None:
        """The keys of a sealed segment from its keys file, if it matches the segment."""
        if not self._segment_path(number + 1).exists():
            return None
        path = self._keys_path(number)
        try:
            data = shapes.checked("outbox keys", orjson.loads(path.read_bytes()), path)
        except (OSError, orjson.JSONDecodeError, WorkspaceConfigError):
            return None  # missing, stale or damaged: the segment itself is read instead
        if data["bytes"] != self._size(number):
            return None
        return [(run_id, kind) for run_id, kind in data["keys"]]

    def _add_keys(self, keys: Sequence[Key]) -> None:
        self._keys.update(key_digest(*key) for key in keys)
        self._segment_keys.extend(keys)
        self._count += len(keys)

    # ------------------------------------------------------------------ spooling

    def spool(self, events: Sequence[Mapping[str, Any]]) -> int:
        """Durably append the events whose (runId, eventType) the outbox does not hold yet, so a
        caller that re-processes after a crash adds no duplicates. Returns how many were added.
        """
        encoded = [_encode(event, index) for index, event in enumerate(events)]
        digests = [key_digest(*key) for key, _ in encoded]
        if all(digest in self._keys for digest in digests):
            return 0  # keys never leave the outbox, so no lock is needed to say so
        with self._locked():
            self._refresh()
            keys: list[Key] = []
            lines: list[bytes] = []
            taken: set[int] = set()
            for (key, line), digest in zip(encoded, digests, strict=True):
                if digest not in self._keys and digest not in taken:
                    taken.add(digest)
                    keys.append(key)
                    lines.append(line)
            if lines:
                self._append(lines, keys)
        return len(lines)

    def _append(self, lines: list[bytes], keys: list[Key]) -> None:
        """Append lines durably; the caller holds the lock and has refreshed."""
        self._segment = self._segment or 1
        if self._offset >= self.segment_bytes:
            self._seal()
        payload = b"".join(lines)
        append_durably(self._segment_path(self._segment), payload, valid_bytes=self._offset)
        self._offset += len(payload)
        self._add_keys(keys)

    def _seal(self) -> None:
        """Write the keys file of the current segment, then move on to the next one."""
        path = self._segment_path(self._segment)
        if self._size(self._segment) > self._offset:
            os.truncate(path, self._offset)  # a torn line must not outlive the seal
        atomic_write_bytes(self._keys_path(self._segment), orjson.dumps({
            "format": OUTBOX_FORMAT, "bytes": self._offset, "keys": self._segment_keys},
            option=orjson.OPT_SORT_KEYS))
        self._segment, self._offset, self._segment_keys = self._segment + 1, 0, []

    # ------------------------------------------------------------------ state

    def _read_state(self) -> _State:
        try:
            raw = self.state_path.read_bytes()
        except FileNotFoundError:
            return _State()
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise OutboxFileError(
                f"outbox state {self.state_path} is corrupt ({exc}); {_STATE_ADVICE}") from None
        try:
            return _State.from_json(data, self.state_path)
        except WorkspaceConfigError as exc:
            raise OutboxFileError(str(exc)) from None

    def _write_state(self, state: _State) -> None:
        atomic_write_json(self.state_path, state.to_json())

    def _pending_events(self, state: _State
                        ) -> Iterator[tuple[dict[str, Any], int, int, bytes]]:
        """(event, segment, offset after it, its journal line) for each event past the delivery
        position."""
        segment, offset = state.segment, state.offset
        while True:
            # Checked before reading: once the next segment exists this one gets no more lines,
            # so the read below is its last and moving on skips nothing.
            sealed = self._segment_path(segment + 1).exists()
            for event, end, line in self._lines(segment, offset):
                offset = end
                yield event, segment, end, line
            if sealed:
                segment, offset = segment + 1, 0
            elif not self._segment_path(segment + 1).exists():
                return

    def _pending_count(self, state: _State) -> int:
        self._refresh()
        return max(0, self._count - state.delivered)

    # ------------------------------------------------------------------ delivery

    def deliver(self, transport: Transport, *, budget_seconds: float = 30.0,
                now: dt.datetime | None = None, ignore_backoff: bool = False) -> DeliveryReport:
        """Send pending events oldest first until none is left, the budget is spent, or one
        fails; a failure sets the next attempt time (exponential backoff with jitter), before
        which calls send nothing unless `ignore_backoff`."""
        now = _aware(now or utc_now())
        if transport.kind == "noop":
            state = self._read_state()
            return self._report(state, sent=0, failed=0, paused=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._deliver_lock.acquire(timeout=0)
        except LockTimeout:  # another process is sending these very events
            return self._report(self._read_state(), sent=0, failed=0, busy=True)
        try:
            return self._deliver_locked(transport, budget_seconds, now, ignore_backoff)
        finally:
            self._deliver_lock.release()

    def _deliver_locked(self, transport: Transport, budget_seconds: float, now: dt.datetime,
                        ignore_backoff: bool) -> DeliveryReport:
        state = self._read_state()
        waiting_until = _from_iso(state.next_attempt_at)
        if waiting_until is not None and now < waiting_until and not ignore_backoff:
            return self._report(state, sent=0, failed=0)
        started = last_saved = time.monotonic()
        sent = failed = 0
        dirty = False
        try:
            with Emitter(transport) as emitter:
                for event, segment, end, line in self._pending_events(state):
                    if time.monotonic() - started >= budget_seconds:
                        break
                    try:
                        emitter.emit(event, line)
                    except Exception as exc:
                        elapsed = dt.timedelta(seconds=time.monotonic() - started)
                        self._failed(state, event, exc, transport, now + elapsed)
                        failed, dirty = 1, True
                        break
                    sent += 1
                    state.segment, state.offset, state.delivered = segment, end, state.delivered + 1
                    state.attempts, state.next_attempt_at = 0, None
                    state.last_delivery_at = _iso(now + dt.timedelta(
                        seconds=time.monotonic() - started))
                    dirty = True
                    if time.monotonic() - last_saved >= CHECKPOINT_SECONDS:
                        self._write_state(state)
                        last_saved, dirty = time.monotonic(), False
        finally:
            if dirty:
                self._write_state(state)
        return self._report(state, sent=sent, failed=failed)

    def _failed(self, state: _State, event: Mapping[str, Any], exc: Exception,
                transport: Transport, at: dt.datetime) -> None:
        message = redact(f"sending {_describe(event)} failed: {error_text(exc)}", transport)
        state.attempts += 1
        state.last_error = message[:MAX_ERROR_CHARS]
        state.last_error_at = _iso(at)
        state.next_attempt_at = _iso(at + dt.timedelta(seconds=self.backoff(state.attempts)))

    def backoff(self, attempts: int) -> float:
        """Seconds to wait after `attempts` failures in a row: doubling from `backoff_base` up to
        `backoff_cap`, times a random factor in [0.5, 1] so that processes spread out."""
        delay = min(self.backoff_cap, self.backoff_base * 2.0 ** min(attempts - 1, 60))
        return delay * (0.5 + self._rng.random() / 2)

    def _report(self, state: _State, *, sent: int, failed: int, busy: bool = False,
                paused: bool = False) -> DeliveryReport:
        failing = state.attempts > 0
        return DeliveryReport(
            sent=sent, failed=failed, pending=self._pending_count(state),
            next_attempt_at=_from_iso(state.next_attempt_at) if failing else None,
            last_error=state.last_error if failing else None, attempts=state.attempts,
            busy=busy, paused=paused)

    # ------------------------------------------------------------------ reading

    def status(self) -> OutboxStatus:
        state = self._read_state()
        pending = self._pending_count(state)
        first = next(self._pending_events(state), None) if pending else None
        segments = self._segments()
        return OutboxStatus(
            pending=pending, delivered=state.delivered,
            oldest_pending_time=None if first is None else first[0].get("eventTime"),
            attempts=state.attempts, next_attempt_at=_from_iso(state.next_attempt_at),
            last_error=state.last_error, last_error_at=_from_iso(state.last_error_at),
            last_delivery_at=_from_iso(state.last_delivery_at),
            spool_bytes=sum(self._size(number) for number in segments),
            segments=len(segments))

    def events(self, since: dt.datetime | None = None) -> Iterator[dict[str, Any]]:
        """Every event ever spooled, in spool order; with `since`, those whose eventTime is at
        or after it (a naive `since` is UTC)."""
        bound = None if since is None else _aware(since)
        for number in self._segments():
            for event, _, _ in self._lines(number, 0):
                if bound is None or parse_time(event.get("eventTime", ""),
                                               what="eventTime") >= bound:
                    yield event

    def count(self, since: dt.datetime | None = None) -> int:
        """How many events `events(since)` gives."""
        if since is None:
            self._refresh()
            return self._count
        return sum(1 for _ in self.events(since))

    def replay(self, transport: Transport, since: dt.datetime | None = None,
               progress: Callable[[dict[str, Any]], Any] | None = None) -> int:
        """Send archived events again, in order (to backfill a new catalog); the delivery
        position is not touched. Returns how many were sent."""
        if transport.kind == "noop":
            raise OutboxError("OpenLineage is disabled (noop transport): a replay would reach no "
                              "catalog; configure a transport first")
        sent = 0
        for event in self.events(since):
            try:
                transport.emit(event)  # type: ignore[arg-type]
            except Exception as exc:
                message = redact(error_text(exc), transport)[:MAX_ERROR_CHARS]
                raise OutboxError(
                    f"replay stopped after {sent} event(s): sending {_describe(event)} failed: "
                    f"{message}; fix the transport, then resume with 'dws-dagster openlineage "
                    f"replay --since {event.get('eventTime')}'") from None
            sent += 1
            if progress is not None:
                progress(event)
        return sent

