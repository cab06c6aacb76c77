"""Every use of Dagster internals, in one place, each behind one small function.

Dagster gives an IO manager no public way to set the data version of the materialization it is
storing, nor to see which asset is consuming an input or the asset's run config. These
functions reach into the step context for that; `tests/compat/test_dagster_compat.py` exercises each
against the installed Dagster, so an upgrade that moves them fails loudly there rather than
silently losing data versions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import AssetKey, DagsterEventType, DataVersion, InputContext, OutputContext

from dws_dagster.errors import DagsterCompatibilityError


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


def add_partition_metadata(
    context: OutputContext, partition: str, metadata: Mapping[str, Any]
) -> None:
    """Metadata for the materialization of one partition of a range a step stores.

    Dagster builds one materialization per partition of the step after `handle_output`
    returns, each with the output's metadata merged with that partition's asset metadata (the
    step context's `add_asset_metadata(partition_key=...)`, which the asset body reaches as
    `AssetExecutionContext.add_asset_metadata`); an IO manager has no public way to it.
    """
    step_context = _step_context(context)
    adder = getattr(step_context, "add_asset_metadata", None)
    if adder is None:
        raise DagsterCompatibilityError(
            "this Dagster's step context has no add_asset_metadata(): pin dagster to a version "
            "dws_dagster supports (see pyproject.toml)"
        )
    adder(metadata, asset_key=context.asset_key, partition_key=partition)


def asset_graph(context: InputContext | OutputContext) -> Any | None:
    """The asset graph of the running job (partition mappings between its assets)."""
    try:
        return _step_context(context).job_def.asset_layer.asset_graph
    except (AttributeError, DagsterCompatibilityError):
        return None


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


def run_tags(context: OutputContext) -> Mapping[str, str]:
    """The tags of the run storing an output: OutputContext offers none."""
    tags = getattr(_step_context(context), "run_tags", None)
    if not isinstance(tags, Mapping):
        raise DagsterCompatibilityError(
            "this Dagster's step context has no run_tags: pin dagster to a version "
            "dws_dagster supports (see pyproject.toml)"
        )
    return tags


def op_config(context: InputContext | OutputContext) -> Mapping[str, Any]:
    """The run config of the asset's op (its Config class), as plain values."""
    config = getattr(_step_context(context), "op_config", None)
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    return {"config": config}


def run_status_event_types() -> frozenset[DagsterEventType]:
    """The event types that record a run's status changes (read with
    `fetch_run_status_changes`, not with the asset-event readers)."""
    from dagster._core.events import EVENT_TYPE_TO_PIPELINE_RUN_STATUS

    return frozenset(EVENT_TYPE_TO_PIPELINE_RUN_STATUS)


def run_status_changes(
    instance: Any, event_type: DagsterEventType, after_storage_id: int, limit: int
) -> list[Any]:
    """Up to `limit` records of one run-status event type after `after_storage_id`, oldest
    first (the cursor is an internal class's string)."""
    cursor = event_log_cursor(after_storage_id)
    return list(
        instance.fetch_run_status_changes(
            event_type, limit=limit, cursor=cursor, ascending=True
        ).records
    )


def event_records(
    instance: Any,
    event_type: DagsterEventType,
    *,
    after_storage_id: int,
    before_storage_id: int | None,
    limit: int,
) -> list[Any]:
    """Up to `limit` records of `event_type` between two storage ids, oldest first, across all
    assets and runs. `get_event_records` is deprecated (Dagster 2.0 removes it) but is the one
    reader not tied to one asset key; its deprecation warning is silenced here only."""
    from dagster import EventRecordsFilter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(
            instance.get_event_records(
                EventRecordsFilter(
                    event_type=event_type,
                    after_cursor=after_storage_id,
                    before_cursor=before_storage_id,
                ),
                limit=limit,
                ascending=True,
            )
        )


def max_storage_id(instance: Any) -> int | None:
    """The event log's highest storage id now (None: this storage cannot tell)."""
    try:
        return instance.event_log_storage.get_maximum_record_id()
    except NotImplementedError:
        return None


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


def runs_job_times(
    instance: Any, run_ids: Sequence[str]
) -> dict[str, tuple[str, Any, Any | None, dict[str, str]]]:
    """(job name, creation time, start time or None when not started yet, tags), times as
    aware datetimes, of many runs in one query (the sensor meets many runs in a batch, and a
    query per run would dominate its cost); unknown runs are left out. The start time dates the
    run's own OpenLineage START."""
    from dagster import RunsFilter

    found: dict[str, tuple[str, Any, Any | None, dict[str, str]]] = {}
    if not run_ids:
        return found
    for record in instance.get_run_records(filters=RunsFilter(run_ids=list(run_ids))):
        started = getattr(record, "start_time", None)
        found[record.dagster_run.run_id] = (
            record.dagster_run.job_name,
            _aware_time(record.create_timestamp),
            _aware_time(started) if started is not None else None,
            dict(record.dagster_run.tags),
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
# (sensor/stored_events.py): these are the internals it needs.


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


def preview_warning() -> type[Warning]:
    """The warning class Dagster raises for preview APIs (partitioned asset checks, Components'
    `@preview` classes), silenced where dws_dagster uses one knowingly."""
    try:
        from dagster._utils.warnings import PreviewWarning
    except ImportError:  # gone or renamed: nothing to silence
        return _NoWarning
    return PreviewWarning


# ------------------------------------------------------- components (dg projects)


def other_component_definitions(context: Any, skip: Callable[[type], bool]) -> list[Any]:
    """The definitions of every component of the project's defs folder but the one being
    loaded with `context` (a `ComponentLoadContext`) and the folders holding it, each built
    once by Dagster's component tree (what the folders merge is the same, cached object).
    Components whose type `skip` accepts are left out (one that would build this one again).

    Dagster offers a component the definitions of a path it names (`context.build_defs`), not
    a list of the project's components: that is the component tree's declarations."""
    tree = context.component_tree
    own = context.component_decl.loc
    own_path = Path(own.file_path)
    root = tree.find_decl_at_path(context.defs_module_path)
    found: list[Any] = []

    def visit(decl: Any) -> None:
        for child in decl.iterate_child_component_decls():
            loc = child.loc
            if loc == own:
                continue
            path = Path(getattr(loc, "file_path", own_path))
            if path == own_path or path in own_path.parents:
                visit(child)  # a folder (or file) holding this component: its other parts
                continue
            component_type = getattr(child, "component_type", None)
            if isinstance(component_type, type) and skip(component_type):
                continue
            found.append(context.build_defs(loc))

    visit(root)
    return found
