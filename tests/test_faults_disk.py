"""A workspace whose disk fills up, or that becomes read-only, in the middle of a write: the run
fails with a StorageError naming the asset, the ref, the cause and what to do; the old data and
its lineage stay whole; once there is room again the next run proceeds.

As root (CI and this machine) the workspace lives on a real small tmpfs, filled by the write
itself or remounted read-only; without root the same error is injected at the OS boundary
where the write's last file is created (the version marker), and the test says which path ran.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, asset, materialize
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dws_dagster import Workspace, dws_ref
from dws_dagster.spark import storage
from dws_dagster.workspace.swap import OLD_PREFIX, STAGING_PREFIX

from .pipeline import io_manager, make_workspace

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REF = "intermediate-data/victim"


def _mount(where: Path, options: str) -> bool:
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path | None]:
    """A 4 MiB tmpfs (None when it cannot be mounted: not root, or no mount rights)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = _mount(where, "size=4m,mode=0755")
    yield where if mounted else None
    if mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _run(ws: Workspace, df: DataFrame):
    @asset(name="victim", metadata=dws_ref("intermediate-data", "victim"))
    def victim() -> DataFrame:
        return df

    with DagsterInstance.ephemeral() as instance:
        return materialize([victim], instance=instance, raise_on_error=False,
                           resources={"io_manager": io_manager(ws)})


def _error(result):
    """The error the IO manager raised (Dagster wraps it in a handle-output error)."""
    failures = result.get_step_failure_events()
    assert len(failures) == 1
    error = failures[0].event_specific_data.error
    while error.cls_name.startswith("Dagster") and error.cause is not None:
        error = error.cause
    return error


def _inject(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """The OS refuses the write's last file, as a full or read-only disk would (no root)."""
    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(storage, "atomic_write_json", refuse)


def _check_old_data_whole(spark, ws: Workspace, old_version: str) -> None:
    target = ws.local_path(REF)
    assert storage.read(spark, str(target)).count() == 50
    assert ws.version_of(REF) == old_version
    state = Workspace.open(ws.root).store.get(REF)
    assert state.version == old_version and not state.unknown
    assert not [p for p in target.parent.iterdir()
                if p.name.startswith((STAGING_PREFIX, OLD_PREFIX))]


@pytest.mark.parametrize("fault", ["disk-full", "read-only"])
def test_full_or_read_only_disk_fails_clearly_and_keeps_old_data(
        spark, tmp_path, small_disk, monkeypatch, fault):
    real = small_disk is not None
    print(f"{fault}: {'real tmpfs' if real else 'injected OSError at the OS boundary'}")
    ws = make_workspace((small_disk or tmp_path) / "ws")
    assert _run(ws, spark.range(50).withColumnRenamed("id", "x")).success
    old_version = ws.version_of(REF)

    if fault == "disk-full":
        # ~13 MB of unique hex strings: more than the disk holds.
        # One task, so no other task of the aborted job is still writing after the failure.
        big = spark.range(200_000).withColumn(
            "s", F.sha2(F.col("id").cast("string"), 256)).coalesce(1)
        if not real:
            _inject(monkeypatch, errno.ENOSPC)
        result = _run(ws, big)
        expected = "disk is full"
    else:
        if real:
            subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        else:
            _inject(monkeypatch, errno.EROFS)
        result = _run(ws, spark.range(70).withColumnRenamed("id", "x"))
        expected = "read-only"

    assert not result.success
    error = _error(result)
    if fault == "read-only" and real:
        # The whole workspace is read-only: the first write, taking the lineage store's lock
        # before any data is touched, is refused and says what to do.
        assert error.cls_name == "WorkspaceWriteError", error.to_string()[-3000:]
        assert "lineage/lock" in error.message and "Read-only file system" in error.message
        assert "remount it read-write" in error.message
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    else:
        assert error.cls_name == "StorageError", error.to_string()[-3000:]
        assert "asset 'victim'" in error.message and REF in error.message
        assert expected in error.message and "previous data is unchanged" in error.message
        # The failed attempt is in the lineage, the last good record kept.
        assert Workspace.open(ws.root).store.get(REF).attempt["status"] == "failed"
    monkeypatch.undo()
    _check_old_data_whole(spark, ws, old_version)
    if fault == "disk-full" and real:
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)

    # Room again: the next run proceeds.
    assert _run(ws, spark.range(70).withColumnRenamed("id", "x")).success
    again = Workspace.open(ws.root)
    assert storage.read(spark, str(ws.local_path(REF))).count() == 70
    assert again.store.get(REF).version == again.version_of(REF) != old_version
