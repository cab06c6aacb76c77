"""The bad-input catalogue of the workspace layer: each case raises its DwsError subclass with a
message naming the thing and the fix, and changes nothing on disk or in the store."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dws_dagster import (
    DwsError,
    InvalidParameterError,
    InvalidResourceRefError,
    LineageBuilder,
    LineageConflictError,
    ResourceRef,
    SnapshotError,
    SnapshotNotFoundError,
    SnapshotRestoreError,
    UnknownResourceError,
    Workspace,
    WorkspaceConfigError,
)
from dws_dagster.lineage_api.params import ChoiceParameter
from dws_dagster.snapshots.index import resolve_snapshot
from dws_dagster.snapshots.restore import restore_snapshot
from dws_dagster.snapshots.take import take_snapshot
from tests.conftest import run_step, tree_state, write
from tests.support.store_db import damage, lose_retained, workspace_state


@pytest.fixture
def busy_ws(ws: Workspace) -> Workspace:
    write(ws.root / "data/src/s.csv", "1\n")
    run_step(ws, "prep", ["src/s.csv"], {"inter/prep": "x"}, {"k": 1})
    take_snapshot(ws, "v1")
    return ws


def _builder(ws: Workspace, params: dict | None = None) -> LineageBuilder:
    return (
        LineageBuilder()
        .with_step_name("bad")
        .with_parameters(params or {})
        .with_workspace_directory(ws.root)
    )


CASES: list[tuple[str, type[DwsError], str, Callable[[Workspace], object]]] = [
    (
        "dotdot",
        InvalidResourceRefError,
        "contains '..'",
        lambda ws: _builder(ws).with_input_ref(ResourceRef("src", "../x")).eval(),
    ),
    (
        "absolute",
        InvalidResourceRefError,
        "is absolute",
        lambda ws: ws.check_ref("src//etc/passwd") and ResourceRef("src", "/etc/passwd"),
    ),
    (
        "escape",
        InvalidResourceRefError,
        "contains '..'",
        lambda ws: ResourceRef.parse("src/a/../../b"),
    ),
    ("nul", InvalidResourceRefError, "NUL", lambda ws: ResourceRef("src", "a\x00b")),
    (
        "too long",
        InvalidResourceRefError,
        "limit is 4096",
        lambda ws: ResourceRef("src", "/".join(["d" * 200] * 30)),
    ),
    (
        "unknown resource",
        UnknownResourceError,
        "unknown resource 'nope'",
        lambda ws: _builder(ws).with_no_inputs().with_output_ref("nope/x").eval(),
    ),
    (
        "same ref",
        LineageConflictError,
        "step 'prep' writes inter/prep (the same ref)",
        lambda ws: _builder(ws).with_no_inputs().with_output_ref("inter/prep").eval(),
    ),
    (
        "nested ref",
        LineageConflictError,
        "(which contains it)",
        lambda ws: _builder(ws).with_no_inputs().with_output_ref("inter/prep/deep").eval(),
    ),
    (
        "enclosing ref",
        LineageConflictError,
        "(inside it)",
        lambda ws: _builder(ws).with_no_inputs().with_output_ref("inter").eval(),
    ),
    (
        "non-JSON parameter",
        InvalidParameterError,
        "parameter 'fn'",
        lambda ws: _builder(ws, {"fn": print}).with_no_inputs().eval(),
    ),
    (
        "huge parameter",
        InvalidParameterError,
        "record a path, a ref or a hash",
        lambda ws: _builder(ws, {"rows": list(range(20_000))}).with_no_inputs().eval(),
    ),
    (
        "unknown tag",
        SnapshotNotFoundError,
        "no snapshot is tagged 'v9'",
        lambda ws: restore_snapshot(ws, "v9"),
    ),
    ("short prefix", SnapshotNotFoundError, "no snapshot", lambda ws: resolve_snapshot(ws, "ab")),
    (
        "duplicate tag",
        SnapshotError,
        "tag 'v1' already names snapshot",
        lambda ws: take_snapshot(ws, "v1"),
    ),
    (
        "hash-like tag",
        SnapshotError,
        "looks like a snapshot hash",
        lambda ws: take_snapshot(ws, "deadbeef"),
    ),
    (
        "choice default",
        InvalidParameterError,
        "default 'c' of parameter 'mode' is not among",
        lambda ws: ChoiceParameter("mode", ["a", "b"], "c", str, "how"),
    ),
    (
        "role",
        WorkspaceConfigError,
        "unknown role 'data'",
        lambda ws: ws.add_resource("x", "data", path="x"),
    ),
    (
        "uri credentials",
        WorkspaceConfigError,
        "credentials",
        lambda ws: ws.add_resource("x", "results", uri="s3a://AKIA:secret@bucket/r"),
    ),
    (
        "results snapshot dir",
        InvalidResourceRefError,
        "keeps for snapshot copies",
        lambda ws: ws.check_ref("results/snapshots/v1"),
    ),
]


@pytest.mark.parametrize(
    ("error", "fragment", "action"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_bad_input_refused_and_nothing_changed(
    busy_ws: Workspace, error: type[DwsError], fragment: str, action
) -> None:
    # A new state to snapshot, so that the duplicate tag is refused rather than a no-op.
    run_step(busy_ws, "prep", ["src/s.csv"], {"inter/prep": "y"}, {"k": 1})
    before = workspace_state(busy_ws)
    with pytest.raises(error) as info:
        action(busy_ws)
    assert fragment in str(info.value)
    assert workspace_state(busy_ws) == before


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("resources.json", "{not json", "not valid JSON"),
        (
            "resources.json",
            '{"format": 1, "resources": [{"name": "x"}]}',
            "resources[0].role: Field required",
        ),
        ("resources.json", '{"format": 99, "resources": []}', "has format 99"),
        ("config.json", "[]", "must hold a JSON object"),
    ],
)
def test_corrupt_config_files(busy_ws: Workspace, name: str, content: str, fragment: str) -> None:
    (busy_ws.meta_dir / name).write_text(content)
    before = workspace_state(busy_ws)
    with pytest.raises(WorkspaceConfigError) as info:
        Workspace.open(busy_ws.root)
    assert fragment in str(info.value) and name in str(info.value)
    assert workspace_state(busy_ws) == before


def test_corrupt_snapshot_manifest(busy_ws: Workspace) -> None:
    """A manifest row pointing at the record of another ref (a backup of another version)."""
    info = resolve_snapshot(busy_ws, "v1")
    damage(
        busy_ws,
        "UPDATE dws_snapshot_refs SET record_id = (SELECT record_id FROM "
        "dws_snapshot_refs WHERE hash = :hash AND ref = 'src/s.csv') WHERE "
        "hash = :hash AND ref = 'inter/prep'",
        hash=info.hash,
    )
    before = workspace_state(busy_ws)
    with pytest.raises(
        WorkspaceConfigError,
        match=f"snapshot {info.hash[:12]} of ref inter/prep "
        r".* is the record of another ref",
    ):
        restore_snapshot(busy_ws, "v1")
    assert workspace_state(busy_ws) == before


def test_corrupt_lineage_record(busy_ws: Workspace) -> None:
    damage(
        busy_ws,
        """UPDATE dws_records SET body = '{"op": "record", "rec' """
        "WHERE ref = 'inter/prep'",
    )
    before = workspace_state(busy_ws)
    with pytest.raises(
        WorkspaceConfigError,
        match="inter/prep .* is not a JSON record; restore the store from a backup",
    ):
        Workspace.open(busy_ws.root).store.items()
    assert workspace_state(busy_ws) == before


def test_restore_of_data_not_kept_is_refused_or_reported(busy_ws: Workspace) -> None:
    kept = busy_ws.store.get("inter/prep").version
    run_step(busy_ws, "prep", ["src/s.csv"], {"inter/prep": "changed"}, {"k": 2})
    lose_retained(busy_ws, "inter/prep", kept)
    before = workspace_state(busy_ws)
    with pytest.raises(SnapshotRestoreError) as info:
        restore_snapshot(busy_ws, "v1")
    assert "inter/prep: version" in str(info.value) and "was not kept" in str(info.value)
    assert "nothing was changed" in str(info.value) and "--partial" in str(info.value)
    assert workspace_state(busy_ws) == before
    # Asked for, a partial restore says what it could not bring back and blocks its readers.
    report = restore_snapshot(busy_ws, "v1", partial=True)
    assert [ref for ref, _ in report.not_restored] == ["inter/prep"]
    assert "was not kept" in report.not_restored[0][1]
    assert busy_ws.store.get("inter/prep").status == "unknown"


def test_path_outside_workspace(busy_ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(UnknownResourceError, match="not inside any local resource"):
        busy_ws.ref_for_path(tmp_path)


def test_ambiguous_hash_prefix_names_the_candidates(busy_ws: Workspace) -> None:
    real = resolve_snapshot(busy_ws, "v1").hash
    twin = real[:6] + ("f" if real[6] != "f" else "e") + real[7:]
    damage(
        busy_ws,
        "INSERT INTO dws_snapshots (workspace_id, hash, position, message, "
        "created, metrics, results) SELECT workspace_id, :twin, position + 1, "
        "message, created, metrics, results FROM dws_snapshots WHERE hash = :real",
        twin=twin,
        real=real,
    )
    before = workspace_state(busy_ws)
    with pytest.raises(SnapshotNotFoundError) as info:
        restore_snapshot(busy_ws, real[:6])
    message = str(info.value)
    assert "ambiguous" in message and real[:16] in message and twin[:16] in message
    assert "give more characters" in message
    assert workspace_state(busy_ws) == before


def test_writes_do_not_follow_a_symlink_out_of_the_resource(
    busy_ws: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    (busy_ws.resource_root("inter") / "linked").symlink_to(outside, target_is_directory=True)
    before = workspace_state(busy_ws), tree_state(outside)
    for ref in ("inter/linked", "inter/linked/deeper/x"):
        with pytest.raises(InvalidResourceRefError) as info:
            _builder(busy_ws).with_no_inputs().with_output_ref(ref).eval()
        message = str(info.value)
        assert f"ref {ref} leaves resource 'inter' through the symlink" in message
        assert "replace the symlink with a folder" in message
    assert (workspace_state(busy_ws), tree_state(outside)) == before
    # A symlink that stays inside the resource, a path under a file, and a resource root that
    # is itself a symlink are all writable.
    inter = busy_ws.resource_root("inter")
    (inter / "real_dir").mkdir()
    (inter / "inside").symlink_to(inter / "real_dir", target_is_directory=True)
    (inter / "a_file").write_text("x")
    for ref in ("inter/inside/x", "inter/a_file/below", "inter/new/deeper"):
        assert busy_ws.check_writable(ref) == ResourceRef.parse(ref)
    aliased = tmp_path / "aliased"
    aliased.symlink_to(outside, target_is_directory=True)
    busy_ws.add_resource("aliased", "intermediate-data", path=str(aliased))
    assert busy_ws.check_writable("aliased/precious.txt") == ResourceRef.parse(
        "aliased/precious.txt"
    )
    # Reading through it stays allowed: data linked into a resource is common.
    assert busy_ws.check_ref("inter/linked/precious.txt")
    assert busy_ws.version_of("inter/linked/precious.txt")


# ------------------------------------------------- what a local resource may name

#: URI resources a workspace refuses, with what the error says: a `file://` URI names one
#: local folder by its normalised absolute path, which is not a system folder or the root.
BAD_FILE_URIS = {
    "file:///etc": "inside the system folder /etc",
    "file:///etc/ssl/private": "inside the system folder /etc",
    "file:///usr/lib/data": "inside the system folder /usr",
    "file:///proc/self": "inside the system folder /proc",
    "file:///": "not a normalised absolute folder",
    "file://": "not a normalised absolute folder",
    "file:///data/../etc": "not a normalised absolute folder",
    "file:///data/./x": "not a normalised absolute folder",
    "file:///data//x": "not a normalised absolute folder",
    "file://fileserver/share": "names the host 'fileserver'",
    "file://localhost:8020/data": "names the host",
    "file:///data/odd%20name": "%-escapes",
    "file:///data/x?version=2": "query",
    "file:///data/x#part": "fragment",
    "FILE:///data/x": "write it file:///absolute/path",
}
#: Paths likewise (stored relative to the workspace, they may still lead anywhere).
BAD_PATHS = {"/etc": "/etc", "/usr/share/doc": "/usr", "/": "the filesystem root"}


@pytest.mark.parametrize("uri", sorted(BAD_FILE_URIS))
def test_a_file_uri_resource_names_a_normalised_folder_that_is_not_the_systems(
    tmp_path: Path, cli, uri: str
) -> None:
    """Refused at `add` (nothing written) and when a hand-edited resources.json holding it is
    read, by every command (the file names the resource and what to do)."""
    ws = Workspace.init(tmp_path / "ws")
    before = tree_state(ws.root)
    code, _, err = cli("add", "lake", "--role", "source-data", "--uri", uri, cwd=ws.root)
    assert code == 1 and BAD_FILE_URIS[uri] in err and "resource 'lake'" in err, err
    assert tree_state(ws.root) == before
    _hand_written(ws, {"name": "lake", "role": "source-data", "uri": uri})
    for argv in (["status"], ["snapshot", "v1"], ["version", "lake"]):
        code, _, err = cli(*argv, cwd=ws.root)
        assert code == 1 and "resources.json" in err and BAD_FILE_URIS[uri] in err, err


@pytest.mark.parametrize("path", sorted(BAD_PATHS))
def test_a_path_resource_may_not_be_a_system_folder_either(tmp_path: Path, cli, path: str) -> None:
    ws = Workspace.init(tmp_path / "ws")
    code, _, err = cli("add", "lake", "--role", "source-data", "--path", path, cwd=ws.root)
    assert code == 1 and BAD_PATHS[path] in err, err
    relative = os.path.relpath(path, ws.root)
    _hand_written(ws, {"name": "lake", "role": "source-data", "path": relative})
    code, _, err = cli("status", cwd=ws.root)
    assert code == 1 and "resources.json" in err and BAD_PATHS[path] in err, err


def test_a_resource_holding_the_workspace_files_is_refused_when_read_too(
    tmp_path: Path, cli
) -> None:
    ws = Workspace.init(tmp_path / "ws")
    for entry in (
        {"name": "all", "role": "source-data", "path": "."},
        {"name": "up", "role": "source-data", "uri": (tmp_path).as_uri()},
        {"name": "meta", "role": "source-data", "path": ".dataworkspace/objects"},
    ):
        _hand_written(ws, entry)
        code, _, err = cli("status", cwd=ws.root)
        assert code == 1 and "would contain or lie inside .dataworkspace/" in err, err


def test_file_uris_and_paths_outside_the_workspace_still_name_data(tmp_path: Path, cli) -> None:
    """What a file:// resource is for: data outside the workspace folder (a shared mount
    standing in for object storage), `file:///…` or `file://localhost/…`."""
    ws = Workspace.init(tmp_path / "ws")
    for name, uri in (
        ("lake", (tmp_path / "lake").as_uri()),
        ("pond", f"file://localhost{tmp_path}/pond"),
    ):
        code, _, err = cli("add", name, "--role", "source-data", "--uri", uri, cwd=ws.root)
        assert code == 0, err
    code, _, err = cli("add", "near", "--role", "source-data", "--path", "../near", cwd=ws.root)
    assert code == 0, err
    assert sorted(Workspace.open(ws.root).resources) == ["lake", "near", "pond"]


def _hand_written(ws: Workspace, entry: dict) -> None:
    (ws.meta_dir / "resources.json").write_text(json.dumps({"format": 1, "resources": [entry]}))
