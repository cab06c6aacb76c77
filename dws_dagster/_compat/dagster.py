"""Every use of Dagster internals, in one place, each behind one small function.

Dagster gives an IO manager no public way to set the data version of the materialization it is
storing, nor to see which asset is consuming an input or the asset's run config. These
functions reach into the step context for that; `tests/test_dagster_compat.py` exercises each
against the installed Dagster, so an upgrade that moves them fails loudly there rather than
silently losing data versions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import AssetKey, DagsterEventType, DataVersion, InputContext, OutputContext

from dws_dagster.errors import DwsError


class DagsterCompatibilityError(DwsError):
    """The installed Dagster no longer offers an internal dws_dagster relies on."""


def _step_context(context: InputContext | OutputContext) -> Any:
    try:
        return context.step_context
    except Exception as exc:  # DagsterInvariantViolationError outside a run
        raise DagsterCompatibilityError(
            f"no step context for {type(context).__name__}: dws_dagster needs a running "
            f"Dagster step (build_*_context without a step cannot set data versions) ({exc})"
        ) from None


def set_data_version(context: OutputContext, version: str) -> None:
    """Make `version` the Dagster data version of the materialization being stored.

    Dagster reads the step's data-version cache after `handle_output` returns, when it builds
    the materialization event, so setting it here makes the event carry the content version.
    """
    step_context = _step_context(context)
    setter = getattr(step_context, "set_data_version", None)
    if setter is None:
        raise DagsterCompatibilityError(
            "this Dagster's step context has no set_data_version(): pin dagster to a version "
            "dws_dagster supports (see pyproject.toml)"
        )
    setter(context.asset_key, DataVersion(version))


def consumer_asset_keys(context: InputContext) -> list[AssetKey]:
    """The assets computed by the step that loads this input."""
    step_context = _step_context(context)
    return sorted(step_context.get_output_asset_keys(), key=lambda key: key.path)


def step_identity(context: InputContext) -> tuple[str, str]:
    """(run id, step key) of the step loading an input: InputContext offers neither."""
    step_context = _step_context(context)
    return step_context.run_id, step_context.step.key


def asset_metadata(context: InputContext, key: AssetKey) -> Mapping[str, Any] | None:
    """Definition metadata of another asset of the running job (the consumer of an input)."""
    step_context = _step_context(context)
    try:
        return step_context.job_def.asset_layer.get(key).metadata
    except Exception:  # not an asset of this job
        return None


def op_config(context: InputContext | OutputContext) -> Mapping[str, Any]:
    """The run config of the asset's op (its Config class), as plain values."""
    config = getattr(_step_context(context), "op_config", None)
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    return {"config": config}


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

    Asset events are read with the deprecated `get_event_records` (Dagster's `fetch_*` readers
    need an asset key; this is the one way to read every asset's events in storage order), run
    status events with `fetch_run_status_changes`; on the default run-sharded SQLite storage
    both read the index shard, so storage ids are comparable. Each read pass first takes the
    log's highest storage id and reads no further, then reads each type ascending up to a
    limit into a buffer of its own: a type that returned less than its limit is complete up to
    that id, one that filled it up to its last record, so every record up to the lowest of
    those is known and handed out in storage order. What lies past it stays buffered for the
    next batch, so no record is read (and deserialized, the bulk of the cost) twice, and a
    record logged while a pass reads other types is found by the next pass, never skipped.

    Asset events come as `stored_events.AssetEventRecord`s, read from the event-log table's
    JSON when the storage allows (`stored_events.read_stored`, ten times faster than Dagster
    rebuilding its objects), else converted from Dagster's records.
    """

    def __init__(
        self, instance: Any, event_types: Sequence[DagsterEventType], *, after_storage_id: int
    ) -> None:
        from dagster._core.events import EVENT_TYPE_TO_PIPELINE_RUN_STATUS

        from dws_dagster.sensor import (
            stored_events,  # the sensor's fast path: loaded only by the sensor
        )

        self._events = stored_events
        self.instance = instance
        self._stored = sql_event_storage(instance)
        self._run_types = {t for t in event_types if t in EVENT_TYPE_TO_PIPELINE_RUN_STATUS}
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
        top = self._top()
        found_any = False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation and "use fetch_*" advice
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
            found = _run_status_changes(self.instance, event_type, after, limit)
            if top is not None:
                found = [r for r in found if r.storage_id <= top]
            return found, len(found), found[-1].storage_id if found else None
        before = None if top is None else top + 1
        stored_events = self._events
        if self._stored is not None and event_type in stored_events.ASSET_EVENT_TYPES:
            return stored_events.read_stored(
                self._stored,
                event_type,
                after_storage_id=after,
                before_storage_id=before,
                limit=limit,
            )
        from dagster import EventRecordsFilter

        found = list(
            self.instance.get_event_records(
                EventRecordsFilter(event_type=event_type, after_cursor=after, before_cursor=before),
                limit=limit,
                ascending=True,
            )
        )
        last = found[-1].storage_id if found else None
        if event_type in stored_events.ASSET_EVENT_TYPES:
            converted = (
                stored_events.AssetEventRecord.from_entry(r.storage_id, r.event_log_entry)
                for r in found
            )
            return [r for r in converted if r is not None], len(found), last
        return found, len(found), last

    def _top(self) -> int | None:
        """The log's highest storage id now (None: this storage cannot tell)."""
        try:
            return self.instance.event_log_storage.get_maximum_record_id()
        except NotImplementedError:
            return None


def _run_status_changes(
    instance: Any, event_type: DagsterEventType, after_storage_id: int, limit: int
) -> list[Any]:
    cursor = event_log_cursor(after_storage_id)
    return list(
        instance.fetch_run_status_changes(
            event_type, limit=limit, cursor=cursor, ascending=True
        ).records
    )


def parent_partition_keys(
    asset_graph: Any, partition: str | None, parent: AssetKey, child: AssetKey
) -> list[str] | None:
    """The partitions of `parent` that `child`'s `partition` reads (its partition mapping), or
    None when unknown (unpartitioned parent, or a mapping Dagster cannot evaluate here)."""
    try:
        if asset_graph.get(parent).partitions_def is None:
            return None
        result = asset_graph.get_parent_partition_keys_for_child(partition, parent, child)
        return sorted(result.partitions_subset.get_partition_keys())
    except Exception:
        return None


def runs_job_times(instance: Any, run_ids: Sequence[str]) -> dict[str, tuple[str, Any, Any | None]]:
    """(job name, creation time, start time or None when not started yet), as aware datetimes,
    of many runs in one query (the sensor meets a hundred runs in a batch, and a query per run
    cost 5 ms); unknown runs are left out. The start time dates the run's own OpenLineage
    START."""
    from dagster import RunsFilter

    found: dict[str, tuple[str, Any, Any | None]] = {}
    if not run_ids:
        return found
    for record in instance.get_run_records(filters=RunsFilter(run_ids=list(run_ids))):
        started = getattr(record, "start_time", None)
        found[record.dagster_run.run_id] = (
            record.dagster_run.job_name,
            _aware_time(record.create_timestamp),
            _aware_time(started) if started is not None else None,
        )
    return found


def _aware_time(value: Any) -> Any:
    """A run record's time (a datetime, naive meaning UTC, or epoch seconds) as aware UTC."""
    import datetime as dt

    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return dt.datetime.fromtimestamp(float(value), dt.UTC)


# ------------------------------------------------------- the event log, read directly
# The lineage sensor reads asset events from the JSON in Dagster's event-log table
# (stored_events.py): these are the internals it needs, each tested in test_dagster_compat.py.


def event_log_cursor(after_storage_id: int) -> str:
    """The cursor string `fetch_run_status_changes` takes for "after this storage id"."""
    from dagster._core.event_api import EventLogCursor

    return EventLogCursor.from_storage_id(after_storage_id).to_string()


def deserialize_event_entry(text: str | bytes) -> Any:
    """An `EventLogEntry` from the JSON Dagster stored (Dagster's own deserializer)."""
    from dagster._core.events.log import EventLogEntry
    from dagster_shared.serdes import deserialize_value

    return deserialize_value(text if isinstance(text, str) else text.decode(), EventLogEntry)


def pack_value(value: Any) -> Any:
    """`value` as Dagster's serializer stores it (a JSON-able dict), to learn its format."""
    from dagster_shared.serdes import pack_value as pack

    return pack(value)


def unpack_value(data: Any) -> Any:
    """A packed value (as `pack_value` gives it) back as Dagster's object."""
    from dagster_shared.serdes import unpack_value as unpack

    return unpack(data)


def sql_event_storage(instance: Any) -> Any | None:
    """The instance's SQL event-log storage when its asset-event reads are Dagster's plain
    table query (so reading the table returns what `get_event_records` would), else None."""
    try:
        from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
        from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
            SqliteEventLogStorage,
        )
    except ImportError:
        return None
    storage = getattr(instance, "event_log_storage", None)
    if not isinstance(storage, SqlEventLogStorage):
        return None
    kind = type(storage)
    # Run-sharded SQLite reads asset events from its index shard with the same query.
    if (
        kind.get_event_records
        not in (SqlEventLogStorage.get_event_records, SqliteEventLogStorage.get_event_records)
        or kind._get_event_records is not SqlEventLogStorage._get_event_records
    ):
        return None
    return storage


def event_log_table() -> Any:
    """Dagster's event-log table (SQLAlchemy), for selecting stored events directly."""
    from dagster._core.storage.event_log.schema import SqlEventLogStorageTable

    return SqlEventLogStorageTable


def beta_warning() -> type[Warning]:
    """The warning class Dagster raises for beta APIs (silenced where dws_dagster uses one
    knowingly)."""
    try:
        from dagster._utils.warnings import BetaWarning
    except ImportError:  # gone or renamed: nothing to silence
        return _NoWarning
    return BetaWarning


class _NoWarning(Warning):
    """Never raised: the stand-in when Dagster has no beta warning class."""
