"""Asset events read from the event log's stored JSON (stored_events.py) against the same
events read through Dagster's own deserializer, on real runs of the installed Dagster."""

import datetime as dt
import logging
import math
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import sqlalchemy as db
from dagster import (
    AssetKey,
    AssetObservation,
    BackfillPolicy,
    DagsterEventType,
    DagsterInstance,
    MaterializeResult,
    MetadataValue,
    StaticPartitionsDefinition,
    TableColumn,
    TableColumnDep,
    TableColumnLineage,
    TableRecord,
    TableSchema,
    asset,
    materialize,
)
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.consolidated_sqlite_event_log import (
    ConsolidatedSqliteEventLogStorage,
)
from dagster._serdes import deserialize_value
from dagster_shared.serdes.serdes import pack_value

from dws_dagster.sensor import stored_events
from dws_dagster.sensor.apply_lineage import EVENT_TYPES
from dws_dagster.sensor.event_reader import EventReader
from dws_dagster.sensor.stored_events import AssetEventRecord, decode, read_stored, stored_reader
from tests.support.dagster_homes import sqlite_home

SCHEMA = TableSchema(columns=[TableColumn("id", "bigint"), TableColumn("fare", "double")])
RICH_METADATA: dict[str, Any] = {
    "dws/ref": "inter/rich",
    "text": "plain text",
    "json": {"nested": [1, {"a": None}]},
    "json_list": [1, 2.5, "x"],
    "int": 2**62,
    "negative": -3,
    "float": 0.1,
    "whole_float": 2.0,
    "bool": False,
    "null": MetadataValue.null(),
    "url": MetadataValue.url("https://example.org/x"),
    "path": MetadataValue.path("/data/x.parquet"),
    "md": MetadataValue.md("# title"),
    "timestamp": MetadataValue.timestamp(dt.datetime(2026, 1, 2, tzinfo=dt.UTC)),
    "dagster/column_schema": SCHEMA,
    "dagster/row_count": 12,
    "dagster/column_lineage": TableColumnLineage(
        deps_by_column={"id": [TableColumnDep(asset_key=AssetKey("raw"), column_name="id")]}
    ),
    "asset": MetadataValue.asset(AssetKey(["a", "b"])),
    "table": MetadataValue.table(
        [TableRecord({"x": 1})], schema=TableSchema(columns=[TableColumn("x", "int")])
    ),
    "unicode": "zoné ✓",
}
DAYS = StaticPartitionsDefinition(["d1", "d2", "d3"])


@asset(key=AssetKey(["nested", "rich"]))
def rich() -> MaterializeResult:
    return MaterializeResult(metadata=RICH_METADATA)


@asset(partitions_def=DAYS)
def daily() -> MaterializeResult:
    return MaterializeResult(metadata={"dws/ref": "inter/daily", "rows": 3})


@asset(partitions_def=DAYS, backfill_policy=BackfillPolicy.single_run())
def ranged() -> MaterializeResult:
    return MaterializeResult(metadata={"rows": 9})


@asset
def not_a_number() -> MaterializeResult:
    return MaterializeResult(metadata={"nan": float("nan"), "inf": float("inf")})


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory):
    home = sqlite_home(tmp_path_factory.mktemp("stored"), "consolidated")
    with DagsterInstance.from_config(home) as instance, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        materialize([rich], instance=instance)
        materialize([daily], instance=instance, partition_key="d2")
        materialize(
            [ranged],
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": "d1",
                "dagster/asset_partition_range_end": "d3",
            },
        )
        materialize([not_a_number], instance=instance)
        instance.report_runless_asset_event(
            AssetObservation(
                asset_key="observed",
                partition=None,
                metadata={"dws/ref": "src/observed", "dws/version": "v1", "size": 3},
            )
        )
        yield instance


def _rows(instance: DagsterInstance) -> list[tuple[int, str]]:
    table = SqlEventLogStorageTable
    query = (
        db.select(table.c.id, table.c.event)
        .where(
            table.c.dagster_event_type.in_([kind.value for kind in stored_events.ASSET_EVENT_TYPES])
        )
        .order_by(table.c.id)
    )
    with instance.event_log_storage.index_connection() as connection:
        return [tuple(row) for row in connection.execute(query).fetchall()]


def _as_dagster_reads_it(storage_id: int, text: str) -> AssetEventRecord | None:
    return AssetEventRecord.from_entry(storage_id, deserialize_value(text, EventLogEntry))


def _same(left: AssetEventRecord | None, right: AssetEventRecord | None) -> bool:
    """Equal, counting NaN equal to NaN (Python's == never does)."""
    if left is None or right is None:
        return left is right

    def comparable(record: AssetEventRecord) -> tuple[AssetEventRecord, dict[str, Any]]:
        metadata = {
            k: "NaN" if isinstance(v, float) and math.isnan(v) else v
            for k, v in record.metadata.items()
        }
        return replace(record, metadata={}), metadata

    return comparable(left) == comparable(right)


def test_every_stored_asset_event_reads_as_dagster_reads_it(instance) -> None:
    rows = _rows(instance)
    kinds = set()
    for storage_id, text in rows:
        expected = _as_dagster_reads_it(storage_id, text)
        assert expected is not None
        assert _same(decode(storage_id, text), expected), storage_id
        kinds.add(expected.kind)
    assert kinds == set(stored_events.ASSET_EVENT_TYPES)
    records = [_as_dagster_reads_it(i, t) for i, t in rows]
    by_key = {(r.asset_key.to_user_string(), r.kind): r for r in records if r is not None}
    rich_record = by_key[("nested/rich", DagsterEventType.ASSET_MATERIALIZATION)]
    assert rich_record.metadata["dagster/column_schema"] == SCHEMA
    assert rich_record.metadata["json"] == {"nested": [1, {"a": None}]}
    assert rich_record.metadata["int"] == 2**62 and rich_record.metadata["null"] is None
    assert by_key[("daily", DagsterEventType.ASSET_MATERIALIZATION)].partition == "d2"
    assert sorted(
        r.partition
        for r in records
        if r.asset_key == AssetKey("ranged")
        and r.kind == DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ) == ["d1", "d2", "d3"]


def test_a_planned_partition_range_is_read_from_dagsters_subset(instance) -> None:
    """A plan may name its partitions as a subset (a range) instead of one partition; the
    subset's keys are Dagster's to compute."""
    storage_id, text = next(
        (i, t)
        for i, t in _rows(instance)
        if "AssetMaterializationPlannedData" in t and '"daily"' in t
    )
    stored = orjson.loads(text)
    data = stored["dagster_event"]["event_specific_data"]
    data["partition"] = None
    data["partitions_subset"] = pack_value(DAYS.subset_with_partition_keys(["d3", "d1"]))
    text = orjson.dumps(stored).decode()
    record = decode(storage_id, text)
    assert record == _as_dagster_reads_it(storage_id, text)
    assert record.partitions == ("d1", "d3")


def test_common_events_are_read_without_dagster_objects(instance) -> None:
    """The point of the module: materializations, observations and single-partition plans
    are read from the JSON itself (Dagster's deserializer only for what it cannot read)."""
    fast = 0
    for storage_id, text in _rows(instance):
        expected = _as_dagster_reads_it(storage_id, text)
        name = expected.asset_key.to_user_string()
        planned = expected.kind == DagsterEventType.ASSET_MATERIALIZATION_PLANNED
        if name == "not_a_number" and not planned:
            with pytest.raises(orjson.JSONDecodeError):  # NaN is not JSON: Dagster reads it
                orjson.loads(text)
            continue
        if name == "ranged" and planned:
            continue
        assert stored_events._decode(storage_id, orjson.loads(text)) == expected
        fast += 1
    assert fast >= 8


def test_json_metadata_holding_dagster_encodings_is_decoded_by_dagster(instance) -> None:
    storage_id, text = next(
        (i, t)
        for i, t in _rows(instance)
        if '"dws/ref"' in t and "nested" in t and "StepMaterialization" in t
    )
    stored = orjson.loads(text)
    entries = stored["dagster_event"]["event_specific_data"]["materialization"]["metadata_entries"]
    json_entry = next(e for e in entries if e["label"] == "json")
    json_entry["entry_data"]["data"] = {"ids": {"__set__": [3, 1]}}
    text = orjson.dumps(stored).decode()
    record = decode(storage_id, text)
    assert record == _as_dagster_reads_it(storage_id, text)
    assert stored_events._has_markers(json_entry["entry_data"]["data"])


def test_unreadable_rows_are_skipped_named_and_counted(tmp_path: Path, caplog) -> None:
    with (
        DagsterInstance.from_config(sqlite_home(tmp_path, "consolidated")) as instance,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        materialize([daily], instance=instance, partition_key="d1")
        kind = DagsterEventType.ASSET_MATERIALIZATION
        with instance.event_log_storage.index_connection() as connection:
            connection.execute(
                SqlEventLogStorageTable.insert().values(
                    run_id="r", event="{not json", dagster_event_type=kind.value
                )
            )
            if hasattr(connection, "commit"):
                connection.commit()
        materialize([daily], instance=instance, partition_key="d3")
        storage = stored_reader(instance)
        with caplog.at_level(logging.WARNING, logger="dws_dagster.sensor"):
            records, rows, last = read_stored(
                storage, kind, after_storage_id=0, before_storage_id=None, limit=2
            )
        assert rows == 2 and [r.partition for r in records] == ["d1"]
        broken = last
        assert f"event log record {broken} could not be read" in caplog.text
        # the reader pages past the broken row: a short page is not taken for the end
        reader = EventReader(instance, EVENT_TYPES, after_storage_id=0)
        found = []
        while batch := reader.next(2):
            found += batch
        assert [
            r.partition for r in found if isinstance(r, AssetEventRecord) and r.kind == kind
        ] == ["d1", "d3"]


@pytest.mark.parametrize("storage", ["run-sharded", "consolidated"])
def test_sqlite_storages_are_read_from_their_table(tmp_path: Path, storage: str) -> None:
    with DagsterInstance.from_config(sqlite_home(tmp_path, storage)) as instance:
        assert stored_reader(instance) is instance.event_log_storage
    assert stored_reader(DagsterInstance.ephemeral()) is not None


def test_storages_reading_their_own_way_are_read_through_dagster() -> None:
    class Custom(ConsolidatedSqliteEventLogStorage):
        def get_event_records(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
            raise AssertionError("not called")

    custom = object.__new__(Custom)  # the check looks at the class only
    assert stored_reader(SimpleNamespace(event_log_storage=custom)) is None
    assert stored_reader(SimpleNamespace(event_log_storage=object())) is None
    assert stored_reader(SimpleNamespace()) is None
