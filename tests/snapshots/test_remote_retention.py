"""Snapshots of remote (object-store, HDFS) data restore while they exist.

No object store or HDFS runs here, so the remote resource is a Hadoop `viewfs://` mount: a real
non-local Hadoop filesystem (the workspace sees a URI it cannot read, Spark and the IO manager
go through Hadoop's FileSystem API with its renames), mounted on a temporary folder so the test
can look at what lies where. The one stand-in is `_FailingSecondMove`, which raises where a
crash would stop a restore between two renames.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from dagster import AssetKey, asset, materialize

from dws_dagster import Workspace, dws_ref
from dws_dagster.assets.materialization import record_from_metadata
from dws_dagster.errors import SnapshotRestoreError, WorkspaceConfigError
from dws_dagster.snapshots.garbage import collect_garbage
from dws_dagster.snapshots.index import delete_snapshot
from dws_dagster.snapshots.restore import finish_interrupted_restore, restore_snapshot
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.spark.remote_data import HadoopData
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.definition import RESTORE_INTENT_FILE
from dws_dagster.workspace.remote_versions import LazyRemoteData, kept_versions
from dws_dagster.workspace.versions import MARKER_NAME
from tests.conftest import tree_state
from tests.support.pipeline import io_manager

REF = "lake/counts"


@pytest.fixture
def lake(spark, tmp_path: Path) -> tuple[str, Path]:
    """A viewfs mount (its own authority, so no other test's mount table is cached) over a
    temporary folder: (the resource URI, the folder holding its data)."""
    authority = f"dws{uuid.uuid4().hex[:10]}"
    folder = tmp_path / "lake-backing"
    folder.mkdir()
    spark.sparkContext._jsc.hadoopConfiguration().set(
        f"fs.viewfs.mounttable.{authority}.link./lake", folder.as_uri()
    )
    return f"viewfs://{authority}/lake", folder


@pytest.fixture
def remote_ws(ws: Workspace, lake: tuple[str, Path]) -> Workspace:
    ws.add_resource("lake", "intermediate-data", uri=lake[0])
    return ws


def _materialize(ws: Workspace, spark, instance, rows: int, **config: Any) -> str:
    @asset(metadata=dws_ref("lake", "counts"))
    def counts() -> Any:
        return spark.range(rows)

    result = materialize(
        [counts], instance=instance, resources={"io_manager": io_manager(ws, **config)}
    )
    assert result.success
    return ws.store.get(REF).version


def _on_disk(folder: Path) -> str:
    """The version of the data in place, read from its marker (not through the code under
    test)."""
    return orjson.loads((folder / "counts" / MARKER_NAME).read_bytes())["version"]


def _kept(folder: Path) -> set[str]:
    kept = folder / ".dws" / "versions" / "counts"
    return (
        {p.name[1:] for p in kept.iterdir() if p.name.startswith("@")} if kept.is_dir() else set()
    )


@pytest.mark.both_stores
def test_remote_versions_snapshots_reference_are_kept_restored_and_freed_by_gc(
    remote_ws: Workspace, lake: tuple[str, Path], spark, instance
) -> None:
    ws, (_, folder) = remote_ws, lake
    v1 = _materialize(ws, spark, instance, 3)
    take_snapshot(ws, "one")
    v2 = _materialize(ws, spark, instance, 5)
    take_snapshot(ws, "two")
    v3 = _materialize(ws, spark, instance, 7)
    v4 = _materialize(ws, spark, instance, 9)
    assert len({v1, v2, v3, v4}) == 4 and _on_disk(folder) == v4
    # v1 and v2 are snapshots' and kept; v3 was no snapshot's and went once v4 was recorded.
    assert {p.name for p in (folder / ".dws" / "versions" / "counts").iterdir()} == {
        f"@{v1}",
        f"@{v2}",
    }

    # Without a way to reach remote data, the restore is refused and nothing changes.
    with pytest.raises(SnapshotRestoreError, match=r"lake/counts.*needs Spark"):
        restore_snapshot(ws, "one")
    assert _on_disk(folder) == v4 and ws.store.get(REF).version == v4

    remote = HadoopData(spark)
    report = restore_snapshot(ws, "one", remote=remote)
    assert report.data_restored == [REF]
    assert _on_disk(folder) == v1 and ws.store.get(REF).version == v1
    assert spark.read.parquet(f"{lake[0]}/counts").count() == 3
    assert _kept(folder) == {v2, v4}  # what the restore replaced is kept in turn
    assert not (ws.meta_dir / RESTORE_INTENT_FILE).exists()

    restore_snapshot(ws, "two", remote=remote)
    assert _on_disk(folder) == v2 and spark.read.parquet(f"{lake[0]}/counts").count() == 5
    assert _kept(folder) == {v1, v4}

    dry = collect_garbage(ws, dry_run=True, remote=remote)
    assert dry.remote_versions == [(REF, v4)] and _kept(folder) == {v1, v4}
    assert collect_garbage(ws, remote=remote).remote_versions == [(REF, v4)]
    assert _kept(folder) == {v1}
    delete_snapshot(ws, "one")
    assert collect_garbage(ws, remote=remote).remote_versions == [(REF, v1)]
    assert _kept(folder) == set()
    # What is left still restores (unchanged), and gc without Spark says what it skipped.
    again = restore_snapshot(ws, "two", remote=remote)
    assert REF in again.data_unchanged and again.data_restored == []
    assert collect_garbage(ws).remote_skipped == ["lake"]


def test_keep_versions_is_the_policy_beyond_snapshots_and_gc_follows_it(
    remote_ws: Workspace, lake: tuple[str, Path], spark, instance
) -> None:
    ws, (_, folder) = remote_ws, lake
    versions = [_materialize(ws, spark, instance, rows, keep_versions=2) for rows in (1, 2, 3, 4)]
    remote = HadoopData(spark)
    assert kept_versions(remote, lake[0], "counts") == versions[1:3]  # oldest first
    # The policy is in the record, and in the metadata that rebuilds it (the sensor's path).
    record = ws.store.get(REF).lineage_record()
    assert record.extra["keep_versions"] == 2
    event = instance.get_latest_materialization_event(AssetKey("counts"))
    metadata = event.asset_materialization.metadata
    rebuilt = record_from_metadata(metadata, asset="counts", run_id=event.run_id, partition=None)
    assert rebuilt is not None and rebuilt.to_json() == record.to_json()
    assert collect_garbage(ws, remote=remote).remote_versions == []  # the writer keeps 2
    _materialize(ws, spark, instance, 5)  # keep_versions=0 from now on
    assert _kept(folder) == set()


class _FailingSecondMove(HadoopData):
    """Raises on the second move, as a crash between a restore's two renames would stop it."""

    def __init__(self, spark) -> None:
        super().__init__(spark)
        self.moves = 0

    def move(self, source: str, destination: str) -> None:
        self.moves += 1
        if self.moves == 2:
            raise OSError("simulated crash between the two renames")
        super().move(source, destination)


def test_a_restore_stopped_between_remote_renames_is_finished_by_the_next_command(
    remote_ws: Workspace, lake: tuple[str, Path], spark, instance
) -> None:
    ws, (_, folder) = remote_ws, lake
    v1 = _materialize(ws, spark, instance, 3)
    take_snapshot(ws, "one")
    v2 = _materialize(ws, spark, instance, 4)
    with pytest.raises(OSError, match="simulated crash"):
        restore_snapshot(ws, "one", remote=_FailingSecondMove(spark))
    # Stopped after moving v2 aside: the ref is empty, the intent says what is left to do.
    assert not (folder / "counts").exists() and _kept(folder) == {v1, v2}
    assert (ws.meta_dir / RESTORE_INTENT_FILE).exists()
    # Finishing needs Spark: without it, it says so and changes nothing.
    with pytest.raises(SnapshotRestoreError, match="needs Spark"):
        finish_interrupted_restore(ws)
    assert finish_interrupted_restore(ws, HadoopData(spark))
    assert _on_disk(folder) == v1 and ws.store.get(REF).version == v1 and _kept(folder) == {v2}
    assert not (ws.meta_dir / RESTORE_INTENT_FILE).exists()


def test_a_damaged_remote_intent_is_named_and_nothing_moves(
    remote_ws: Workspace, lake: tuple[str, Path], spark, instance
) -> None:
    ws, (_, folder) = remote_ws, lake
    v1 = _materialize(ws, spark, instance, 3)
    intent = {
        "format": 1,
        "snapshot": "0" * 64,
        "unknown": [],
        "swaps": [{"ref": REF, "remote": True, "version": "../../../etc"}],
    }
    (ws.meta_dir / RESTORE_INTENT_FILE).write_bytes(orjson.dumps(intent))
    with pytest.raises(WorkspaceConfigError, match="is damaged"):
        finish_interrupted_restore(ws, HadoopData(spark))
    assert _on_disk(folder) == v1 and _kept(folder) == set()


def test_commands_over_local_data_never_start_spark(ws: Workspace) -> None:
    """The CLI hands every command a lazy way to remote data: over local data it is never
    made (no JVM starts)."""

    def refuse() -> Any:
        raise AssertionError("remote data was reached in a workspace with none")

    remote = LazyRemoteData(refuse)
    (ws.local_path("src") / "a.csv").parent.mkdir(parents=True, exist_ok=True)
    (ws.local_path("src") / "a.csv").write_text("x\n1\n")
    take_snapshot(ws, "one", remote=remote)
    (ws.local_path("src") / "a.csv").write_text("x\n2\n")
    restore_snapshot(ws, "one", remote=remote)
    assert (ws.local_path("src") / "a.csv").read_text() == "x\n1\n"
    collect_garbage(ws, remote=remote)


def test_cli_restores_and_collects_remote_data_with_the_machines_spark_configuration(
    remote_ws: Workspace, lake: tuple[str, Path], spark, instance, tmp_path: Path
) -> None:
    """`dws-dagster restore` and `gc` start Spark themselves (with `spark-defaults.conf`, where
    a deployment configures its object store) only because the workspace has remote data."""
    ws, (uri, folder) = remote_ws, lake
    v1 = _materialize(ws, spark, instance, 3)
    take_snapshot(ws, "one")
    v2 = _materialize(ws, spark, instance, 4)
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    authority = uri.split("/")[2]
    (conf / "spark-defaults.conf").write_text(
        f"spark.hadoop.fs.viewfs.mounttable.{authority}.link./lake {folder.as_uri()}\n"
        "spark.master local[1]\nspark.driver.host 127.0.0.1\n"
        "spark.driver.bindAddress 127.0.0.1\n"
    )
    env = {**os.environ, "SPARK_CONF_DIR": str(conf), "SPARK_LOCAL_IP": "127.0.0.1"}
    cli = [sys.executable, "-m", "dws_dagster.cli", "--workspace", str(ws.root)]
    done = subprocess.run(
        [*cli, "restore", "one"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"data restored:  {REF}" in done.stdout
    assert _on_disk(folder) == v1 and _kept(folder) == {v2}
    done = subprocess.run(
        [*cli, "gc", "--format", "json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["remote_versions"] == [{"ref": REF, "version": v2}]
    assert _kept(folder) == set() and "Traceback" not in done.stderr


def test_cli_refuses_remote_data_where_spark_connect_is_configured(
    remote_ws: Workspace, lake: tuple[str, Path], spark, instance, connect_server
) -> None:
    """With Spark Connect configured (`SPARK_REMOTE`, as PySparkResource's `spark.remote`),
    restore and gc cannot reach a remote resource (Hadoop's FileSystem API needs a classic
    session's JVM; the Connect protocol has no filesystem operations): each is refused in one
    line naming the data, the reason and what to do, before anything changes (gc frees no
    local version either)."""
    ws, (uri, folder) = remote_ws, lake
    v1 = _materialize(ws, spark, instance, 3)
    take_snapshot(ws, "one")
    v2 = _materialize(ws, spark, instance, 4)
    forget_databases()
    before = (tree_state(ws.root), tree_state(folder))
    env = {**os.environ, "SPARK_REMOTE": connect_server.url}
    cli = [sys.executable, "-m", "dws_dagster.cli", "--workspace", str(ws.root)]
    for command in (["restore", "one"], ["gc"], ["gc", "--dry-run"]):
        done = subprocess.run(
            [*cli, *command], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 1, command
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"error: {uri}") and "is remote data" in line
        assert f"Spark Connect session configured here ({connect_server.url}" in line
        assert "unset SPARK_REMOTE" in line and "nothing at" in line
        forget_databases()
        assert (tree_state(ws.root), tree_state(folder)) == before, command
    assert _on_disk(folder) == v2 and _kept(folder) == {v1} and ws.store.get(REF).version == v2


def test_the_connect_refusal_shows_the_server_without_its_parameters(monkeypatch) -> None:
    """A Connect URL's parameters may carry a token: the refusal names host and port only,
    and no session is made for it."""
    from dws_dagster.errors import ConnectUnsupportedError
    from dws_dagster.spark.remote_data import hadoop_data

    monkeypatch.setenv("SPARK_REMOTE", "sc://spark.example:443/;token=s3cr3t;user_id=me")
    with pytest.raises(ConnectUnsupportedError) as refused:
        hadoop_data().version("hdfs://namenode:8020/lake/counts")
    said = str(refused.value)
    assert (
        "(sc://spark.example:443, from SPARK_REMOTE)" in said
        and "s3cr3t" not in said
        and "user_id" not in said
    )
