"""Names read from the workspace's store never lead a read, write or delete outside the
workspace (or out of their resource), and snapshots with several tags lose one tag at a time.

Every test hand-edits a real workspace's store the way someone could with a database client (or
by restoring a backup of another version), puts sentinels outside the workspace, and runs the
real command through the API and the CLI.
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
from dws_dagster.snapshots.index import (
    delete_snapshot,
    list_snapshots,
    resolve_snapshot,
)
from dws_dagster.snapshots.restore import restore_snapshot
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace.swap import kept_version_path
from tests.conftest import run_step, tree_state, write
from tests.support.store_db import damage, sql, workspace_state

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


def edit_index(ws: Workspace, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the first snapshot's index entry in the store's tables, as a hand edit would."""
    [(digest, message, created, metrics, results)] = sql(
        ws,
        "SELECT hash, message, created, metrics, results FROM dws_snapshots WHERE "
        "workspace_id = :ws ORDER BY position LIMIT 1",
    )
    tags = [
        row[0]
        for row in sql(
            ws,
            "SELECT tag FROM dws_snapshot_tags WHERE hash = :hash ORDER BY position",
            hash=digest,
        )
    ]
    entry = {
        "hash": digest,
        "tags": tags,
        "message": message,
        "created": created,
        "metrics": metrics,
        "results": json.loads(results),
    }
    change(entry)
    damage(
        ws,
        "UPDATE dws_snapshots SET hash = :new, results = :results WHERE hash = :hash",
        new=entry["hash"],
        results=json.dumps(entry["results"]),
        hash=digest,
    )
    sql(ws, "DELETE FROM dws_snapshot_tags WHERE hash = :hash", hash=digest)
    for position, tag in enumerate(entry["tags"], 1):
        sql(
            ws,
            "INSERT INTO dws_snapshot_tags (workspace_id, tag, hash, position) VALUES "
            "(:ws, :tag, :hash, :position)",
            tag=tag,
            hash=entry["hash"],
            position=position,
        )


def refused_everywhere(
    ws: Workspace,
    cli: Any,
    args: list[str],
    api: Callable[[], object],
    fragment: str,
    watched: list[Path],
) -> None:
    """The API raises WorkspaceConfigError naming `fragment`, the CLI exits 1 with one line,
    and nothing in the store, under the workspace or `watched` changed."""
    before = [workspace_state(ws), *(tree_state(root) for root in watched)]
    with pytest.raises(WorkspaceConfigError) as caught:
        api()
    message = str(caught.value)
    # The store (its file here), and the field.
    assert fragment in message and f"workspace store {ws.store.shown}" in message
    code, out, err = cli(*args, "--workspace", ws.root)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err
    assert "Traceback" not in err
    assert [workspace_state(ws), *(tree_state(root) for root in watched)] == before


# ------------------------------------------------------- hand-edited snapshot index


@pytest.mark.parametrize("remove_results", [False, True])
def test_index_hash_leading_outside_deletes_nothing(
    snap_ws: Workspace, outside: Path, cli, remove_results: bool
) -> None:
    # A "hash" that is a path (the journal store named manifest files after it)
    relative = os.path.relpath(outside / "victim", snap_ws.meta_dir / "snapshots")
    edit_index(snap_ws, lambda entry: entry.update(hash=relative))
    flag = ["--remove-results"] if remove_results else []
    refused_everywhere(
        snap_ws,
        cli,
        ["delete-snapshot", "v1", *flag],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=remove_results),
        "snapshots[0].hash",
        [outside],
    )
    assert (outside / "victim.json").exists()


# Every folder here lies inside the test's own temporary folder: run against code without the
# check, the test deletes only its sentinels, never anything else on the machine.
@pytest.mark.parametrize(
    "folder",
    [
        "snapshots/../../../outside/precious",
        "../outside",
        "ABSOLUTE",
        "snapshots",
        "snapshots/v1/../../..",
        "snapshots/a b",
        "other/v1",
    ],
)
def test_index_results_folder_must_be_a_snapshot_folder(
    snap_ws: Workspace, outside: Path, cli, folder: str
) -> None:
    folder = str(outside / "precious") if folder == "ABSOLUTE" else folder
    edit_index(snap_ws, lambda entry: entry["results"][0].update(folder=folder))
    refused_everywhere(
        snap_ws,
        cli,
        ["delete-snapshot", "v1", "--remove-results"],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=True),
        "snapshots[0].results[0].folder",
        [outside],
    )
    assert (outside / "precious" / "keep.txt").exists()


@pytest.mark.parametrize("ref", ["results/../..", "../results", "src", "inter/prep", 7])
def test_index_results_ref_must_be_a_results_ref(snap_ws: Workspace, cli, ref: Any) -> None:
    # "src" and "inter/prep" are valid refs of resources that do not hold results: deleting
    # their "snapshots/v1" would delete the data of another resource.
    write(snap_ws.root / "data/src/snapshots/v1/data.csv", "source data\n")
    write(snap_ws.root / "data/inter/snapshots/v1/data.csv", "intermediate data\n")
    edit_index(snap_ws, lambda entry: entry["results"][0].update(ref=ref))
    refused_everywhere(
        snap_ws,
        cli,
        ["delete-snapshot", "v1", "--remove-results"],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=True),
        "results[0].ref",
        [],
    )


def test_results_folder_through_a_symlink_is_refused(
    snap_ws: Workspace, outside: Path, cli
) -> None:
    snapshots = snap_ws.root / "results" / "snapshots"
    shutil.move(snapshots / "v1", outside / "v1")
    (snapshots / "v1").symlink_to(outside / "v1", target_is_directory=True)
    refused_everywhere(
        snap_ws,
        cli,
        ["delete-snapshot", "v1", "--remove-results"],
        lambda: delete_snapshot(snap_ws, "v1", remove_results=True),
        "outside results resource",
        [outside],
    )
    assert (outside / "v1" / "exp").is_dir()


def test_index_tags_are_checked(snap_ws: Workspace, cli) -> None:
    edit_index(snap_ws, lambda entry: entry.update(tags=["v1", "../x"]))
    refused_everywhere(
        snap_ws, cli, ["history"], lambda: list_snapshots(snap_ws), "snapshots[0].tags[1]", []
    )


# ------------------------------------------------------------ manifests and records


def test_manifest_version_leading_outside_is_refused(
    snap_ws: Workspace, outside: Path, cli
) -> None:
    """A version names a kept copy (`.dws/versions/<subpath>/@<version>`): one with a slash
    would lead restore to read (and the swap to move data) outside the resource."""
    info = resolve_snapshot(snap_ws, "v1")
    [(record_id, body)] = sql(
        snap_ws,
        "SELECT r.id, r.body FROM dws_snapshot_refs s JOIN "
        "dws_records r ON r.id = s.record_id WHERE s.hash = "
        ":hash AND s.ref = 'inter/prep'",
        hash=info.hash,
    )
    data = json.loads(body)
    data["version"] = "x/../../../../../outside/precious"
    damage(
        snap_ws,
        "UPDATE dws_records SET body = :body WHERE id = :id",
        body=json.dumps(data),
        id=record_id,
    )
    write(snap_ws.root / "data/inter/prep/part-0.csv", "changed\n")
    refused_everywhere(
        snap_ws,
        cli,
        ["restore", "v1"],
        lambda: restore_snapshot(snap_ws, "v1"),
        "record.version",
        [outside],
    )


@pytest.mark.parametrize(
    "subpath",
    ["a" * 256, "é" * 128, "/".join(["b" * 200] * 21)],
    ids=["ascii-part", "multibyte-part", "whole-subpath"],
)
def test_stored_refs_over_the_byte_limits_are_a_damaged_file(
    snap_ws: Workspace, outside: Path, cli, subpath: str
) -> None:
    """A file name holds 255 bytes and a subpath 4096: a stored ref beyond that is a damaged
    store (`WorkspaceConfigError` naming it), not a ref refused later, elsewhere."""
    damage(
        snap_ws,
        "INSERT INTO dws_refs (workspace_id, ref, owner, unknown) VALUES (:ws, :ref, 'claimer', 0)",
        ref=f"inter/{subpath}",
    )
    refused_everywhere(
        snap_ws,
        cli,
        ["status"],
        lambda: Workspace.open(snap_ws.root).store.items(),
        "ref",
        [outside],
    )


def test_kept_version_path_stays_inside_the_resource(tmp_path: Path) -> None:
    assert kept_version_path(tmp_path, "a/b", "0" * 32) == tmp_path / ".dws/versions/a/b" / (
        "@" + "0" * 32
    )
    for version in ("../../x", "a/b", "a\\b", "", "a\x00b", "x" * 255):
        with pytest.raises(InvalidResourceRefError, match="cannot name a kept copy"):
            kept_version_path(tmp_path, "a", version)


# ------------------------------------------------------------ several tags (class 9)


def manifest_refs(ws: Workspace, digest: str) -> list[str]:
    """The refs of a snapshot's manifest, as the store's table holds them."""
    return [
        row[0]
        for row in sql(ws, "SELECT ref FROM dws_snapshot_refs WHERE hash = :hash", hash=digest)
    ]


def tagged_twice(ws: Workspace) -> str:
    take_snapshot(ws, "v2")  # nothing changed: the same snapshot gets a second tag
    info = resolve_snapshot(ws, "v1")
    assert info.tags == ["v1", "v2"]
    return info.hash


def test_deleting_one_of_several_tags_keeps_the_snapshot_api(snap_ws: Workspace) -> None:
    digest = tagged_twice(snap_ws)
    copy = snap_ws.root / "results/snapshots/v1/exp"

    done = delete_snapshot(snap_ws, "v1", remove_results=True)

    assert not done.deleted and done.removed_tag == "v1" and done.info.tags == ["v2"]
    assert [i.tags for i in list_snapshots(snap_ws)] == [["v2"]]
    assert manifest_refs(snap_ws, digest) and copy.is_dir()  # the snapshot and its copy stay
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
    assert not manifest_refs(snap_ws, digest) and not copy.exists()
    assert [i.hash for i in list_snapshots(snap_ws)] == [new.hash]


def test_deleting_by_hash_deletes_a_snapshot_with_several_tags(snap_ws: Workspace) -> None:
    digest = tagged_twice(snap_ws)
    done = delete_snapshot(snap_ws, digest[:10])
    assert done.deleted and done.info.tags == ["v1", "v2"]
    assert list_snapshots(snap_ws) == []
    assert not manifest_refs(snap_ws, digest)


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
    marker = {
        "format": 1,
        "scheme": MARKER_SCHEME,
        "version": "f" * 32,
        "rows": 1,
        "content": content,
        "file_format": "csv",
        "versioning": "rows",
        "columns": [["a", "int"]],
        "lineage": {"ref": "inter/x", "version": "f" * 32},
    }
    (folder / MARKER_NAME).write_text(json.dumps(marker))
    assert effective_version(folder) == "f" * 32
    assert checked_marker(marker) == marker
    for version in ("../../outside", "a/b", "", 7, None):
        (folder / MARKER_NAME).write_text(json.dumps({**marker, "version": version}))
        assert effective_version(folder) == content
    broken = {**marker, "lineage": {"ref": "../x", "version": 3}}
    assert checked_marker(broken) == {**marker, "lineage": None}
    assert checked_marker({**marker, "columns": [["a"]]}) is None


def test_values_nested_too_deeply_to_encode_are_read_and_snapshotted(
    snap_ws: Workspace, cli
) -> None:
    """orjson reads 1,024 levels but writes 255: a hand-made record nesting its parameters
    600 deep is read (status, lineage), and a snapshot refers to it without encoding it again,
    so it is taken and restores like any other — never a TypeError."""
    deep = "[" * 600 + "]" * 600
    sql(
        snap_ws,
        "INSERT INTO dws_records (workspace_id, ref, version, good, digest, identity, "
        "body) VALUES (:ws, 'inter/deep', 'v', 1, 'deep', 'deep', :body)",
        body='{"ref": "inter/deep", "version": "v", '
        f'"parameters": {{"p": {deep}}}, "step": {{"name": "s"}}}}',
    )
    sql(
        snap_ws,
        "INSERT INTO dws_refs (workspace_id, ref, owner, record_id, unknown) "
        "SELECT :ws, 'inter/deep', 's', id, 0 FROM dws_records WHERE digest = 'deep'",
    )
    code, out, _ = cli("status", "--workspace", snap_ws.root)
    assert code == 0 and "inter/deep" in out
    code, out, err = cli("lineage", "inter/deep", "--workspace", snap_ws.root)
    assert code == 0, err
    code, _, err = cli("snapshot", "v9", "--workspace", snap_ws.root)
    assert code == 0, err
    snapshot = dict(
        Workspace.open(snap_ws.root).store.snapshot_items(
            resolve_snapshot(Workspace.open(snap_ws.root), "v9").hash
        )
    )
    value, depth = snapshot["inter/deep"].record["parameters"]["p"], 0
    while value:
        value, depth = value[0], depth + 1
    assert depth == 599  # the record itself, not a copy cut short
