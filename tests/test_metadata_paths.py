"""Names read from `.dataworkspace/` never lead a read, write or delete outside the workspace
(or out of their resource), and snapshots with several tags lose one tag at a time.

Every test hand-edits a real workspace's files the way someone could in a cloned repository,
puts sentinels outside the workspace, and runs the real command through the API and the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import Workspace, WorkspaceConfigError
from dws_dagster.errors import InvalidResourceRefError
from dws_dagster.workspace.snapshots import (
    delete_snapshot,
    list_snapshots,
    resolve_snapshot,
    restore_snapshot,
    take_snapshot,
)
from dws_dagster.workspace.swap import kept_version_path

from .conftest import run_step, tree_state, write

RESULTS = "results/exp"


@pytest.fixture
def snap_ws(ws: Workspace) -> Workspace:
    """src -> prep -> train (results), snapshot v1 with a results copy."""
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"})
    run_step(ws, "train", ["inter/prep"], {}, results={"mae": 1.5}, results_dir=RESULTS)
    outcome = take_snapshot(ws, "v1")
    assert outcome.info.results == [{"ref": RESULTS, "folder": "snapshots/v1"}]
    return ws


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Sentinels beside the workspace (`tmp_path/ws`): a folder and a file that no command may
    touch."""
    folder = tmp_path / "outside"
    write(folder / "precious" / "keep.txt", "do not delete\n")
    write(folder / "victim.json", "{}\n")
    return folder


def index_path(ws: Workspace) -> Path:
    return ws.meta_dir / "snapshots" / "index.json"


def edit_index(ws: Workspace, change: Callable[[dict[str, Any]], None]) -> None:
    path = index_path(ws)
    data = json.loads(path.read_text())
    change(data["snapshots"][0])
    path.write_text(json.dumps(data))


def refused_everywhere(ws: Workspace, cli: Any, args: list[str], api: Callable[[], object],
                       fragment: str, watched: list[Path]) -> None:
    """The API raises WorkspaceConfigError naming `fragment`, the CLI exits 1 with one line,
    and nothing under the workspace or `watched` changed."""
    before = {str(root): tree_state(root) for root in [ws.root, *watched]}
    with pytest.raises(WorkspaceConfigError) as caught:
        api()
    message = str(caught.value)
    assert fragment in message and str(ws.meta_dir) in message  # the file, and the field
    code, out, err = cli(*args, "--workspace", ws.root)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err
    assert "Traceback" not in err
    assert {str(root): tree_state(root) for root in [ws.root, *watched]} == before


# ------------------------------------------------------- hand-edited snapshot index


@pytest.mark.parametrize("remove_results", [False, True])
def test_index_hash_leading_outside_deletes_nothing(snap_ws: Workspace, outside: Path, cli,
                                                   remove_results: bool) -> None:
    # The manifest of this "hash" would be .dataworkspace/snapshots/../../../outside/victim.json
    relative = os.path.relpath(outside / "victim", snap_ws.meta_dir / "snapshots")
    edit_index(snap_ws, lambda entry: entry.update(hash=relative))
    flag = ["--remove-results"] if remove_results else []
    refused_everywhere(
        snap_ws, cli, ["delete-snapshot", "v1", *flag],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=remove_results),
        "snapshots[0].hash", [outside])
    assert (outside / "victim.json").exists()


# Every folder here lies inside the test's own temporary folder: run against code without the
# check, the test deletes only its sentinels, never anything else on the machine.
@pytest.mark.parametrize("folder", ["snapshots/../../../outside/precious", "../outside",
                                    "ABSOLUTE", "snapshots", "snapshots/v1/../../..",
                                    "snapshots/a b", "other/v1"])
def test_index_results_folder_must_be_a_snapshot_folder(snap_ws: Workspace, outside: Path,
                                                        cli, folder: str) -> None:
    folder = str(outside / "precious") if folder == "ABSOLUTE" else folder
    edit_index(snap_ws, lambda entry: entry["results"][0].update(folder=folder))
    refused_everywhere(
        snap_ws, cli, ["delete-snapshot", "v1", "--remove-results"],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=True),
        "snapshots[0].results[0].folder", [outside])
    assert (outside / "precious" / "keep.txt").exists()


@pytest.mark.parametrize("ref", ["results/../..", "../results", "src", "inter/prep", 7])
def test_index_results_ref_must_be_a_results_ref(snap_ws: Workspace, cli, ref: Any) -> None:
    # "src" and "inter/prep" are valid refs of resources that do not hold results: deleting
    # their "snapshots/v1" would delete the data of another resource.
    write(snap_ws.root / "data/src/snapshots/v1/data.csv", "source data\n")
    write(snap_ws.root / "data/inter/snapshots/v1/data.csv", "intermediate data\n")
    edit_index(snap_ws, lambda entry: entry["results"][0].update(ref=ref))
    refused_everywhere(
        snap_ws, cli, ["delete-snapshot", "v1", "--remove-results"],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=True),
        "results[0].ref", [])


def test_results_folder_through_a_symlink_is_refused(snap_ws: Workspace, outside: Path,
                                                     cli) -> None:
    snapshots = snap_ws.root / "results" / "snapshots"
    shutil.move(snapshots / "v1", outside / "v1")
    (snapshots / "v1").symlink_to(outside / "v1", target_is_directory=True)
    refused_everywhere(
        snap_ws, cli, ["delete-snapshot", "v1", "--remove-results"],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=True),
        "outside results resource", [outside])
    assert (outside / "v1" / "exp").is_dir()


def test_index_tags_are_checked(snap_ws: Workspace, cli) -> None:
    edit_index(snap_ws, lambda entry: entry.update(tags=["v1", "../x"]))
    refused_everywhere(snap_ws, cli, ["history"], lambda: list_snapshots(snap_ws),
                       "snapshots[0].tags[1]", [])


def test_index_names_used_twice_are_refused(snap_ws: Workspace, cli) -> None:
    path = index_path(snap_ws)
    data = json.loads(path.read_text())
    data["snapshots"].append({**data["snapshots"][0], "hash": "f" * 32})
    path.write_text(json.dumps(data))
    refused_everywhere(snap_ws, cli, ["delete-snapshot", "v1"],
                       lambda: delete_snapshot(snap_ws, "v1"), "snapshots[1]", [])


# ------------------------------------------------------------ manifests and journal


def test_manifest_version_leading_outside_is_refused(snap_ws: Workspace, outside: Path,
                                                     cli) -> None:
    """A version names a kept copy (`.dws/versions/<subpath>/@<version>`): one with a slash
    would lead restore to read (and the swap to move data) outside the resource."""
    info = resolve_snapshot(snap_ws, "v1")
    manifest = snap_ws.meta_dir / "snapshots" / f"{info.hash}.json"
    data = json.loads(manifest.read_text())
    data["refs"]["inter/prep"]["record"]["version"] = "x/../../../../../outside/precious"
    manifest.write_text(json.dumps(data))
    write(snap_ws.root / "data/inter/prep/part-0.csv", "changed\n")
    refused_everywhere(snap_ws, cli, ["restore", "v1"], lambda: restore_snapshot(snap_ws, "v1"),
                       "refs['inter/prep'].record.version", [outside])


def test_journal_reset_naming_a_path_is_refused(snap_ws: Workspace, outside: Path,
                                               cli) -> None:
    segment = sorted((snap_ws.meta_dir / "lineage" / "journal").glob("*.jsonl"))[-1]
    relative = os.path.relpath(outside / "victim", snap_ws.meta_dir / "snapshots")
    with segment.open("a") as handle:
        handle.write(json.dumps({"op": "reset", "snapshot": relative, "unknown": []}) + "\n")
    refused_everywhere(snap_ws, cli, ["status"], lambda: Workspace.open(snap_ws.root).store.items(),
                       "snapshot: '", [outside])


@pytest.mark.parametrize("subpath", ["a" * 256, "é" * 128, "/".join(["b" * 200] * 21)],
                         ids=["ascii-part", "multibyte-part", "whole-subpath"])
def test_stored_refs_over_the_byte_limits_are_a_damaged_file(snap_ws: Workspace, outside: Path,
                                                           cli, subpath: str) -> None:
    """A file name holds 255 bytes and a subpath 4096: a stored ref beyond that is a damaged
    journal (`WorkspaceConfigError` naming it), not a ref refused later, elsewhere."""
    segment = sorted((snap_ws.meta_dir / "lineage" / "journal").glob("*.jsonl"))[-1]
    with segment.open("a") as handle:
        handle.write(json.dumps({"op": "forget", "ref": f"inter/{subpath}"}) + "\n")
    refused_everywhere(snap_ws, cli, ["status"], lambda: Workspace.open(snap_ws.root).store.items(),
                       "ref", [outside])


def test_kept_version_path_stays_inside_the_resource(tmp_path: Path) -> None:
    assert kept_version_path(tmp_path, "a/b", "0" * 32) == \
        tmp_path / ".dws/versions/a/b" / ("@" + "0" * 32)
    for version in ("../../x", "a/b", "a\\b", "", "a\x00b", "x" * 255):
        with pytest.raises(InvalidResourceRefError, match="cannot name a kept copy"):
            kept_version_path(tmp_path, "a", version)


# ------------------------------------------------------------ several tags (class 9)


def tagged_twice(ws: Workspace) -> str:
    take_snapshot(ws, "v2")  # nothing changed: the same snapshot gets a second tag
    info = resolve_snapshot(ws, "v1")
    assert info.tags == ["v1", "v2"]
    return info.hash


def test_deleting_one_of_several_tags_keeps_the_snapshot_api(snap_ws: Workspace) -> None:
    digest = tagged_twice(snap_ws)
    manifest = snap_ws.meta_dir / "snapshots" / f"{digest}.json"
    copy = snap_ws.root / "results/snapshots/v1/exp"

    done = delete_snapshot(snap_ws, "v1", remove_results=True)

    assert not done.deleted and done.removed_tag == "v1" and done.info.tags == ["v2"]
    assert [i.tags for i in list_snapshots(snap_ws)] == [["v2"]]
    assert manifest.exists() and copy.is_dir()  # the snapshot and its results copy stay
    [info] = list_snapshots(snap_ws)
    assert info.results == [{"ref": RESULTS, "folder": "snapshots/v1"}]  # still valid

    # The results copy still serves a restore under the remaining tag.
    shutil.rmtree(snap_ws.local_path(RESULTS))
    write(snap_ws.local_path(RESULTS) / "other.csv", "newer\n")
    report = restore_snapshot(snap_ws, "v2")
    assert RESULTS in report.data_restored

    # A new snapshot tagged v1 (the freed tag) does not collide with the old results folder.
    run_step(snap_ws, "train", ["inter/prep"], {}, results={"mae": 0.5}, results_dir=RESULTS)
    new = take_snapshot(snap_ws, "v1").info
    assert new.hash != digest
    assert new.results == [{"ref": RESULTS, "folder": f"snapshots/{new.hash[:12]}"}]
    assert copy.is_dir()

    # The last tag deletes the snapshot, with its results when asked.
    done = delete_snapshot(snap_ws, "v2", remove_results=True)
    assert done.deleted and done.removed_tag is None
    assert not manifest.exists() and not copy.exists()
    assert [i.hash for i in list_snapshots(snap_ws)] == [new.hash]


def test_deleting_by_hash_deletes_a_snapshot_with_several_tags(snap_ws: Workspace) -> None:
    digest = tagged_twice(snap_ws)
    done = delete_snapshot(snap_ws, digest[:10])
    assert done.deleted and done.info.tags == ["v1", "v2"]
    assert list_snapshots(snap_ws) == []
    assert not (snap_ws.meta_dir / "snapshots" / f"{digest}.json").exists()


def test_deleting_tags_in_the_cli_says_what_happened(snap_ws: Workspace, cli) -> None:
    digest = tagged_twice(snap_ws)
    code, out, err = cli("delete-snapshot", "v2", "--workspace", snap_ws.root)
    assert code == 0 and err == ""
    assert out == f"removed tag v2 from snapshot {digest[:12]} (still tagged v1)\n"
    code, out, _ = cli("history", "--workspace", snap_ws.root)
    assert code == 0 and "v1" in out and "v2" not in out
    code, out, _ = cli("delete-snapshot", "v1", "--workspace", snap_ws.root)
    assert code == 0 and out == f"deleted snapshot v1 ({digest[:12]})\n"
    assert list_snapshots(snap_ws) == []


# ------------------------------------------------------------ data markers


def test_a_marker_version_that_is_not_a_file_name_is_ignored(tmp_path: Path) -> None:
    """`_dws_version.json` beside data names the version its kept copies get; one with a
    slash is not a marker dws_dagster wrote: the data is versioned by its bytes instead."""
    from dws_dagster.workspace.versions import (
        MARKER_NAME,
        MARKER_SCHEME,
        checked_marker,
        content_version,
        effective_version,
    )

    folder = tmp_path / "data"
    write(folder / "part-0.csv", "a\n1\n")
    content = content_version(folder)
    marker = {"format": 1, "scheme": MARKER_SCHEME, "version": "f" * 32, "rows": 1,
              "content": content, "file_format": "csv", "versioning": "rows",
              "columns": [["a", "int"]], "lineage": {"ref": "inter/x", "version": "f" * 32}}
    (folder / MARKER_NAME).write_text(json.dumps(marker))
    assert effective_version(folder) == "f" * 32
    assert checked_marker(marker) == marker
    for version in ("../../outside", "a/b", "", 7, None):
        (folder / MARKER_NAME).write_text(json.dumps({**marker, "version": version}))
        assert effective_version(folder) == content
    broken = {**marker, "lineage": {"ref": "../x", "version": 3}}
    assert checked_marker(broken) == {**marker, "lineage": None}
    assert checked_marker({**marker, "columns": [["a"]]}) is None


def test_values_nested_too_deeply_to_encode_are_refused(snap_ws: Workspace, cli) -> None:
    """orjson reads 1,024 levels but writes 255: a hand-made record nesting its parameters
    600 deep is read, but a snapshot or a compaction (which write it again) refuse with
    WorkspaceConfigError before writing anything — never a TypeError."""
    segment = sorted((snap_ws.meta_dir / "lineage" / "journal").glob("*.jsonl"))[-1]
    deep = "[" * 600 + "]" * 600
    with segment.open("a") as handle:
        handle.write('{"op": "record", "record": {"ref": "inter/deep", "version": "v", '
                     f'"parameters": {{"p": {deep}}}, "step": {{"name": "s"}}}}}}\n')
    before = tree_state(snap_ws.root)
    for action in (lambda: take_snapshot(Workspace.open(snap_ws.root), "v9"),
                   lambda: Workspace.open(snap_ws.root).store.compact()):
        with pytest.raises(WorkspaceConfigError, match="nest too deeply"):
            action()
    code, _, err = cli("snapshot", "v9", "--workspace", snap_ws.root)
    assert code == 1 and err.count("\n") == 1 and "nest too deeply" in err
    assert tree_state(snap_ws.root) == before
    code, out, _ = cli("status", "--workspace", snap_ws.root)  # reading still works
    assert code == 0 and "inter/deep" in out


# ------------------------------------------------- current.json written and checked once


def test_current_json_is_checked_again_unless_it_is_the_file_the_store_wrote(
        snap_ws: Workspace, tmp_path: Path) -> None:
    """The store notes the identity of the `current.json` it wrote and checked (inode, size,
    modification and change times), so opening it again skips the check; an edit in place, even
    of the same size with the modification time put back, or a copy, is checked in full."""
    snap_ws.store.compact()
    current = snap_ws.meta_dir / "lineage" / "current.json"
    assert (snap_ws.meta_dir / "lineage" / "current.checked").exists()
    assert Workspace.open(snap_ws.root).store.get("inter/prep").owner == "prep"
    text = current.read_bytes()
    assert b'"owner":"prep"' in text
    info = current.stat()
    with current.open("r+b") as handle:  # same inode, same size
        handle.write(text.replace(b'"owner":"prep"', b'"owner":123456'))
    os.utime(current, ns=(info.st_atime_ns, info.st_mtime_ns))
    with pytest.raises(WorkspaceConfigError, match=r"refs\['inter/prep'\]\.owner"):
        Workspace.open(snap_ws.root).store.items()

    # A copy (new inodes, times kept) of a workspace with a bad current.json: checked.
    current.write_bytes(text.replace(b'"owner":"prep"', b'"owner":["x"]'))
    Path(snap_ws.meta_dir / "lineage" / "current.checked").write_bytes(
        json.dumps([*map(int, (current.stat().st_dev, current.stat().st_ino,
                               current.stat().st_size, current.stat().st_mtime_ns,
                               current.stat().st_ctime_ns))]).encode())
    copy = tmp_path / "copy"
    shutil.copytree(snap_ws.root, copy)
    with pytest.raises(WorkspaceConfigError, match=r"refs\['inter/prep'\]\.owner"):
        Workspace.open(copy).store.items()


def test_a_manifest_is_checked_again_unless_it_is_the_file_the_store_wrote(
        snap_ws: Workspace) -> None:
    info = resolve_snapshot(snap_ws, "v1")
    manifest = snap_ws.meta_dir / "snapshots" / f"{info.hash}.json"
    assert (snap_ws.meta_dir / "snapshots" / f"{info.hash}.checked").exists()
    restore_snapshot(snap_ws, "v1")  # read through the note
    text = manifest.read_bytes()
    assert b'"owner": "prep"' in text
    info_before = manifest.stat()
    with manifest.open("r+b") as handle:  # same inode and size, times put back
        handle.write(text.replace(b'"owner": "prep"', b'"owner": 123456'))
    os.utime(manifest, ns=(info_before.st_atime_ns, info_before.st_mtime_ns))
    with pytest.raises(WorkspaceConfigError, match=r"refs\['inter/prep'\]\.owner"):
        restore_snapshot(Workspace.open(snap_ws.root), "v1")
    manifest.write_bytes(text)
    delete_snapshot(snap_ws, "v1")
    assert sorted(p.name for p in (snap_ws.meta_dir / "snapshots").iterdir()) == ["index.json"]
