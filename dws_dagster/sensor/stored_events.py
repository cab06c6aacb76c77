"""Asset events as the lineage sensor reads them, decoded from the JSON Dagster stores.

Dagster turns every stored event back into its object graph: the entry, its event, the
materialization and, for each metadata entry, a deprecated `MetadataEntry` and its value,
each validated as it is built, which is most of what the sensor would spend per event. The
sensor uses a few fields and the metadata's plain values, so when the instance keeps its events in
Dagster's SQL event-log table (SQLite, Postgres, MySQL), `read_stored` selects the rows the
way `get_event_records` does and `decode` reads those fields from the JSON. Whatever it does
not recognise (another shape, a value type it does not know, JSON that is not strictly JSON)
goes to Dagster's own deserializer: an unfamiliar event is read slower, never differently.
The tests compare both readings of real runs, field by field.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from dagster import AssetKey, DagsterEventType

from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.workspace.redaction import get_logger

log = get_logger("dws_dagster.sensor")

PLANNED = DagsterEventType.ASSET_MATERIALIZATION_PLANNED
MATERIALIZED = DagsterEventType.ASSET_MATERIALIZATION
OBSERVED = DagsterEventType.ASSET_OBSERVATION
ASSET_EVENT_TYPES = (PLANNED, MATERIALIZED, OBSERVED)


@dataclass(frozen=True, slots=True)
class AssetEventRecord:
    """A planned, materialization or observation event of one asset.

    `partitions` are the planned partitions of a planned event (a backfill plans ranges), else
    the one partition (None: unpartitioned); `metadata` maps each label to its plain value, as
    `bindings.metadata_value` gives it (text, JSON data, numbers, Dagster's `TableSchema`...).
    """

    storage_id: int
    run_id: str
    timestamp: float
    kind: DagsterEventType
    step_key: str | None
    asset_key: AssetKey
    partitions: tuple[str | None, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def partition(self) -> str | None:
        """The partition of a materialization or observation."""
        return self.partitions[0] if self.partitions else None

    @classmethod
    def from_entry(cls, storage_id: int, entry: Any) -> AssetEventRecord | None:
        """The record of a Dagster `EventLogEntry` (None: not one of `ASSET_EVENT_TYPES`)."""
        event = entry.dagster_event
        kind = event.event_type if event is not None else None
        if kind == PLANNED:
            data = event.event_specific_data
            subset = getattr(data, "partitions_subset", None)
            partitions = (
                tuple(sorted(subset.get_partition_keys()))
                if subset is not None
                else (data.partition,)
            )
            return cls(
                storage_id,
                entry.run_id,
                entry.timestamp,
                kind,
                event.step_key,
                data.asset_key,
                partitions,
            )
        if kind == MATERIALIZED:
            item = event.event_specific_data.materialization
        elif kind == OBSERVED:
            item = event.event_specific_data.asset_observation
        else:
            return None
        return cls(
            storage_id,
            entry.run_id,
            entry.timestamp,
            kind,
            event.step_key,
            item.asset_key,
            (item.partition,),
            {label: metadata_value(value) for label, value in item.metadata.items()},
        )


# ---------------------------------------------------------------------- the stored form


class _Unfamiliar(Exception):
    """The stored JSON is not in the shape this module reads: Dagster's deserializer reads it."""


def _learn_format() -> tuple[dict[str, str | None], str]:
    """How this Dagster stores plain metadata values (storage class -> the field holding the
    value; None: no value) and asset keys (the field holding the path), learnt by packing
    samples with Dagster's serializer, so that a renamed class or field sends those values to
    Dagster's deserializer instead of being misread."""
    from dagster import MetadataValue

    pack_value = dagster_compat.pack_value

    samples: list[tuple[Any, Any]] = [
        (MetadataValue.text("text"), "text"),
        (MetadataValue.json({"k": [1]}), {"k": [1]}),
        (MetadataValue.int(7), 7),
        (MetadataValue.float(1.5), 1.5),
        (MetadataValue.bool(True), True),
        (MetadataValue.null(), None),
    ]
    plain: dict[str, str | None] = {}
    for value, expected in samples:
        packed = pack_value(value)
        fields = [name for name in packed if name != "__class__"]
        if not fields and expected is None:
            plain[packed["__class__"]] = None
        elif (
            len(fields) == 1 and packed[fields[0]] == expected and metadata_value(value) == expected
        ):
            plain[packed["__class__"]] = fields[0]
    key = pack_value(AssetKey(["a", "b"]))
    path_fields = [name for name, item in key.items() if item == ["a", "b"]]
    return plain, path_fields[0] if len(path_fields) == 1 else "path"


@functools.cache
def _format() -> tuple[dict[str, str | None], str]:
    """The stored format, learnt once, when the first event is read (importing this module
    costs nothing and cannot fail on a Dagster that packs values differently)."""
    return _learn_format()


_SERDES_MARKERS = frozenset(
    {"__class__", "__enum__", "__set__", "__frozenset__", "__mapping_items__"}
)
_KINDS = {kind.value: kind for kind in ASSET_EVENT_TYPES}
#: Per kind of event holding an asset's metadata: (its data's class, the field holding the
#: materialization or observation, that object's class).
_EVENT_ITEMS = {
    MATERIALIZED: ("StepMaterializationData", "materialization", "AssetMaterialization"),
    OBSERVED: ("AssetObservationData", "asset_observation", "AssetObservation"),
}
#: How many asset keys, and decoded values of other metadata types, are memoized: they repeat
#: from run to run, and the bound keeps a long-lived process's memory flat.
_MEMO_SIZE = 4096


def decode(storage_id: int, text: str | bytes) -> AssetEventRecord | None:
    """The record of one stored event (None: not an asset event, or unreadable, as Dagster's
    `get_event_records` skips it)."""
    try:
        return _decode(storage_id, orjson.loads(text))
    except (_Unfamiliar, orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        pass
    try:
        entry = dagster_compat.deserialize_event_entry(text)
    except Exception as exc:  # as Dagster's own reader does: skip the row, say which
        log.warning("event log record %s could not be read and is skipped: %s", storage_id, exc)
        return None
    return AssetEventRecord.from_entry(storage_id, entry)


def _decode(storage_id: int, stored: dict[str, Any]) -> AssetEventRecord:
    event = stored["dagster_event"]
    if stored.get("__class__") != "EventLogEntry" or event.get("__class__") != "DagsterEvent":
        raise _Unfamiliar
    kind = _KINDS[event["event_type_value"]]
    data = event["event_specific_data"]
    if kind == PLANNED:
        if (
            data["__class__"] != "AssetMaterializationPlannedData"
            or data.get("partitions_subset") is not None
        ):
            raise _Unfamiliar  # a planned range: its partitions come from Dagster's subset
        return AssetEventRecord(
            storage_id,
            _text(stored["run_id"]),
            _number(stored["timestamp"]),
            kind,
            _opt_text(event.get("step_key")),
            _asset_key(data["asset_key"]),
            (_opt_text(data["partition"]),),
        )
    data_class, item_field, item_class = _EVENT_ITEMS[kind]
    item = data[item_field]
    if data["__class__"] != data_class or item["__class__"] != item_class:
        raise _Unfamiliar
    return AssetEventRecord(
        storage_id,
        _text(stored["run_id"]),
        _number(stored["timestamp"]),
        kind,
        _opt_text(event.get("step_key")),
        _asset_key(item["asset_key"]),
        (_opt_text(item["partition"]),),
        _metadata(item["metadata_entries"]),
    )


def _metadata(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for entry in entries:
        if entry["__class__"] != "EventMetadataEntry":
            raise _Unfamiliar
        data = entry["entry_data"]
        name = data["__class__"]
        plain = _format()[0]
        if name in plain:
            field_name = plain[name]
            value = None if field_name is None else data[field_name]
            if isinstance(value, dict | list) and _has_markers(value):
                value = _dagster_value(data)  # JSON holding Dagster's own encodings
        else:
            value = _dagster_value(data)
        found[_text(entry["label"])] = value
    return found


def _dagster_value(data: dict[str, Any]) -> Any:
    """A value of a metadata type (table schemas, column lineage...) read as Dagster reads it:
    memoized by its stored JSON when immutable; a mutable one is decoded for each reader."""
    try:
        return _immutable_value(orjson.dumps(data))
    except _Mutable as mutable:
        return mutable.value


class _Mutable(Exception):
    """A decoded value its readers may change: `functools.lru_cache` keeps no exception, so
    raising it hands the value over without memoizing it."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _immutable_value(stored: bytes) -> Any:
    found = metadata_value(dagster_compat.unpack_value(orjson.loads(stored)))
    if isinstance(found, dict | list | set):
        raise _Mutable(found)
    return found


def _has_markers(value: Any) -> bool:
    """Whether JSON data holds a dict Dagster's deserializer would turn into something else
    (checked on its serialized form first: a C-speed search instead of a walk)."""
    return b'"__' in orjson.dumps(value) and _walk_for_markers(value)


def _walk_for_markers(value: Any) -> bool:
    if isinstance(value, dict):
        return not _SERDES_MARKERS.isdisjoint(value) or any(
            _walk_for_markers(item) for item in value.values()
        )
    if isinstance(value, list):
        return any(_walk_for_markers(item) for item in value)
    return False


def _asset_key(stored: dict[str, Any]) -> AssetKey:
    if stored["__class__"] != "AssetKey":
        raise _Unfamiliar
    return _asset_key_of(tuple(stored[_format()[1]]))


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _asset_key_of(path: tuple[str, ...]) -> AssetKey:
    if not path or not all(isinstance(part, str) for part in path):
        raise _Unfamiliar
    return AssetKey(list(path))


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _Unfamiliar
    return value


def _opt_text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _Unfamiliar
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Unfamiliar
    return float(value)


# ---------------------------------------------------------------------- reading the table


def stored_reader(instance: Any) -> Any | None:
    """The instance's SQL event-log storage when `read_stored` returns what
    `get_event_records` would, else None (see `dagster_compat.sql_event_storage`)."""
    return dagster_compat.sql_event_storage(instance)


def read_stored(
    storage: Any,
    kind: DagsterEventType,
    *,
    after_storage_id: int,
    before_storage_id: int | None,
    limit: int,
) -> tuple[list[AssetEventRecord], int, int | None]:
    """Up to `limit` stored events of `kind` after `after_storage_id` (and before
    `before_storage_id`), oldest first: (their records, how many rows were read, the last
    row's storage id). Rows that cannot be read are skipped but counted, so a caller paging by
    row count never mistakes a skipped row for the end of the log."""
    import sqlalchemy as db

    table = dagster_compat.event_log_table()

    query = db.select(table.c.id, table.c.event).where(
        table.c.dagster_event_type == kind.value, table.c.id > after_storage_id
    )
    if before_storage_id is not None:
        query = query.where(table.c.id < before_storage_id)
    query = query.order_by(table.c.id.asc()).limit(limit)
    with storage.index_connection() as connection:
        rows = connection.execute(query).fetchall()
    records = [
        record for record in (decode(row_id, text) for row_id, text in rows) if record is not None
    ]
    return records, len(rows), rows[-1][0] if rows else None
