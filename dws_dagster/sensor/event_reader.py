"""The lineage sensor's reading of Dagster's event log: every asset and run-status event after a
cursor, in storage order, a batch at a time.

Dagster's public readers are per asset key (`fetch_materializations`) or per event type; the
sensor needs every event of several types across all assets in one total order, so that its
cursor is one storage id. Internals it needs are behind `dws_dagster._compat.dagster`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dagster import DagsterEventType

from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.sensor import stored_events


def read_event_records(
    instance: Any, event_types: Sequence[DagsterEventType], *, after_storage_id: int, limit: int
) -> list[Any]:
    """The first `limit` event records of any of `event_types` after `after_storage_id`, oldest
    first, across all assets and runs (one `EventReader` batch; asset events as
    `AssetEventRecord`s, others as Dagster's `EventLogRecord`s)."""
    return EventReader(instance, event_types, after_storage_id=after_storage_id).next(limit)


class EventReader:
    """Event records of any of `event_types` after `after_storage_id`, oldest first, across all
    assets and runs, a batch at a time.

    Asset events are read with `get_event_records` (Dagster's `fetch_*` readers need an asset
    key; this is the one way to read every asset's events in storage order), run status events
    with `fetch_run_status_changes`; on the default run-sharded SQLite storage both read the
    index shard, so storage ids are comparable. Each read pass first takes the log's highest
    storage id and reads no further, then reads each type ascending up to a limit into a buffer
    of its own: a type that returned less than its limit is complete up to that id, one that
    filled it up to its last record, so every record up to the lowest of those is known and
    handed out in storage order. What lies past it stays buffered for the next batch, so no
    record is read (and deserialized, the bulk of the cost) twice, and a record logged while a
    pass reads other types is found by the next pass, never skipped.

    Asset events come as `stored_events.AssetEventRecord`s, read from the event-log table's
    JSON when the storage allows (`stored_events.read_stored`, which skips Dagster rebuilding
    its objects), else converted from Dagster's records.
    """

    def __init__(
        self, instance: Any, event_types: Sequence[DagsterEventType], *, after_storage_id: int
    ) -> None:
        self.instance = instance
        self._stored = dagster_compat.sql_event_storage(instance)
        run_status_types = dagster_compat.run_status_event_types()
        self._run_types = {t for t in event_types if t in run_status_types}
        #: Per type: every record up to this storage id is read (buffered or handed out).
        self._read_to = dict.fromkeys(event_types, after_storage_id)
        #: Per type: no record up to this storage id remains unread (infinite: none at all,
        #: when the storage cannot tell its highest id and the type ran dry).
        self._known_to: dict[DagsterEventType, float] = dict.fromkeys(event_types, after_storage_id)
        self._buffers: dict[DagsterEventType, list[Any]] = {t: [] for t in event_types}
        self._ready: list[Any] = []  # known complete, not yet handed out, in storage order

    def next(self, limit: int) -> list[Any]:
        """The next `limit` records (fewer: the log holds no more yet)."""
        while len(self._ready) < limit and self._read(limit):
            pass
        batch, self._ready = self._ready[:limit], self._ready[limit:]
        return batch

    def _read(self, limit: int) -> bool:
        """One read pass; False when it found nothing new."""
        top = dagster_compat.max_storage_id(self.instance)
        found_any = False
        for event_type, buffer in self._buffers.items():
            after = self._read_to[event_type]
            if len(buffer) >= limit or (top is not None and after >= top):
                continue
            found, rows, last = self._read_type(event_type, after, top, limit)
            buffer.extend(found)
            found_any = found_any or rows > 0
            if last is not None:
                self._read_to[event_type] = last
            if rows >= limit and last is not None:
                self._known_to[event_type] = last
            else:
                self._known_to[event_type] = math.inf if top is None else top
                self._read_to[event_type] = max(self._read_to[event_type], top or 0)
        known = min(self._known_to.values())
        ready = []
        for event_type, buffer in self._buffers.items():
            cut = 0
            while cut < len(buffer) and buffer[cut].storage_id <= known:
                cut += 1
            ready.extend(buffer[:cut])
            self._buffers[event_type] = buffer[cut:]
        ready.sort(key=lambda record: record.storage_id)
        self._ready.extend(ready)
        return found_any or bool(ready)

    def _read_type(
        self, event_type: DagsterEventType, after: int, top: int | None, limit: int
    ) -> tuple[list[Any], int, int | None]:
        """(records, rows read, the last row's storage id): rows the storage could not read
        are skipped but counted, so a short page means the end of the log."""
        if event_type in self._run_types:
            found = dagster_compat.run_status_changes(self.instance, event_type, after, limit)
            if top is not None:
                found = [r for r in found if r.storage_id <= top]
            return found, len(found), found[-1].storage_id if found else None
        before = None if top is None else top + 1
        if self._stored is not None and event_type in stored_events.ASSET_EVENT_TYPES:
            return stored_events.read_stored(
                self._stored,
                event_type,
                after_storage_id=after,
                before_storage_id=before,
                limit=limit,
            )
        found = dagster_compat.event_records(
            self.instance,
            event_type,
            after_storage_id=after,
            before_storage_id=before,
            limit=limit,
        )
        last = found[-1].storage_id if found else None
        if event_type in stored_events.ASSET_EVENT_TYPES:
            converted = (
                stored_events.AssetEventRecord.from_entry(r.storage_id, r.event_log_entry)
                for r in found
            )
            return [r for r in converted if r is not None], len(found), last
        return found, len(found), last
