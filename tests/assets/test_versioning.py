"""The IO manager's two versioning modes: 'rows' (order-independent row hashes in the write
pass, the default) and 'files' (the written files' bytes, no per-row work)."""

from pathlib import Path

import pytest
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, asset, materialize
from pyspark.sql import DataFrame

from dws_dagster import Workspace, dws_ref
from dws_dagster.errors import BindingError, StorageError
from dws_dagster.spark import storage, version_marker
from dws_dagster.workspace.versions import MARKER_NAME, content_version
from tests.conftest import tree_state
from tests.support.pipeline import io_manager

pytestmark = pytest.mark.spark


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace.init(tmp_path / "ws")
    workspace.add_resource("inter", "intermediate-data", path="inter")
    return workspace


def trips_asset(
    spark,
    *,
    rows: int = 500,
    versioning: str | None = None,
    fmt: str = "parquet",
    descending: bool = False,
):
    @asset(metadata=dws_ref("inter", "trips", format=fmt, versioning=versioning))
    def trips() -> DataFrame:
        return (
            spark.range(rows, numPartitions=3)
            .selectExpr("id", "id % 7 AS zone", "CAST(id AS DOUBLE) / 3 AS fare")
            .orderBy("fare", ascending=not descending)
        )

    return trips


def recorded(instance: DagsterInstance) -> dict:
    event = (
        instance.fetch_materializations(AssetRecordsFilter(asset_key=AssetKey("trips")), limit=1)
        .records[0]
        .event_log_entry.asset_materialization
    )
    return {
        "metadata": {k: getattr(v, "value", v) for k, v in event.metadata.items()},
        "tags": event.tags or {},
    }


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_files_versioning_is_the_byte_version_of_the_written_files(spark, ws, fmt):
    with DagsterInstance.ephemeral() as instance:
        trips = trips_asset(spark, versioning="files", fmt=fmt)
        assert materialize(
            [trips], instance=instance, resources={"io_manager": io_manager(ws)}
        ).success
        seen = recorded(instance)
    folder = ws.local_path("inter/trips")
    version = seen["metadata"]["dws/version"]
    assert version == content_version(folder) == ws.version_of("inter/trips")
    assert seen["tags"]["dagster/data_version"] == version
    assert seen["metadata"]["dagster/row_count"] == 500
    assert ws.store.get("inter/trips").version == version
    marker = version_marker.read_marker(spark, str(folder))
    assert marker is not None
    assert marker["versioning"] == "files"
    assert marker["rows"] == 500


def test_the_io_manager_setting_applies_and_an_asset_binding_wins(spark, ws):
    unbound = trips_asset(spark)
    bound_to_rows = trips_asset(spark, versioning="rows")
    with DagsterInstance.ephemeral() as instance:
        materialize(
            [unbound],
            instance=instance,
            resources={"io_manager": io_manager(ws, versioning="files")},
        )
        from_manager = recorded(instance)["metadata"]["dws/version"]
        materialize(
            [bound_to_rows],
            instance=instance,
            resources={"io_manager": io_manager(ws, versioning="files")},
        )
        from_binding = recorded(instance)["metadata"]["dws/version"]
    assert from_manager == content_version(ws.local_path("inter/trips")) != from_binding
    assert (
        version_marker.read_marker(spark, str(ws.local_path("inter/trips")))["versioning"] == "rows"
    )


def test_rows_versioning_ignores_row_order_and_files_versioning_does_not(spark, ws):
    versions: dict[tuple[str, bool], str] = {}
    for versioning in ("rows", "files"):
        for descending in (False, True):
            with DagsterInstance.ephemeral() as instance:
                trips = trips_asset(spark, versioning=versioning, descending=descending)
                materialize([trips], instance=instance, resources={"io_manager": io_manager(ws)})
                versions[versioning, descending] = recorded(instance)["metadata"]["dws/version"]
    assert versions["rows", False] == versions["rows", True]
    assert versions["files", False] != versions["files", True]


def test_unchanged_output_keeps_its_files_version(spark, ws):
    seen = []
    for _ in range(2):
        with DagsterInstance.ephemeral() as instance:
            materialize(
                [trips_asset(spark, versioning="files")],
                instance=instance,
                resources={"io_manager": io_manager(ws)},
            )
            seen.append(recorded(instance)["metadata"]["dws/version"])
    assert seen[0] == seen[1]


def test_unknown_versioning_is_refused_before_anything_is_written(spark, ws, tmp_path):
    with pytest.raises(BindingError, match=r"dws_ref\('inter', 'trips'\).*'bytes'.*rows, files"):
        dws_ref("inter", "trips", versioning="bytes")
    before = tree_state(ws.root)
    with pytest.raises(StorageError, match=r"asset 'x'.*unknown versioning 'bytes'"):
        storage.write_atomic(
            spark.range(3), str(ws.local_path("inter/x")), versioning="bytes", what="asset 'x'"
        )
    assert tree_state(ws.root) == before
    assert not (ws.local_path("inter/x") / MARKER_NAME).exists()


def test_files_versioning_counts_rows_of_partitioned_output(spark, ws):
    @asset(metadata=dws_ref("inter", "by_zone", partition_by=["zone"], versioning="files"))
    def by_zone() -> DataFrame:
        return spark.range(700, numPartitions=2).selectExpr("id", "id % 7 AS zone")

    with DagsterInstance.ephemeral() as instance:
        assert materialize(
            [by_zone], instance=instance, resources={"io_manager": io_manager(ws)}
        ).success
        event = (
            instance.fetch_materializations(
                AssetRecordsFilter(asset_key=AssetKey("by_zone")), limit=1
            )
            .records[0]
            .event_log_entry.asset_materialization
        )
    assert event.metadata["dagster/row_count"].value == 700
    folder = ws.local_path("inter/by_zone")
    assert sorted(p.name for p in folder.glob("zone=*")) == [f"zone={z}" for z in range(7)]
    assert event.metadata["dws/version"].value == content_version(folder)
