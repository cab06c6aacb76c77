"""Snapshots capture every resource's data and retain it: versions computed from the stat-keyed
hash cache, content-addressed files, drift, code, restore from retention, gc."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.errors import SnapshotRestoreError, WorkspaceConfigError
from dws_dagster.snapshots import retention, snapshot_data
from dws_dagster.snapshots.diff import diff_lineage
from dws_dagster.snapshots.file_hashes import RACY_SECONDS, FileHashCache
from dws_dagster.snapshots.garbage import collect_garbage
from dws_dagster.snapshots.index import delete_snapshot, list_snapshots
from dws_dagster.snapshots.objects import ObjectStore, protection_holds
from dws_dagster.snapshots.restore import INTENT_FILE, restore_snapshot
from dws_dagster.snapshots.take import take_snapshot
from tests.conftest import run_step, write
from tests.support.store_db import damage, sql, workspace_state

PAST = time.time() - 3600


def age(root: Path) -> None:
    """Make every file under `root` an hour old: old enough for its hash to be cached."""
    for path in [root, *root.rglob("*")]:
        if path.is_file() and not path.is_symlink():
            os.utime(path, (PAST, PAST))


def new_ws(root: Path) -> Workspace:
    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    ws.add_resource("code", "code", path="code")
    return ws


# ---------------------------------------------------------------------------- versions

_NAMES = st.sampled_from(
    [
        "a.csv",
        "b.parquet",
        "_SUCCESS",
        ".hidden",
        "x.crc",
        "_meta",
        "sub",
        "deep",
        "part-00000-0f0e0d0c-0b0a-0908-0706-050403020100-c000.snappy.parquet",
        "part-00001-00000000-1111-2222-3333-444444444444.csv",
        "é.txt",
    ]
)
_TREES = st.dictionaries(
    st.lists(_NAMES, min_size=1, max_size=3).map(tuple),
    st.binary(max_size=40),
    min_size=0,
    max_size=8,
)


def _plant(folder: Path, tree: dict[tuple[str, ...], bytes]) -> None:
    for parts, data in tree.items():
        path = folder.joinpath(*parts)
        # A file on the way to a deeper one would need to be a folder: skip that collision.
        if any(p.is_file() for p in [*path.parents][: len(parts) - 1]) or path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_TREES, listing=st.booleans())
def test_a_scan_versions_any_tree_as_version_of_does_and_keeps_every_file(
    tree: dict[tuple[str, ...], bytes], listing: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.init(Path(tmp) / "ws")
        ws.add_resource(
            "src", "source-data", path="src", versioning="listing" if listing else "content"
        )
        folder = ws.local_path("src/d")
        folder.mkdir(parents=True)
        _plant(folder, tree)
        age(folder)
        expected = ws.version_of("src/d")
        cache = FileHashCache.of_workspace(ws.meta_dir)
        found = retention.scan(ws, "src/d", cache)
        assert found.version == expected
        # Every regular file comes back on a restore: data and sidecars alike.
        on_disk = sorted(
            p.relative_to(folder).as_posix()
            for p in folder.rglob("*")
            if p.is_file()
            and not any(
                part.startswith((".", "_")) or part.endswith(".crc")
                for part in p.relative_to(folder).parts[:-1]
            )
        )
        assert [f.relpath for f in found.files] == on_disk
        cache.save()
        # Again from the cache: the same version, and no file read.
        with mock.patch.object(
            retention, "hash_and_size", side_effect=AssertionError("read a cached file")
        ):
            again = retention.scan(ws, "src/d", FileHashCache.of_workspace(ws.meta_dir))
        assert again.version == expected and again.files == found.files


def test_a_cached_hash_serves_only_while_the_file_is_unchanged(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    path = write(ws.local_path("src/t") / "a.csv", "x\n1\n")
    age(path.parent)

    def scan() -> str | None:
        cache = FileHashCache.of_workspace(ws.meta_dir)
        found = retention.scan(ws, "src/t", cache)
        cache.save()
        return found.version

    first = scan()
    # Rewritten in place to the same size, and its modification time put back: the change
    # time still moved, so the file is read again.
    path.write_text("x\n2\n")
    os.utime(path, (PAST, PAST))
    assert scan() == ws.version_of("src/t") != first
    # Replaced by another file (a new inode) with the same size and times.
    other = path.with_name("b.tmp")
    other.write_text("x\n3\n")
    os.utime(other, (PAST, PAST))
    os.replace(other, path)
    assert scan() == ws.version_of("src/t")
    # A file written just now is not cached at all: a write in the same clock tick would be
    # invisible to its stamps.
    fresh = write(ws.local_path("src/t") / "c.csv", "new\n")
    scan()
    cache = FileHashCache.of_workspace(ws.meta_dir)
    cache.load(ws.local_path("src/t"))
    assert cache.get(str(fresh), fresh.stat()) is None
    assert cache.get(str(path), path.stat()) is not None
    assert time.time() - fresh.stat().st_mtime < RACY_SECONDS + 60


# --------------------------------------------------------------------------- retention


def test_unchanged_data_costs_nothing_to_retain_again(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n" * 1000)
    for n in range(5):
        run_step(ws, f"step{n}", ["src/trips.csv"], {f"inter/o{n}": f"{n}\n" * 2000})
    total = sum(p.stat().st_size for p in (ws.root / "data").rglob("*") if p.is_file())
    first = take_snapshot(ws, "v1").retention
    # Five outputs, the observed source, the source resource and the (empty) code resource.
    assert first is not None and first.new_versions == 8
    if first.linked or first.cloned:  # hard links or clones of the files: no space at all
        assert first.bytes_added < total
    else:
        assert first.bytes_added == total

    run_step(ws, "step3", ["src/trips.csv"], {"inter/o3": "changed\n" * 10})
    second = take_snapshot(ws, "v2").retention
    changed = (ws.local_path("inter/o3") / "part-0.csv").stat().st_size
    assert second is not None and second.new_versions == 1 and second.files_added == 1
    assert second.bytes_added in (0, changed)  # the one changed file, or a clone of it
    assert second.versions == 8

    # Each snapshot restores the other's data, the unchanged refs untouched.
    report = restore_snapshot(ws, "v1")
    assert report.data_restored == ["inter/o3"]
    assert ws.version_of("inter/o3") == ws.store.get("inter/o3").version
    assert (ws.local_path("inter/o3") / "part-0.csv").read_text() == "3\n" * 2000


def test_spark_data_is_linked_read_only_so_an_in_place_write_cannot_corrupt_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Data with a Spark marker is hard-linked into retention and made read-only, where that
    protects it: not for root, whom file modes do not stop. As root, this test runs itself as
    an unprivileged user in a child process where that user can run Python; where it cannot
    (an interpreter under root's home), the links and modes are checked as root, the refusal
    of an in-place write (the kernel's part) not."""
    if protection_holds():
        _linked_scenario(tmp_path / "ws", refused=True)
        return
    if not _runs_as_nobody():
        monkeypatch.setattr("dws_dagster.snapshots.objects.protection_holds", lambda: True)
        _linked_scenario(tmp_path / "ws", refused=False)
        return
    folder = Path(tempfile.mkdtemp(prefix="dws-nobody-"))
    try:
        os.chmod(folder, 0o777)
        done = _as_nobody(
            textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parents[2])!r})
            from pathlib import Path
            from tests.snapshots.test_retention import _linked_scenario
            _linked_scenario(Path({str(folder)!r}) / "ws", refused=True)
            print("ok")
        """),
            folder,
        )
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_nobody(code: str, home: Path) -> subprocess.CompletedProcess:
    def drop() -> None:
        os.setgid(65534)
        os.setuid(65534)

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=drop,
        env={**os.environ, "HOME": str(home)},
    )


def _runs_as_nobody() -> bool:
    try:
        return _as_nobody("import shutil, dws_dagster, pytest", Path("/")).returncode == 0
    except PermissionError:  # the interpreter itself is out of reach
        return False


def _linked_scenario(root: Path, *, refused: bool) -> None:
    ws = new_ws(root)
    folder = ws.local_path("src/spark")
    _spark_like(folder, b"rows-v1")
    ws.store.observe("src/spark", ws.version_of("src/spark"))
    outcome = take_snapshot(ws, "v1")
    assert outcome.retention is not None and outcome.retention.linked >= 1
    assert outcome.retention.bytes_added == 0
    part = folder / "part-00000.parquet"
    assert part.stat().st_nlink == 2 and not part.stat().st_mode & stat.S_IWUSR
    if refused:
        with pytest.raises(PermissionError):
            part.write_bytes(b"edited in place")
    # Spark replaces data (a new folder renamed over the old): the kept version is intact.
    shutil.rmtree(folder)
    _spark_like(folder, b"rows-v2")
    assert ws.version_of("src/spark") != ws.store.get("src/spark").version
    report = restore_snapshot(ws, "v1")
    assert report.data_restored == ["src", "src/spark"]  # with the source resource
    assert part.read_bytes() == b"rows-v1"


def _spark_like(folder: Path, data: bytes) -> None:
    """A folder as Spark's writer leaves it, with dws_dagster's marker (written by the same
    code path the IO manager's storage layer uses)."""
    from dws_dagster.workspace.files import atomic_write_json
    from dws_dagster.workspace.versions import MARKER_NAME, MARKER_SCHEME, content_version

    folder.mkdir(parents=True)
    (folder / "part-00000.parquet").write_bytes(data)
    (folder / "_SUCCESS").write_bytes(b"")
    content = content_version(folder)
    atomic_write_json(
        folder / MARKER_NAME,
        {
            "format": 1,
            "scheme": MARKER_SCHEME,
            "version": "s" + content[1:],
            "rows": 1,
            "content": content,
            "file_format": "parquet",
            "versioning": "rows",
            "columns": [],
        },
    )


# -------------------------------------------------------------------- drift and code


def test_a_hand_edit_is_captured_as_drift_diffed_and_restored(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"})
    v1 = take_snapshot(ws, "v1")
    assert v1.drift == []
    recorded = ws.store.get("inter/prep").version

    write(ws.local_path("inter/prep") / "part-0.csv", "edited by hand\n")
    v2 = take_snapshot(ws, "v2")
    assert v2.created and v2.info.hash != v1.info.hash and v2.drift == ["inter/prep"]
    # The lineage still says what the step wrote; the snapshot says what was there.
    assert ws.store.get("inter/prep").version == recorded
    [row] = [r for r in snapshot_data.rows_of(ws, v2.info.hash) if r.ref == "inter/prep"]
    assert row.kind == "drift" and row.version == ws.version_of("inter/prep")
    [change] = diff_lineage(ws, "v1", "v2")
    assert change.ref == "inter/prep" and change.kind == "changed"
    assert change.changes[0].startswith("changed outside any step (drift): data ")

    restore_snapshot(ws, "v1")
    assert ws.version_of("inter/prep") == recorded
    restore_snapshot(ws, "v2")
    assert (ws.local_path("inter/prep") / "part-0.csv").read_text() == "edited by hand\n"
    assert diff_lineage(ws, "v2", "current") == []


def test_source_data_and_code_nothing_recorded_are_captured_and_restored(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    write(ws.root / "data/src/raw/a.csv", "a\n1\n")
    write(ws.root / "code/train.py", "print('v1')\n")
    v1 = take_snapshot(ws, "v1").info
    rows = {r.ref: r for r in snapshot_data.rows_of(ws, v1.hash)}
    assert rows["src"].kind == "resource" and rows["code"].kind == "code"
    assert v1.resources == {}  # code not in git: its files are its state

    write(ws.root / "data/src/raw/a.csv", "a\n2\n")
    write(ws.root / "code/train.py", "print('v2')\n")
    v2 = take_snapshot(ws, "v2").info
    assert v2.hash != v1.hash
    changes = {c.ref: c.changes for c in diff_lineage(ws, "v1", "v2")}
    assert set(changes) == {"src", "code"}
    assert changes["code"][0].startswith("code ") and changes["src"][0].startswith("source ")

    report = restore_snapshot(ws, "v1")
    assert report.data_restored == ["code", "src"] and report.code_left == []
    assert (ws.root / "code/train.py").read_text() == "print('v1')\n"
    assert (ws.root / "data/src/raw/a.csv").read_text() == "a\n2\n".replace("2", "1")
    assert not take_snapshot(ws).created  # exactly v1 again


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_code_in_git_records_its_commit_and_is_left_to_git_unless_asked(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    ws = new_ws(tmp_path / "ws")
    code = ws.root / "code"
    write(code / "train.py", "print('v1')\n")
    _git(ws.root, "init", "-q")
    _git(ws.root, "add", "code")
    _git(ws.root, "commit", "-q", "-m", "v1")
    first_commit = _git(ws.root, "rev-parse", "HEAD")
    v1 = take_snapshot(ws, "v1").info
    assert v1.resources == {"code": {"git_commit": first_commit, "dirty": False}}

    write(code / "train.py", "print('v2')\n")
    dirty = take_snapshot(ws, "dirty").info
    assert dirty.resources == {"code": {"git_commit": first_commit, "dirty": True}}
    _git(ws.root, "commit", "-q", "-am", "v2")
    v2 = take_snapshot(ws, "v2").info
    changes = {c.ref: c.changes for c in diff_lineage(ws, "v1", "v2")}
    assert any(line.startswith(f"git commit {first_commit[:12]} -> ") for line in changes["code"])

    report = restore_snapshot(ws, "v1")
    [(ref, why)] = report.code_left
    assert ref == "code" and first_commit[:12] in why and "--code" in why
    assert (code / "train.py").read_text() == "print('v2')\n"  # git's checkout untouched
    assert (ws.root / ".git").is_dir()
    report = restore_snapshot(ws, "v1", code=True)
    assert report.code_left == [] and "code" in report.data_restored
    assert (code / "train.py").read_text() == "print('v1')\n"
    assert v2.hash != v1.hash


# ------------------------------------------------------------------ refusals and damage


def test_a_damaged_retained_file_refuses_the_restore_and_changes_nothing(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"})
    run_step(ws, "feat", ["src/trips.csv"], {"inter/feat": "F\n1\n"})
    take_snapshot(ws, "v1")
    found = snapshot_data.manifest(ws, "inter/feat", ws.store.get("inter/feat").version)
    assert found is not None
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n2\n"})
    run_step(ws, "feat", ["src/trips.csv"], {"inter/feat": "F\n2\n"})
    damaged = ObjectStore.of_workspace(ws.meta_dir).path_of(found[1][0].digest)
    os.chmod(damaged, 0o644)
    damaged.write_text("F\n9\n")  # bit rot: same name, other bytes
    before = workspace_state(ws)
    with pytest.raises(
        SnapshotRestoreError,
        match=r"inter/feat: no kept copy .* damaged copy"
        r".*nothing was changed",
    ):
        restore_snapshot(ws, "v1")
    assert workspace_state(ws) == before  # inter/prep was staged, and removed again


def test_a_retained_path_leading_out_of_its_ref_is_refused(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"})
    take_snapshot(ws, "v1")
    version = ws.store.get("inter/prep").version
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n2\n"})
    files = sql(ws, "SELECT files FROM dws_data_versions WHERE ref = 'inter/prep'")[0][0]
    damage(
        ws,
        "UPDATE dws_data_versions SET files = :files WHERE ref = 'inter/prep'",
        files=files.replace('"part-0.csv"', '"../../../escaped.csv"'),
    )
    before = workspace_state(ws)
    with pytest.raises(
        WorkspaceConfigError,
        match=rf"retained version {version[:12]} of "
        r"inter/prep names the file '\.\./\.\./\.\./escaped\.csv'",
    ):
        restore_snapshot(ws, "v1")
    assert workspace_state(ws) == before
    assert not (ws.root.parent / "escaped.csv").exists()


def test_a_damaged_restore_intent_is_named_and_nothing_is_done(tmp_path: Path, cli) -> None:
    ws = new_ws(tmp_path / "ws")
    take_snapshot(ws, "v1")
    (ws.meta_dir / INTENT_FILE).write_text(
        '{"format": 1, "snapshot": "x", "unknown": [], '
        '"swaps": [{"ref": "inter/a", "staging": '
        '"../../etc"}]}'
    )
    code, _, err = cli("status", "-w", ws.root)
    assert code == 1 and INTENT_FILE in err and "damaged" in err and "Traceback" not in err


# ---------------------------------------------------------------------------------- gc


def test_gc_frees_only_what_no_snapshot_references(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    states = {}
    for n in range(3):
        run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": f"A\n{n}\n" * 100})
        take_snapshot(ws, f"v{n}")
        states[f"v{n}"] = ws.store.get("inter/prep").version
    before = workspace_state(ws)
    assert collect_garbage(ws, dry_run=True).versions == []
    assert workspace_state(ws) == before
    delete_snapshot(ws, "v1")
    dry = collect_garbage(ws, dry_run=True)
    assert dry.versions == [("inter/prep", states["v1"])] and dry.objects == 1
    assert workspace_state(ws)[0] == before[0]  # a dry run deletes no file
    done = collect_garbage(ws)
    assert done.versions == dry.versions and done.objects == 1
    assert done.bytes_freed == len("A\n1\n" * 100)
    assert collect_garbage(ws).objects == 0
    for tag in ("v0", "v2", "v0"):
        restore_snapshot(ws, tag)
        assert ws.version_of("inter/prep") == states[tag]


# ----------------------------------------------------------------------- kill -9


def _killed_at(ws: Workspace, target: str, count: int, action: str) -> subprocess.CompletedProcess:
    """Run `action` (Python) in a child process that kills itself with SIGKILL on the
    `count`-th call of `target` (module:function): a crash at that exact point, nothing
    mocked but the moment."""
    module, function = target.split(":")
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        import importlib
        from dws_dagster import LineageBuilder, Workspace
        mod = importlib.import_module({module!r})
        owner, _, name = {function!r}.rpartition(".")
        holder = getattr(mod, owner) if owner else mod
        real = getattr(holder, name)
        calls = [0]
        def dying(*args, **kwargs):
            calls[0] += 1
            if calls[0] == {count}:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        setattr(holder, name, dying)
        from dws_dagster.snapshots.restore import restore_snapshot
        from dws_dagster.snapshots.take import take_snapshot
        from dws_dagster.snapshots.garbage import collect_garbage
        ws = Workspace.open({str(ws.root)!r})
        {action}
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def _three_versions(root: Path) -> tuple[Workspace, dict[str, dict[str, str]]]:
    ws = new_ws(root)
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    seen = {}
    for tag, n in (("v1", 1), ("v2", 2)):
        for step in ("prep", "feat", "model"):
            run_step(ws, step, ["src/trips.csv"], {f"inter/{step}": f"{step} {n}\n"})
        take_snapshot(ws, tag)
        seen[tag] = {ref: s.version for ref, s in ws.store.items()}
    return ws, seen


def test_kill_9_while_taking_a_snapshot_leaves_no_snapshot(tmp_path: Path) -> None:
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    for step in ("prep", "feat", "model"):
        run_step(ws, step, ["src/trips.csv"], {f"inter/{step}": f"{step}\n"})
    before = workspace_state(ws)
    done = _killed_at(
        ws, "dws_dagster.snapshots.objects:ObjectStore.add", 3, "take_snapshot(ws, 'v1')"
    )
    assert done.returncode == -9, done.stderr
    fresh = Workspace.open(ws.root)
    assert take_snapshot(fresh, "v1").created  # no half snapshot named v1 in the way
    delete_snapshot(fresh, "v1")
    collect_garbage(fresh)
    assert workspace_state(fresh) == before


@pytest.mark.parametrize("point", [1, 2, 3])
def test_kill_9_during_restore_is_finished_by_the_next_command(
    tmp_path: Path, cli, point: int
) -> None:
    ws, seen = _three_versions(tmp_path / "ws")
    done = _killed_at(
        ws,
        "dws_dagster.snapshots.restore:swap_into_place",
        point,
        "restore_snapshot(ws, 'v1')",
    )
    assert done.returncode == -9, done.stderr
    assert (ws.meta_dir / INTENT_FILE).exists()
    code, _, err = cli("status", "-w", ws.root)
    assert code == 0 and "finished a restore that was interrupted" in err
    fresh = Workspace.open(ws.root)
    assert {ref: s.version for ref, s in fresh.store.items()} == seen["v1"]
    for ref, version in seen["v1"].items():
        assert fresh.version_of(ref) == version
    assert not (ws.meta_dir / INTENT_FILE).exists()
    assert not take_snapshot(fresh).created


def test_kill_9_while_staging_a_restore_changes_nothing(tmp_path: Path) -> None:
    ws, _seen = _three_versions(tmp_path / "ws")
    before = workspace_state(ws)
    done = _killed_at(ws, "dws_dagster.snapshots.retention:stage", 2, "restore_snapshot(ws, 'v1')")
    assert done.returncode == -9, done.stderr
    assert not (ws.meta_dir / INTENT_FILE).exists()
    # Only a staged copy beside a ref is left, which nothing reads; the data and the
    # lineage are v2's.
    after = {
        name: digest
        for name, digest in workspace_state(ws)[0].items()
        if ".dws-staging-" not in name
    }
    assert after == before[0] and workspace_state(ws)[1] == before[1]


def test_kill_9_during_gc_keeps_every_snapshot_restorable(tmp_path: Path) -> None:
    ws, seen = _three_versions(tmp_path / "ws")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "prep 3\n"})
    run_step(ws, "feat", ["src/trips.csv"], {"inter/feat": "feat 3\n"})
    take_snapshot(ws, "v3")
    delete_snapshot(ws, "v2")
    done = _killed_at(
        ws, "dws_dagster.snapshots.objects:ObjectStore.remove", 2, "collect_garbage(ws)"
    )
    assert done.returncode == -9, done.stderr
    fresh = Workspace.open(ws.root)
    collect_garbage(fresh)
    assert collect_garbage(fresh).objects == 0
    for tag in ("v1", "v3", "v1"):
        report = restore_snapshot(fresh, tag)
        assert report.not_restored == []
    for ref, version in seen["v1"].items():
        assert fresh.version_of(ref) == version


# ------------------------------------------------------------ gc during a snapshot


def _paused_at(
    ws: Workspace, folder: Path, target: str, count: int, action: str, *, after: bool = False
) -> subprocess.Popen[str]:
    """Start `action` (Python) in a child process that stops at the `count`-th call of
    `target` (module:function; before it, or `after` it returned) until `folder/go` exists,
    having made `folder/paused`: the moment is the only thing injected. Returns once the child
    is stopped there."""
    module, function = target.split(":")
    folder.mkdir()
    code = textwrap.dedent(f"""
        import importlib, sys, time
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from dws_dagster import Workspace
        folder = Path({str(folder)!r})
        mod = importlib.import_module({module!r})
        owner, _, name = {function!r}.rpartition(".")
        holder = getattr(mod, owner) if owner else mod
        real = getattr(holder, name)
        calls = [0]
        def stop():
            (folder / "paused").touch()
            while not (folder / "go").exists():
                time.sleep(0.01)
        def pausing(*args, **kwargs):
            calls[0] += 1
            if calls[0] == {count} and not {after!r}:
                stop()
            result = real(*args, **kwargs)
            if calls[0] == {count} and {after!r}:
                stop()
            return result
        setattr(holder, name, pausing)
        from dws_dagster.snapshots.take import take_snapshot
        from dws_dagster.snapshots.garbage import collect_garbage
        ws = Workspace.open({str(ws.root)!r})
        {action}
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    while not (folder / "paused").exists():
        if child.poll() is not None:
            raise AssertionError(f"never reached {target}: {child.communicate()[1][-2000:]}")
        time.sleep(0.01)
    return child


def _finished(child: subprocess.Popen[str]) -> None:
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]


def _gc_prey(root: Path) -> tuple[Workspace, dict[str, str]]:
    """A workspace whose deleted snapshot left versions for gc to free, and whose data has
    changed since, so that the next snapshot retains new files (several: it pauses between)."""
    ws = new_ws(root)
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    for step in ("prep", "feat", "model"):
        run_step(ws, step, ["src/trips.csv"], {f"inter/{step}": f"{step} 1\n"})
    take_snapshot(ws, "old")
    delete_snapshot(ws, "old")
    write(ws.local_path("src/trips.csv"), "a\n2\n")
    for step in ("prep", "feat", "model"):
        run_step(ws, step, ["src/trips.csv"], {f"inter/{step}": f"{step} 2\n"})
    return ws, {ref: state.version for ref, state in ws.store.items()}


#: Where a snapshot may stand when gc runs: (what it calls there, which call, after it
#: returned?, holding the store's lock?).
SNAPSHOT_PHASES = {
    "scanning the data": ("dws_dagster.snapshots.retention:scan", 1, False, False),
    "in the middle of copying a file": (
        "dws_dagster.snapshots.objects:_make_read_only",
        1,
        False,
        False,
    ),
    "between two copies": (
        "dws_dagster.snapshots.objects:ObjectStore.add",
        2,
        False,
        False,
    ),
    "copied everything, not yet locked": (
        "dws_dagster.snapshots.take:_retain",
        1,
        True,
        False,
    ),
    "committing under the lock": (
        "dws_dagster.snapshots.snapshot_data:save_rows",
        1,
        False,
        True,
    ),
}


@pytest.mark.parametrize("phase", sorted(SNAPSHOT_PHASES))
def test_gc_while_a_snapshot_is_stopped_at_any_phase_leaves_it_whole(
    tmp_path: Path, phase: str
) -> None:
    """gc frees what no snapshot references, and a snapshot retains its files before taking
    the lock gc holds: whatever the snapshot is doing when gc runs, the snapshot is taken and
    restores, and gc frees exactly what it should."""
    ws, seen = _gc_prey(tmp_path / "ws")
    target, count, after, locked = SNAPSHOT_PHASES[phase]
    snapshot = _paused_at(
        ws, tmp_path / "snap", target, count, "take_snapshot(ws, 'new')", after=after
    )
    gc_child = None
    if locked:  # gc waits for the lock: in a process of its own, let go of before the snapshot
        gc_child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; sys.path.insert(0, sys.argv[2]); from dws_dagster import Workspace;"
                "from dws_dagster.snapshots.garbage import collect_garbage;"
                "collect_garbage(Workspace.open(sys.argv[1]))",
                str(ws.root),
                str(Path(__file__).parents[2]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    else:
        collect_garbage(Workspace.open(ws.root))
    (tmp_path / "snap/go").touch()
    _finished(snapshot)
    if gc_child is not None:
        _finished(gc_child)
    fresh = Workspace.open(ws.root)
    assert [info.tags for info in list_snapshots(fresh)] == [["new"]]
    collect_garbage(fresh)
    for step in ("prep", "feat", "model"):
        run_step(fresh, step, ["src/trips.csv"], {f"inter/{step}": f"{step} 3\n"})
    shutil.rmtree(fresh.resource_root("src"))
    report = restore_snapshot(fresh, "new")
    assert report.not_restored == []
    for ref, version in seen.items():
        assert fresh.version_of(ref) == version, ref
    assert collect_garbage(fresh).objects == 0


def test_gc_stopped_between_its_passes_or_while_deleting_lets_a_snapshot_through(
    tmp_path: Path,
) -> None:
    """The other way round: gc stopped after dropping versions (no lock held) while a snapshot
    is taken whole, and gc stopped while deleting objects (the lock held) while a snapshot
    copies its files and then waits for the lock."""
    ws, seen = _gc_prey(tmp_path / "ws")
    gc = _paused_at(  # its third lock: the first pass's, drop_versions' (joins it), the second
        ws,
        tmp_path / "gc1",
        "dws_dagster.store.transactions:StoreTransactions.locked",
        3,
        "collect_garbage(ws)",
    )
    take_snapshot(Workspace.open(ws.root), "mid")
    (tmp_path / "gc1/go").touch()
    _finished(gc)
    write(ws.local_path("src/trips.csv"), "a\n4\n")
    gc = _paused_at(
        ws,
        tmp_path / "gc2",
        "dws_dagster.snapshots.objects:ObjectStore.clear_leftovers",
        1,
        "collect_garbage(ws)",
    )
    snapshot = _paused_at(
        ws,
        tmp_path / "snap",
        "dws_dagster.snapshots.take:_retain",
        1,
        "take_snapshot(ws, 'late')",
        after=True,
    )
    (tmp_path / "gc2/go").touch()
    _finished(gc)
    (tmp_path / "snap/go").touch()
    _finished(snapshot)
    fresh = Workspace.open(ws.root)
    collect_garbage(fresh)
    for tag in ("mid", "late", "mid"):
        assert restore_snapshot(fresh, tag).not_restored == []
    for ref, version in seen.items():
        assert fresh.version_of(ref) == version, ref


def test_the_hash_cache_forgets_files_that_are_gone(tmp_path: Path) -> None:
    """Spark names its files anew on every write: entries of files no longer there are
    dropped by the next snapshot, so the cache does not grow without end."""
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    folder = ws.local_path("inter/prep")
    for n in range(3):
        shutil.rmtree(folder, ignore_errors=True)
        builder = (
            LineageBuilder()
            .with_step_name("prep")
            .with_parameters({"n": n})
            .with_workspace_directory(ws.root)
            .with_input_refs(["src/trips.csv"])
        )
        with builder.eval() as lineage:
            lineage.add_output_ref("inter/prep")
            write(folder / f"part-{n}.csv", f"{n}\n")
        age(ws.root / "data")
        take_snapshot(ws)
    cache = FileHashCache.of_workspace(ws.meta_dir)
    cache.load(ws.root)
    assert sorted(Path(p).name for p in cache._known) == ["part-2.csv", "trips.csv"]


def test_a_file_uri_resource_is_retained_and_restored_like_a_folder(tmp_path: Path) -> None:
    """A resource given as a `file://` URI (data outside the workspace folder, named as a
    URI): its data is local, so it is retained and restored like a folder's."""
    ws = new_ws(tmp_path / "ws")
    elsewhere = tmp_path / "lake"
    ws.add_resource("lake", "intermediate-data", uri=f"file://{elsewhere}")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"lake/prep": "A\n1\n"})
    assert (elsewhere / "prep/part-0.csv").read_text() == "A\n1\n"
    take_snapshot(ws, "v1")
    run_step(ws, "prep", ["src/trips.csv"], {"lake/prep": "A\n2\n"})
    report = restore_snapshot(ws, "v1")
    assert report.data_restored == ["lake/prep"]
    assert (elsewhere / "prep/part-0.csv").read_text() == "A\n1\n"
    assert ws.version_of("lake/prep") == ws.store.get("lake/prep").version


def test_a_snapshot_copies_without_holding_the_store_and_sees_what_steps_commit_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copying data can take long (a first snapshot copies everything), and steps wait for
    the store's lock: the copy happens outside it. A step that commits meanwhile (here, from
    inside the first copy: it would wait for the lock if the snapshot held it) is in the
    snapshot: under the lock, changed lineage means a new scan."""
    ws = new_ws(tmp_path / "ws")
    write(ws.local_path("src/trips.csv"), "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"})
    real_add = ObjectStore.add
    calls = []

    def add(self: ObjectStore, source: str, digest: str, *, link: bool) -> object:
        calls.append(source)
        if len(calls) == 1:
            run_step(Workspace.open(ws.root), "feat", ["src/trips.csv"], {"inter/feat": "F\n"})
        return real_add(self, source, digest, link=link)

    monkeypatch.setattr(ObjectStore, "add", add)
    outcome = take_snapshot(ws, "v1")
    refs = {row.ref for row in snapshot_data.rows_of(ws, outcome.info.hash)}
    assert {"inter/prep", "inter/feat"} <= refs
    monkeypatch.undo()
    run_step(ws, "feat", ["src/trips.csv"], {"inter/feat": "F\n2\n"})
    assert restore_snapshot(ws, "v1").data_restored == ["inter/feat"]
    assert (ws.local_path("inter/feat") / "part-0.csv").read_text() == "F\n"
