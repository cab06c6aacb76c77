"""The Dagster internals dws_dagster relies on (dagster_compat.py), each exercised against the
installed Dagster so that an upgrade that moves them fails here, loudly."""

import warnings
from pathlib import Path
from typing import Any, ClassVar

import pytest
from dagster import (
    AssetKey,
    Config,
    DagsterEventType,
    DagsterInstance,
    EventRecordsFilter,
    InputContext,
    IOManager,
    OutputContext,
    asset,
    materialize,
)
from dagster._core.definitions.data_version import (
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
)

from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.sensor import event_reader, stored_events
from tests.support.dagster_homes import sqlite_home


class _Probe(IOManager):
    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        self.seen[f"config:{context.asset_key.to_user_string()}"] = dagster_compat.op_config(
            context
        )
        self.seen["tags"] = dagster_compat.run_tags(context)
        dagster_compat.set_data_version(context, f"v-{obj}")

    def load_input(self, context: InputContext) -> Any:
        self.seen["identity"] = dagster_compat.step_identity(context)
        self.seen["consumers"] = dagster_compat.consumer_asset_keys(context)
        self.seen["metadata"] = dagster_compat.asset_metadata(context, AssetKey("child"))
        return 41


class ChildConfig(Config):
    factor: int = 2


@asset
def parent() -> int:
    return 41


@asset(metadata={"owner": "me"})
def child(config: ChildConfig, parent: int) -> int:
    return parent * config.factor


def test_internals_still_work() -> None:
    probe = _Probe()
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [parent, child],
            instance=instance,
            resources={"io_manager": probe},
            run_config={"ops": {"child": {"config": {"factor": 3}}}},
            tags={"dws/replay_of": "abc"},
        )
        assert result.success
        record = instance.fetch_materializations(AssetKey("child"), limit=1).records[0]
        tags = record.event_log_entry.asset_materialization.tags
    assert tags[DATA_VERSION_TAG] == "v-123"
    assert tags[DATA_VERSION_IS_USER_PROVIDED_TAG] == "true"
    assert probe.seen["identity"] == (result.run_id, "child")
    assert probe.seen["consumers"] == [AssetKey("child")]
    assert probe.seen["metadata"]["owner"] == "me"
    assert probe.seen["config:child"] == {"factor": 3}
    assert probe.seen["config:parent"] == {}
    assert probe.seen["tags"]["dws/replay_of"] == "abc"


def test_runs_job_times_reads_many_runs_at_once() -> None:
    """Job name, aware creation and start times and tags of each known run, in one query;
    unknown runs are left out, and the one-run form agrees."""
    import datetime as dt

    with DagsterInstance.ephemeral() as instance:
        runs = [
            materialize([parent], instance=instance, tags={"team": str(i)}).run_id for i in range(3)
        ]
        found = dagster_compat.runs_job_times(instance, [*runs, "no-such-run"])
        assert sorted(found) == sorted(runs)
        for run_id, (job, created, started, tags) in found.items():
            record = instance.get_run_record_by_id(run_id)
            assert job == record.dagster_run.job_name and job
            assert created.tzinfo is not None and started is not None
            assert started.tzinfo is not None and started >= created - dt.timedelta(seconds=1)
            assert abs(created.timestamp() - record.create_timestamp.timestamp()) < 1e-3
            assert tags["team"] == str(runs.index(run_id))
            assert dagster_compat.runs_job_times(instance, [run_id]) == {
                run_id: (job, created, started, tags)
            }
        assert created <= dt.datetime.now(dt.UTC)
        assert dagster_compat.runs_job_times(instance, ["no-such-run"]) == {}
        assert dagster_compat.runs_job_times(instance, []) == {}


def _all_records(instance: DagsterInstance, types: list[DagsterEventType]) -> list[Any]:
    """Every record of `types`, one unlimited query per type, merged: what the reader owes."""
    from dagster._core.events import EVENT_TYPE_TO_PIPELINE_RUN_STATUS

    found: list[Any] = []
    for event_type in types:
        if event_type in EVENT_TYPE_TO_PIPELINE_RUN_STATUS:
            found += instance.fetch_run_status_changes(
                event_type, limit=10_000, ascending=True
            ).records
        else:
            found += instance.get_event_records(
                EventRecordsFilter(event_type=event_type), ascending=True
            )
    return sorted(found, key=lambda record: record.storage_id)


@pytest.mark.parametrize("storage", ["run-sharded", "consolidated"])
def test_event_reader_reads_every_record_once_in_order(
    tmp_path: Path, storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sensor's `EventReader` (built on the internals below): batches of any size, with
    records kept across batches, add up to exactly the event log
    of those types, in storage order, on both SQLite event log storages (asset events read
    from the table's JSON, run events through Dagster)."""
    from dws_dagster.sensor.apply_lineage import EVENT_TYPES

    with (
        DagsterInstance.from_config(sqlite_home(tmp_path, storage)) as instance,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        for _ in range(3):
            materialize(
                [parent, child],
                instance=instance,
                run_config={"ops": {"child": {"config": {"factor": 3}}}},
            )
        expected = [r.storage_id for r in _all_records(instance, list(EVENT_TYPES))]
        assert len(expected) == 3 * (2 + 2 + 1)  # planned, materialized, run success
        reading = instance.get_event_records
        read_ids: list[int] = []

        def counted(*args: Any, **kwargs: Any) -> Any:  # the real reader, its records counted
            found = reading(*args, **kwargs)
            read_ids.extend(record.storage_id for record in found)
            return found

        instance.get_event_records = counted  # type: ignore[method-assign]
        read_stored = stored_events.read_stored
        stored_ids: list[int] = []

        def counted_stored(*args: Any, **kwargs: Any) -> Any:
            found = read_stored(*args, **kwargs)
            stored_ids.extend(record.storage_id for record in found[0])
            return found

        monkeypatch.setattr(stored_events, "read_stored", counted_stored)
        for size in (1, 2, 3, 4, 7, 100):
            read_ids.clear()
            stored_ids.clear()
            reader = event_reader.EventReader(instance, EVENT_TYPES, after_storage_id=0)
            got: list[int] = []
            sizes: list[int] = []
            while batch := reader.next(size):
                sizes.append(len(batch))
                got += [record.storage_id for record in batch]
            assert got == expected, size
            assert len(stored_ids) == 3 * (2 + 2), size  # every asset event from the table
            read_ids.extend(stored_ids)
            assert sorted(read_ids) == sorted(set(read_ids)), size  # none read twice
            assert all(n == size for n in sizes[:-1]) and sizes[-1] <= size, sizes  # full
            middle = expected[4]
            assert [
                r.storage_id
                for r in event_reader.read_event_records(
                    instance, EVENT_TYPES, after_storage_id=middle, limit=3
                )
            ] == expected[5:8]
        instance.get_event_records = reading  # type: ignore[method-assign]
        # records logged after the reader ran dry are found by its next call
        reader = event_reader.EventReader(instance, EVENT_TYPES, after_storage_id=0)
        while reader.next(4):
            pass
        materialize([parent], instance=instance)
        assert len(reader.next(10)) == 2 + 1


def test_event_log_internals_the_sensor_reads_directly(tmp_path) -> None:
    """Each internal the sensor's direct reading of the event log needs, against a real
    SQLite instance: the table and storage it selects from, Dagster's (de)serializer, the run
    status cursor, the beta warning class."""
    import sqlalchemy as db
    from dagster import DagsterEventType, MetadataValue

    from dws_dagster._compat import dagster as compat

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        assert materialize([parent], instance=instance).success
        storage = compat.sql_event_storage(instance)
        assert storage is not None  # the default run-sharded SQLite storage qualifies
        table = compat.event_log_table()
        with storage.index_connection() as connection:
            stored_id, text = connection.execute(
                db.select(table.c.id, table.c.event).where(
                    table.c.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION.value
                )
            ).one()
        entry = compat.deserialize_event_entry(text)
        assert entry.asset_materialization.asset_key == AssetKey("parent")
        assert compat.deserialize_event_entry(text.encode()).run_id == entry.run_id
        record = instance.fetch_materializations(AssetKey("parent"), limit=1).records[0]
        assert record.storage_id == stored_id
        # The cursor `fetch_run_status_changes` takes: after the run started, its success.
        after = compat.event_log_cursor(0)
        changes = instance.fetch_run_status_changes(
            DagsterEventType.RUN_SUCCESS, limit=5, cursor=after, ascending=True
        ).records
        assert [c.event_log_entry.run_id for c in changes] == [entry.run_id]
        assert (
            instance.fetch_run_status_changes(
                DagsterEventType.RUN_SUCCESS,
                limit=5,
                cursor=compat.event_log_cursor(changes[0].storage_id),
                ascending=True,
            ).records
            == []
        )
    # Anything but Dagster's SQL event-log storage is read through Dagster's API instead.
    assert compat.sql_event_storage(object()) is None
    packed = compat.pack_value(MetadataValue.text("x"))
    assert isinstance(packed, dict) and compat.unpack_value(packed) == MetadataValue.text("x")
    assert issubclass(compat.beta_warning(), Warning)
    assert compat.beta_warning().__name__ == "BetaWarning"


def test_event_log_reads_the_reader_builds_on(tmp_path: Path) -> None:
    """`run_status_event_types`, `run_status_changes`, `event_records` (the deprecated
    `get_event_records`, its warning kept inside) and `max_storage_id`, against a real
    instance."""
    from dagster import DagsterEventType

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        assert dagster_compat.max_storage_id(instance) in (None, 0)
        assert materialize([parent], instance=instance).success
        run_types = dagster_compat.run_status_event_types()
        assert DagsterEventType.RUN_SUCCESS in run_types
        assert DagsterEventType.ASSET_MATERIALIZATION not in run_types
        top = dagster_compat.max_storage_id(instance)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing deprecated escapes the compat function
            found = dagster_compat.event_records(
                instance,
                DagsterEventType.ASSET_MATERIALIZATION,
                after_storage_id=0,
                before_storage_id=None,
                limit=10,
            )
        assert [r.event_log_entry.asset_materialization.asset_key for r in found] == [
            AssetKey("parent")
        ]
        assert top is not None and top >= found[0].storage_id
        assert (
            dagster_compat.event_records(
                instance,
                DagsterEventType.ASSET_MATERIALIZATION,
                after_storage_id=0,
                before_storage_id=found[0].storage_id,
                limit=10,
            )
            == []
        )
        success = dagster_compat.run_status_changes(instance, DagsterEventType.RUN_SUCCESS, 0, 5)
        assert [r.event_log_entry.run_id for r in success] == [found[0].event_log_entry.run_id]
        after = success[0].storage_id
        assert (
            dagster_compat.run_status_changes(instance, DagsterEventType.RUN_SUCCESS, after, 5)
            == []
        )
    assert dagster_compat.max_storage_id(_NoMaximum()) is None


class _NoMaximum:
    """An instance whose event log cannot tell its highest id (Dagster's base class raises
    NotImplementedError)."""

    class event_log_storage:
        @staticmethod
        def get_maximum_record_id() -> int:
            raise NotImplementedError


class _RangeProbe(IOManager):
    """Gives each partition of a range its own metadata, and reads the job's asset graph."""

    def __init__(self) -> None:
        self.mapped: list[str] | None = None

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        for key in context.asset_partition_keys:
            dagster_compat.add_partition_metadata(context, key, {"own": f"value-{key}"})
        graph = dagster_compat.asset_graph(context)
        assert graph is not None
        self.mapped = dagster_compat.parent_partition_keys(
            graph, "b", AssetKey("ranged_parent"), AssetKey("ranged_child")
        )

    def load_input(self, context: InputContext) -> Any:
        return None


def test_partition_metadata_reaches_each_partitions_materialization() -> None:
    """A step storing a range (BackfillPolicy.single_run()) gets one materialization per
    partition, each with the metadata the IO manager gave that partition."""
    from dagster import BackfillPolicy, StaticPartitionsDefinition

    parts = StaticPartitionsDefinition(["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @asset(partitions_def=parts, backfill_policy=BackfillPolicy.single_run())
        def ranged_parent() -> int:
            return 1

        @asset(partitions_def=parts, backfill_policy=BackfillPolicy.single_run())
        def ranged_child(ranged_parent: Any) -> int:
            return 2

    probe = _RangeProbe()
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [ranged_parent, ranged_child],
            instance=instance,
            resources={"io_manager": probe},
            tags={
                "dagster/asset_partition_range_start": "a",
                "dagster/asset_partition_range_end": "c",
            },
        )
    seen = {
        (
            event.event_specific_data.materialization.asset_key.to_user_string(),
            event.event_specific_data.materialization.partition,
        ): event.event_specific_data.materialization.metadata["own"].value
        for event in result.get_asset_materialization_events()
    }
    assert seen == {
        (name, key): f"value-{key}"
        for name in ("ranged_parent", "ranged_child")
        for key in ("a", "b", "c")
    }
    assert probe.mapped == ["b"]


def test_preview_warning_is_dagsters_class_for_preview_apis() -> None:
    from dagster import AssetCheckSpec, StaticPartitionsDefinition

    assert dagster_compat.preview_warning().__name__ == "PreviewWarning"
    with pytest.warns(dagster_compat.preview_warning()):
        AssetCheckSpec("c", asset="a", partitions_def=StaticPartitionsDefinition(["x"]))


class ProbeComponent:
    """What `other_component_definitions` gave the probe component, per load."""

    seen: ClassVar[list[list[str]]] = []


def _probe_component_class() -> type:
    from dagster import Component, Definitions

    class _Probe(Component):
        @classmethod
        def load(cls, attributes: Any, context: Any) -> Any:
            return cls()

        def build_defs(self, context: Any) -> Definitions:
            others = dagster_compat.other_component_definitions(
                context, skip=lambda kind: kind.__name__ == "Skipped"
            )
            ProbeComponent.seen.append(
                sorted(
                    key.to_user_string()
                    for defs in others
                    for key in Definitions.merge(defs).resolve_asset_graph().get_all_asset_keys()
                )
            )
            return Definitions()

    return _Probe


def test_other_component_definitions_are_the_rest_of_the_defs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A component sees every other component's definitions, in folders beside and around
    it, each built once (the folder merges the same objects: no duplicate asset)."""
    import sys
    import types

    from dagster import load_from_defs_folder

    module = types.ModuleType("dws_compat_probe")
    module.Probe = _probe_component_class()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dws_compat_probe", module)
    root = tmp_path / "proj"
    defs = root / "src" / "probe_proj" / "defs"
    (defs / "nested" / "lineage").mkdir(parents=True)
    (defs / "other").mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "probe_proj"\nversion = "0"\n\n[tool.dg]\ndirectory_type = '
        '"project"\n\n[tool.dg.project]\nroot_module = "probe_proj"\n'
    )
    for folder in (defs.parent, defs, defs / "nested", defs / "other"):
        (folder / "__init__.py").write_text("")
    asset_code = "from dagster import asset\n\n@asset\ndef {name}() -> int:\n    return 1\n"
    (defs / "top.py").write_text(asset_code.format(name="top"))
    (defs / "other" / "deep.py").write_text(asset_code.format(name="deep"))
    (defs / "nested" / "beside.py").write_text(asset_code.format(name="beside"))
    (defs / "nested" / "lineage" / "defs.yaml").write_text("type: dws_compat_probe.Probe\n")
    monkeypatch.syspath_prepend(str(root / "src"))
    ProbeComponent.seen.clear()
    loaded = load_from_defs_folder(path_within_project=root / "src" / "probe_proj")
    assert ProbeComponent.seen == [["beside", "deep", "top"]]
    assert {k.to_user_string() for k in loaded.resolve_asset_graph().get_all_asset_keys()} == {
        "beside",
        "deep",
        "top",
    }
