"""Every use of Dagster internals, in one place, each behind one small function.

Dagster gives an IO manager no public way to set the data version of the materialization it is
storing, nor to see which asset is consuming an input or the asset's run config. These
functions reach into the step context for that; `tests/test_dagster_compat.py` exercises each
against the installed Dagster, so an upgrade that moves them fails loudly there rather than
silently losing data versions.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import AssetKey, DagsterEventType, DataVersion, InputContext, OutputContext

from .errors import DwsError


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


def read_event_records(instance: Any, event_types: Sequence[DagsterEventType], *,
                       after_storage_id: int, limit: int) -> list[Any]:
    """The first `limit` event records of any of `event_types` after `after_storage_id`, oldest
    first, across all assets and runs (one `EventReader` batch)."""
    return EventReader(instance, event_types, after_storage_id=after_storage_id).next(limit)


class EventReader:
    """Event records of any of `event_types` after `after_storage_id`, oldest first, across all
    assets and runs, a batch at a time.

    Asset events are read with the deprecated `get_event_records` (Dagster's `fetch_*` readers
    need an asset key; this is the one way to read every asset's events in storage order), run
    status events with `fetch_run_status_changes`; on the default run-sharded SQLite storage
    both read the index shard, so storage ids are comparable. One query per type, each
    ascending and limited: every record up to the lowest last storage id of the types that
    filled their limit is then known, and those past the batch are kept for the next one, so
    no record is read (and deserialized, the bulk of the cost) twice. A type that filled its
    limit also bounds the later asset queries (`before_cursor`).
    """

    def __init__(self, instance: Any, event_types: Sequence[DagsterEventType], *,
                 after_storage_id: int) -> None:
        from dagster._core.events import EVENT_TYPE_TO_PIPELINE_RUN_STATUS

        self.instance = instance
        self.asset_types = [t for t in event_types if t not in EVENT_TYPE_TO_PIPELINE_RUN_STATUS]
        self.run_types = [t for t in event_types if t in EVENT_TYPE_TO_PIPELINE_RUN_STATUS]
        self._read_to = after_storage_id  # every record up to here is read
        self._ready: list[Any] = []  # read, not yet handed out, in storage order

    def next(self, limit: int) -> list[Any]:
        """The next `limit` records (fewer: the log holds no more yet)."""
        if len(self._ready) < limit:
            self._read(limit)
        batch, self._ready = self._ready[:limit], self._ready[limit:]
        return batch

    def _read(self, limit: int) -> None:
        from dagster import EventRecordsFilter

        records: list[Any] = []
        bound: int | None = None  # every type is read up to here at least (None: to the end)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation and "use fetch_*" advice
            for event_type in self.asset_types:
                found = self.instance.get_event_records(
                    EventRecordsFilter(event_type=event_type, after_cursor=self._read_to,
                                       before_cursor=None if bound is None else bound + 1),
                    limit=limit, ascending=True)
                records.extend(found)
                if len(found) >= limit:
                    bound = found[-1].storage_id
            for event_type in self.run_types:
                found = _run_status_changes(self.instance, event_type, self._read_to, limit)
                records.extend(found)
                if len(found) >= limit:
                    bound = min(found[-1].storage_id, bound if bound is not None else
                                found[-1].storage_id)
        if bound is not None:
            records = [record for record in records if record.storage_id <= bound]
        records.sort(key=lambda record: record.storage_id)
        if records:
            self._read_to = records[-1].storage_id if bound is None else bound
            self._ready.extend(records)


def _run_status_changes(instance: Any, event_type: DagsterEventType, after_storage_id: int,
                        limit: int) -> list[Any]:
    from dagster._core.storage.event_log.base import EventLogCursor

    cursor = EventLogCursor.from_storage_id(after_storage_id).to_string()
    return list(instance.fetch_run_status_changes(
        event_type, limit=limit, cursor=cursor, ascending=True).records)


def parent_partition_keys(asset_graph: Any, partition: str | None, parent: AssetKey,
                          child: AssetKey) -> list[str] | None:
    """The partitions of `parent` that `child`'s `partition` reads (its partition mapping), or
    None when unknown (unpartitioned parent, or a mapping Dagster cannot evaluate here)."""
    try:
        if asset_graph.get(parent).partitions_def is None:
            return None
        result = asset_graph.get_parent_partition_keys_for_child(partition, parent, child)
        return sorted(result.partitions_subset.get_partition_keys())
    except Exception:
        return None


def run_created(instance: Any, run_id: str) -> Any:
    """When a run was created (a timezone-aware datetime), or None for an unknown run."""
    import datetime as dt

    record = instance.get_run_record_by_id(run_id)
    if record is None:
        return None
    created = record.create_timestamp
    if isinstance(created, dt.datetime):
        return created if created.tzinfo else created.replace(tzinfo=dt.UTC)
    return dt.datetime.fromtimestamp(float(created), dt.UTC)
