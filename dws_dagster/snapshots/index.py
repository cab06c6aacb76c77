"""The snapshot index: which snapshots there are, finding one by name, and deleting a tag or
a snapshot.

A snapshot is named by its tags (their rule is `shapes.validate_tag`), its hash or a unique
prefix of it, and every command that takes a snapshot name goes through here; the index lives
in the workspace store (`dws_snapshots`, `dws_snapshot_tags`), which anyone can edit or
restore from elsewhere, so each row is read as untrusted input, checked against
`formats.SnapshotRow` like any file of the workspace. Adding an entry belongs to taking a
snapshot (`snapshots`): it commits in the same transaction as the snapshot's rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import delete, select

from dws_dagster.errors import SnapshotNotFoundError, WorkspaceConfigError
from dws_dagster.snapshots import snapshot_data
from dws_dagster.store import schema
from dws_dagster.workspace import formats
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.shapes import CURRENT as CURRENT  # importable from here
from dws_dagster.workspace.shapes import validate_tag as validate_tag
from dws_dagster.workspace.trees import remove_tree

INDEX_FORMAT = 1


@dataclass
class SnapshotInfo:
    """An entry of the snapshot index."""

    hash: str
    tags: list[str] = field(default_factory=list)
    message: str = ""
    created: str = ""
    metrics: dict[str, Any] | None = None
    results: list[dict[str, str]] = field(default_factory=list)
    #: Code resources' git state ({name: {"git_commit", "dirty"}}); None: a snapshot taken
    #: before snapshots captured data (it holds lineage only).
    resources: dict[str, dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        return self.tags[0] if self.tags else self.hash[:12]

    def to_json(self) -> dict[str, Any]:
        data = {
            "hash": self.hash,
            "tags": self.tags,
            "message": self.message,
            "created": self.created,
            "metrics": self.metrics,
            "results": self.results,
        }
        if self.resources is not None:  # absent: a snapshot of lineage only (before 0002)
            data["resources"] = self.resources
        return data


# ----------------------------------------------------------------------------- read

_SNAPSHOTS = schema.snapshots
_TAGS = schema.snapshot_tags


def index_where(ws: Workspace) -> str:
    return f"snapshot index of workspace store {ws.store.shown}"


def list_snapshots(ws: Workspace) -> list[SnapshotInfo]:
    """Snapshots, oldest first. The index is read as untrusted input, like any file of the
    workspace: a database can be edited by hand or restored from elsewhere."""
    store = ws.store
    ws_id = store.workspace_id
    with store.reading() as connection:
        rows = connection.execute(
            select(
                _SNAPSHOTS.c.hash,
                _SNAPSHOTS.c.message,
                _SNAPSHOTS.c.created,
                _SNAPSHOTS.c.metrics,
                _SNAPSHOTS.c.results,
                _SNAPSHOTS.c.resources,
            )
            .where(_SNAPSHOTS.c.workspace_id == ws_id)
            .order_by(_SNAPSHOTS.c.position)
        ).all()
        tag_rows = connection.execute(
            select(_TAGS.c.hash, _TAGS.c.tag)
            .where(_TAGS.c.workspace_id == ws_id)
            .order_by(_TAGS.c.position, _TAGS.c.tag)
        ).all()
    tags: dict[str, list[str]] = {}
    for digest, tag in tag_rows:
        tags.setdefault(digest, []).append(tag)
    where = index_where(ws)
    infos = [
        SnapshotInfo(
            **formats.check(
                formats.SNAPSHOT_ROW,
                {
                    "hash": digest,
                    "tags": tags.pop(digest, []),
                    "message": message,
                    "created": created,
                    "metrics": _json(metrics, where, digest, "metrics"),
                    "results": _json(results, where, digest, "results"),
                    "resources": _json(resources, where, digest, "resources"),
                },
                where,
                what=f"snapshot {str(digest)[:12]} in",
                advice="restore the store from a backup",
                at=("snapshots", number),
            )
        )
        for number, (digest, message, created, metrics, results, resources) in enumerate(rows)
    ]
    if tags:
        orphan = next(iter(tags))
        raise WorkspaceConfigError(
            f"{where} is corrupt: tag {tags[orphan][0]!r} names snapshot {orphan[:12]}, which "
            "is not in the index; restore the store from a backup"
        )
    return infos


def _json(text: Any, where: str, digest: str, column: str) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        raise WorkspaceConfigError(
            f"{where} is corrupt: snapshot {str(digest)[:12]}: {column} is not JSON; restore "
            "the store from a backup"
        ) from None


def snapshot_manifest(ws: Workspace, digest: str) -> dict[str, Any]:
    """A snapshot's lineage as the manifest `graph.SnapshotView` reads."""
    return {
        "format": INDEX_FORMAT,
        "hash": digest,
        "refs": {ref: state.to_json() for ref, state in ws.store.snapshot_items(digest)},
    }


def resolve_snapshot(ws: Workspace, name: str) -> SnapshotInfo:
    """Find a snapshot by tag, full hash, or unique hash prefix (at least 4 characters)."""
    return resolve_in(list_snapshots(ws), name)


def resolve_in(infos: list[SnapshotInfo], name: str) -> SnapshotInfo:
    """`resolve_snapshot` among `infos`, the index as the caller read it."""
    for info in infos:
        if name in info.tags or name == info.hash:
            return info
    matches = [info for info in infos if len(name) >= 4 and info.hash.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise SnapshotNotFoundError(
            f"snapshot prefix {name!r} is ambiguous: it matches "
            f"{', '.join(m.hash[:16] for m in matches)}; give more characters"
        )
    known = ", ".join(i.name for i in infos[-5:]) or "none yet"
    raise SnapshotNotFoundError(
        f"no snapshot is tagged {name!r} or has a hash starting with it (recent: {known}); "
        "see 'dws-dagster history'"
    )


# ---------------------------------------------------------------------------- delete


@dataclass
class SnapshotDeletion:
    """What `delete_snapshot` did: removed one tag of a snapshot that keeps others
    (`removed_tag`), or deleted the snapshot (`removed_tag` None)."""

    info: SnapshotInfo
    removed_tag: str | None = None
    removed_results: list[Path] = field(default_factory=list)

    @property
    def deleted(self) -> bool:
        return self.removed_tag is None

    @property
    def hash(self) -> str:
        return self.info.hash

    @property
    def name(self) -> str:
        return self.info.name


def delete_snapshot(ws: Workspace, name: str, *, remove_results: bool = False) -> SnapshotDeletion:
    """Delete a tag, or a snapshot. A tag of a snapshot that has others goes alone; the
    snapshot (manifest, index entry, and its results copies if asked) goes with its last tag,
    or when named by its hash.

    Every results folder the index names is checked to lie inside its results resource before
    anything changes: the index is a file anyone can edit.
    """
    store = ws.store
    with store.locked():
        infos = list_snapshots(ws)
        info = resolve_in(infos, name)
        if name in info.tags and len(info.tags) > 1:
            info.tags.remove(name)
            _remove_tag(ws, name)
            return SnapshotDeletion(info, removed_tag=name)
        folders = (
            [
                folder
                for number in range(len(info.results))
                if (folder := results_folder(ws, info, number)) is not None
            ]
            if remove_results
            else []
        )
        _remove_snapshot(ws, info.hash)
    # Folders go once the snapshot is gone from the store (committed): a crash between leaves
    # a results copy nobody names, never an index entry whose copy is missing.
    for folder in folders:
        remove_tree(folder, ignore_errors=True)
    return SnapshotDeletion(info, removed_results=folders)


def _remove_tag(ws: Workspace, tag: str) -> None:
    store = ws.store
    with store.locked() as connection:
        connection.execute(
            delete(_TAGS).where(_TAGS.c.workspace_id == store.workspace_id, _TAGS.c.tag == tag)
        )


def _remove_snapshot(ws: Workspace, digest: str) -> None:
    store = ws.store
    ws_id = store.workspace_id
    with store.locked() as connection:
        connection.execute(
            delete(_TAGS).where(_TAGS.c.workspace_id == ws_id, _TAGS.c.hash == digest)
        )
        connection.execute(
            delete(_SNAPSHOTS).where(
                _SNAPSHOTS.c.workspace_id == ws_id, _SNAPSHOTS.c.hash == digest
            )
        )
        store.drop_snapshot(digest)
        snapshot_data.delete_rows(ws, digest)


def results_folder(ws: Workspace, info: SnapshotInfo, number: int) -> Path | None:
    """The results copy `info.results[number]` names, checked to lie inside its results
    resource; None when that resource is gone or remote (nothing to read or delete here)."""
    entry = info.results[number]
    path = index_where(ws)
    field_name = f"snapshot {info.hash[:12]}: results[{number}]"
    parsed = as_ref(entry["ref"])  # the format checked it is a ref
    resource = ws.resources.get(parsed.name)
    if resource is None or not resource.is_local:
        return None
    if resource.role != "results":
        raise WorkspaceConfigError(
            f"{path} is corrupt: {field_name}.ref: {entry['ref']!r} is not in a "
            f"results resource ('{parsed.name}' holds {resource.role}); restore the store from "
            "a backup"
        )
    root = ws.resource_root(resource)
    folder = root / entry["folder"]  # the format checked it is `snapshots/<name>`
    real_root = os.path.realpath(root)
    real = os.path.realpath(folder)
    if not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise WorkspaceConfigError(
            f"{path}: {field_name}.folder: {folder} leads to {real}, outside "
            f"results resource '{resource.name}' ({real_root}); nothing was changed. Replace "
            f"the symlink on the way with a folder, or restore the store from a backup"
        )
    return folder
