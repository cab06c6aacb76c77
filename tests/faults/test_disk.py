"""A workspace whose disk fills up, or that becomes read-only, in the middle of a write.

Every writer is covered: the lineage store's database (its commits of lineage, snapshot
manifests and index), the results archive copy, the OpenLineage outbox, data restored from a
snapshot, `init` and `add`, and a Spark asset write. Each fails with a `DwsError` naming the
file or the store and what to do (a full disk also says how much is free, where dws_dagster
writes the file itself), nothing written earlier is lost (no half-applied transaction,
no half-replaced JSON, no temp or staging file left), and the next write succeeds once there is
room.

As root (CI and this machine) the workspace lives on a real small tmpfs, filled by a filler
file or remounted read-only. Without root the Spark test injects the error at the OS boundary
where the write's last file is created (the version marker) and says which path ran; the other
tests need the real disk and skip.
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
from dws_dagster.errors import DwsError
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.snapshots.garbage import collect_garbage
from dws_dagster.snapshots.index import list_snapshots
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.spark import storage, version_marker
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.swap import OLD_PREFIX, STAGING_PREFIX
from tests.conftest import run_step, write
from tests.support.pipeline import io_manager, make_workspace
from tests.support.store_db import db_dump

REF = "intermediate-data/victim"


def _mount(where: Path, options: str) -> bool:
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
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
        return materialize(
            [victim],
            instance=instance,
            raise_on_error=False,
            resources={"io_manager": io_manager(ws)},
        )


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

    monkeypatch.setattr(version_marker, "atomic_write_json", refuse)


def _check_old_data_whole(spark, ws: Workspace, old_version: str) -> None:
    target = ws.local_path(REF)
    assert storage.read(spark, str(target)).count() == 50
    assert ws.version_of(REF) == old_version
    state = Workspace.open(ws.root).store.get(REF)
    assert state.version == old_version and not state.unknown
    assert not [
        p for p in target.parent.iterdir() if p.name.startswith((STAGING_PREFIX, OLD_PREFIX))
    ]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("fault", ["disk-full", "read-only"])
def test_full_or_read_only_disk_fails_clearly_and_keeps_old_data(
    spark, tmp_path, small_disk, monkeypatch, fault
):
    real = small_disk is not None
    print(f"{fault}: {'real tmpfs' if real else 'injected OSError at the OS boundary'}")
    ws = make_workspace((small_disk or tmp_path) / "ws")
    assert _run(ws, spark.range(50).withColumnRenamed("id", "x")).success
    old_version = ws.version_of(REF)

    if fault == "disk-full":
        # ~13 MB of unique hex strings: more than the disk holds.
        # One task, so no other task of the aborted job is still writing after the failure.
        big = (
            spark.range(200_000)
            .withColumn("s", F.sha2(F.col("id").cast("string"), 256))
            .coalesce(1)
        )
        if not real:
            _inject(monkeypatch, errno.ENOSPC)
        result = _run(ws, big)
        expected = "disk is full"
    else:
        if real:
            # No connection of this process holds the store open for writing, or the kernel
            # refuses the remount (busy): the next run opens it on a read-only disk.
            forget_databases()
            subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        else:
            _inject(monkeypatch, errno.EROFS)
        result = _run(ws, spark.range(70).withColumnRenamed("id", "x"))
        expected = "read-only"

    assert not result.success
    error = _error(result)
    if fault == "read-only" and real:
        # The whole workspace is read-only: the first write, taking the lineage store's lock
        # before any data is touched, is refused, naming the store and what to do.
        assert error.cls_name == "StoreUnavailableError", error.to_string()[-3000:]
        assert f"workspace store {ws.store.shown}" in error.message
        assert "writable" in error.message
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    else:
        assert error.cls_name == "StorageError", error.to_string()[-3000:]
        assert "asset 'victim'" in error.message and REF in error.message
        assert expected in error.message and "previous data is unchanged" in error.message
        state = Workspace.open(ws.root).store.get(REF)
        if fault == "disk-full" and real and state.attempt is None:
            # The disk Spark filled holds the store too: whether the failed attempt's pages
            # still fit depends on what the failed write left behind when it was recorded.
            # When they do not, the error says so and the last good record is kept.
            assert state.version == old_version
            assert "could not be recorded in the lineage store either" in error.to_string()
            assert "free space" in error.to_string()
        else:
            # The failed attempt is in the lineage, the last good record kept.
            assert state.attempt["status"] == "failed" and state.version == old_version
    monkeypatch.undo()
    _check_old_data_whole(spark, ws, old_version)
    if fault == "disk-full" and real:
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)

    # Room again: the next run proceeds.
    assert _run(ws, spark.range(70).withColumnRenamed("id", "x")).success
    again = Workspace.open(ws.root)
    assert storage.read(spark, str(ws.local_path(REF))).count() == 70
    assert again.store.get(REF).version == again.version_of(REF) != old_version


# ------------------------------------------------------ every writer of the workspace


class Disk:
    """A real 1 MiB tmpfs that a test fills, empties, or makes read-only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / "filler"

    def fill(self) -> None:
        """Take every free page: any write needing a new one fails with ENOSPC."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for size in (1 << 16, 1 << 12, 1):
                with pytest.raises(OSError) as full:
                    while True:
                        os.write(fd, b"\0" * size)
                assert full.value.errno == errno.ENOSPC
        finally:
            os.close(fd)

    def make_room(self) -> None:
        self.filler.unlink()

    def read_only(self, yes: bool = True) -> None:
        subprocess.run(
            ["mount", "-o", f"remount,{'ro' if yes else 'rw'}", str(self.root)], check=True
        )


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    where = tmp_path / "disk"
    where.mkdir()
    if not _mount(where, "size=1m,mode=0755"):
        pytest.skip(
            "needs a real tmpfs (root with mount rights): the write errors come from "
            "the kernel, not from a mock"
        )
    yield Disk(where)
    subprocess.run(["umount", "-l", str(where)], check=False)


def _small_ws(root: Path) -> Workspace:
    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    write(root / "data/src/trips.csv", "a\n1\n")
    return ws


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` (lock files aside) with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock") and p.name != "lock"
    }


def _meta(ws: Workspace) -> tuple[dict[str, bytes], object]:
    """The workspace's own files and its store's rows (the database's files change when only
    read: SQLite's WAL index; the file-hash cache is refreshed by anything that versions)."""
    files = {
        name: data
        for name, data in _files(ws.meta_dir).items()
        if not name.startswith(("store.db", "cache/"))
    }
    return files, db_dump(ws)


def _check_store_full(exc: BaseException, ws: Workspace) -> None:
    """A full disk under the store: a DwsError naming the store (its file) that says so."""
    assert isinstance(exc, DwsError), repr(exc)
    message = str(exc)
    assert f"workspace store {ws.store.shown}" in message, message
    assert "disk is full" in message, message


def _leftovers(root: Path) -> list[Path]:
    return [
        p
        for p in root.rglob("*")
        if p.name.endswith(".tmp") or p.name.startswith((STAGING_PREFIX, OLD_PREFIX))
    ]


def _check_full_disk_error(exc: BaseException, *names: str) -> None:
    assert isinstance(exc, DwsError), repr(exc)
    message = str(exc)
    assert "No space left on device" in message and "free space" in message, message
    assert all(name in message for name in names), message


#: The small results snapshot's own files (its retained files and their folders, the results
#: copy), a page each, and no room for the store's commit.
ROOM_FOR_SMALL_SNAPSHOT = 8 * 4096
BIG = {"blob": "x" * 9000}  # a record over two pages: it cannot fit in a page's slack


def test_lineage_commit_on_a_full_disk(disk: Disk) -> None:
    ws = _small_ws(disk.root / "ws")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"}, {"scale": 2})
    good = Workspace.open(ws.root).store.get("inter/prep")
    meta_before = _meta(ws)
    disk.fill()
    with pytest.raises(DwsError) as raised:
        run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "B\n2\n"}, BIG)
    _check_store_full(raised.value, ws)
    assert _meta(ws) == meta_before
    assert not _leftovers(ws.root)
    again = Workspace.open(ws.root).store.get("inter/prep")
    assert again.version == good.version and again.record == good.record

    disk.make_room()
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "B\n2\n"}, BIG)
    state = Workspace.open(ws.root).store.get("inter/prep")
    assert state.status == "ok" and state.version != good.version
    assert state.record["parameters"]["blob"] == BIG["blob"]


def test_a_commit_on_a_full_disk_changes_nothing(disk: Disk) -> None:
    """The failure at the commit itself (the write lock taken while there was room): the
    transaction is rolled back whole and the store stays readable and writable."""
    from dws_dagster.workspace.records import LineageRecord, StepInfo

    ws = _small_ws(disk.root / "ws")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"}, {"scale": 2})
    store = Workspace.open(ws.root).store
    states = {ref: state.to_json() for ref, state in store.items()}
    meta_before = _meta(ws)
    records = [
        LineageRecord(
            ref=f"inter/o{n}", version=f"v{n}", step=StepInfo(name=f"s{n}"), parameters=BIG
        )
        for n in range(20)
    ]
    with pytest.raises(DwsError) as raised:
        with store.locked():
            disk.fill()
            store.commit(records)
    _check_store_full(raised.value, ws)
    assert _meta(ws) == meta_before
    assert {ref: state.to_json() for ref, state in Workspace.open(ws.root).store.items()} == states

    disk.make_room()
    store.commit(records)
    assert Workspace.open(ws.root).store.get("inter/o19").version == "v19"


def test_a_full_disk_under_the_store_says_to_free_space(disk: Disk) -> None:
    ws = _small_ws(disk.root / "ws")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"})
    disk.fill()
    with pytest.raises(DwsError) as raised:
        Workspace.open(ws.root).store.observe("src/trips.csv", "0" * 32)
    message = str(raised.value)
    assert "free space" in message and "restore it from a backup" not in message


@pytest.fixture
def results_ws(disk: Disk) -> Workspace:
    ws = _small_ws(disk.root / "ws")
    run_step(
        ws,
        "train",
        ["src/trips.csv"],
        {},
        {"gamma": 0.1},
        results={"mae": 1.5},
        results_dir="results/exp",
    )
    return ws


@pytest.mark.parametrize("big_results", [False, True], ids=["manifest", "results-copy"])
def test_snapshot_on_a_full_disk(disk: Disk, results_ws: Workspace, cli, big_results: bool) -> None:
    ws = results_ws
    if big_results:  # the copy of the results into results/snapshots/ is what fails
        write(ws.root / "results/exp/model.bin", "m" * 150_000)
        run_step(
            ws,
            "train",
            ["src/trips.csv"],
            {},
            {"gamma": 0.2},
            results={"mae": 1.2},
            results_dir="results/exp",
        )
    meta_before = _meta(ws)
    disk.fill()
    if big_results:  # room for the store's commit, not for the copy
        os.truncate(disk.filler, os.path.getsize(disk.filler) - 100_000)
    else:  # room for retaining the small data and the results copy, not for the commit
        os.truncate(disk.filler, os.path.getsize(disk.filler) - ROOM_FOR_SMALL_SNAPSHOT)
    with pytest.raises(DwsError) as api_error:  # the API names the archive, as the CLI does
        take_snapshot(Workspace.open(ws.root), "s1")
    if big_results:
        _check_full_disk_error(api_error.value, str(ws.root))
    else:
        _check_store_full(api_error.value, ws)
    code, _, err = cli("snapshot", "s1", "-w", ws.root)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert str(ws.root) in err
    assert ("No space left on device" if big_results else "disk is full") in err
    # Files retained before the failure are named by nothing: gc frees them.
    collect_garbage(Workspace.open(ws.root))
    assert _meta(ws) == meta_before
    assert not _leftovers(ws.root) and not (ws.root / "results/snapshots/s1").exists()
    assert list_snapshots(Workspace.open(ws.root)) == []

    disk.make_room()
    code, out, err = cli("snapshot", "s1", "-w", ws.root)
    assert code == 0, err
    assert [info.tags for info in list_snapshots(Workspace.open(ws.root))] == [["s1"]]
    assert (ws.root / "results/snapshots/s1/exp/results.json").is_file()


def test_restoring_data_on_a_full_disk_keeps_the_data_there(
    disk: Disk, results_ws: Workspace, cli
) -> None:
    ws = results_ws
    write(ws.root / "results/exp/model.bin", "m" * 100_000)
    run_step(
        ws,
        "train",
        ["src/trips.csv"],
        {},
        {"gamma": 0.2},
        results={"mae": 1.2},
        results_dir="results/exp",
    )
    assert cli("snapshot", "s1", "-w", ws.root)[0] == 0
    write(ws.root / "results/exp/model.bin", "n" * 10)
    run_step(
        ws,
        "train",
        ["src/trips.csv"],
        {},
        {"gamma": 0.3},
        results={"mae": 1.1},
        results_dir="results/exp",
    )
    data_before = _files(ws.root / "results/exp")
    meta_before = _meta(ws)
    disk.fill()
    code, _, err = cli("restore", "s1", "-w", ws.root)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "No space left on device" in err and "results/exp" in err and "free space" in err
    assert _files(ws.root / "results/exp") == data_before
    assert _meta(ws) == meta_before
    assert not _leftovers(ws.root)

    disk.make_room()
    code, out, err = cli("restore", "s1", "-w", ws.root)
    assert code == 0, err
    assert (ws.root / "results/exp/model.bin").read_text() == "m" * 100_000
    assert Workspace.open(ws.root).store.get("results/exp").record["parameters"] == {"gamma": 0.2}


def _event(n: int) -> dict:
    return {
        "eventTime": f"2026-03-01T12:{n % 60:02d}:00+00:00",
        "eventType": "START",
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/x",
        "run": {"runId": f"00000000-0000-0000-0000-{n:012d}"},
        "job": {"namespace": "t", "name": f"job{n}" + "j" * 5000},
        "inputs": [],
        "outputs": [],
    }


class _Collecting:
    """A transport that keeps what it is sent."""

    kind = "test"

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def emit(self, event: dict) -> None:
        self.sent.append(event)

    def close(self) -> None:
        pass


def test_outbox_spool_and_delivery_marks_on_a_full_disk(disk: Disk) -> None:
    ws = _small_ws(disk.root / "ws")
    outbox = Outbox(ws)
    assert outbox.spool([_event(1), _event(2)]) == 2
    transport = _Collecting()
    assert outbox.deliver(transport).sent == 2
    assert outbox.spool([_event(3)]) == 1
    before = db_dump(ws)
    disk.fill()
    with pytest.raises(DwsError) as raised:
        Outbox(ws).spool([_event(n) for n in range(4, 9)])
    _check_full_disk_error(raised.value, "store.db")
    with pytest.raises(DwsError) as raised:  # event 3 is sent; marking it cannot be saved
        Outbox(ws).deliver(transport)
    _check_full_disk_error(raised.value, "store.db")
    forget_databases()
    assert db_dump(Workspace.open(ws.root)) == before and not _leftovers(ws.root)
    assert Outbox(ws).status().pending == 1

    disk.make_room()
    fresh = Outbox(ws)
    assert fresh.spool([_event(4)]) == 1
    assert fresh.deliver(transport).sent == 2  # event 3 again (at least once), then 4
    assert Outbox(ws).status().pending == 0 and Outbox(ws).status().delivered == 4


def test_init_and_add_on_a_read_only_or_full_disk(disk: Disk, cli) -> None:
    ws = _small_ws(disk.root / "ws")
    resources = (ws.meta_dir / "resources.json").read_bytes()
    disk.fill()
    code, _, err = cli(
        "add", "more", "--role", "results", "--uri", "s3a://b/r" + "x" * 5000, "-w", ws.root
    )
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "No space left on device" in err and "resources.json" in err
    assert (ws.meta_dir / "resources.json").read_bytes() == resources
    assert not _leftovers(ws.root)
    disk.make_room()

    disk.read_only()
    try:
        code, _, err = cli("init", disk.root / "other")
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert "Read-only file system" in err and str(disk.root / "other") in err
        assert "read-write" in err
        code, _, err = cli("add", "more", "--role", "results", "--path", "more", "-w", ws.root)
        assert code == 1 and "Read-only file system" in err and str(ws.meta_dir) in err
        with pytest.raises(DwsError, match="Read-only file system"):
            Workspace.open(ws.root).add_resource("more", "results", path="more")
        code, _, err = cli("snapshot", "s1", "-w", ws.root)
        assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
        # SQLite cannot open its WAL index there: named as the store, to be made writable.
        assert f"workspace store {ws.store.shown}" in err and "writable" in err
    finally:
        disk.read_only(False)
    assert (ws.meta_dir / "resources.json").read_bytes() == resources
    assert cli("add", "more", "--role", "results", "--path", "more", "-w", ws.root)[0] == 0
    assert cli("init", disk.root / "other")[0] == 0
