"""The snapshot index: which snapshots there are, finding one by name, checking a tag, and
deleting a tag or a snapshot.

A snapshot is named by its tags, its hash or a unique prefix of it, and every command that
takes a snapshot name goes through here; the index lives in the workspace store
(`dws_snapshots`, `dws_snapshot_tags`), which anyone can edit or restore from elsewhere, so
it is read as untrusted input like any file of the workspace. Adding an entry belongs to
taking a snapshot (`snapshots`): it commits in the same transaction as the snapshot's rows.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import delete, select

from dws_dagster.errors import SnapshotError, SnapshotNotFoundError, WorkspaceConfigError
from dws_dagster.workspace import shapes
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.snapshots import snapshot_data
from dws_dagster.workspace.store import schema
from dws_dagster.workspace.trees import remove_tree
from dws_dagster.workspace.workspace import Workspace

INDEX_FORMAT = 1
_HEXISH = re.compile(r"^[0-9a-f]{4,}$")  # as short as a usable hash prefix
CURRENT = "current"


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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SnapshotInfo:
        return cls(
            hash=data["hash"],
            tags=list(data.get("tags", [])),
            message=data.get("message", ""),
            created=data.get("created", ""),
            metrics=data.get("metrics"),
            results=list(data.get("results", [])),
        )


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
    entries = [
        {
            "hash": digest,
            "tags": tags.pop(digest, []),
            "message": message,
            "created": created,
            "metrics": _json(metrics, where, digest, "metrics"),
            "results": _json(results, where, digest, "results"),
        }
        for digest, message, created, metrics, results, _ in rows
    ]
    states = {
        digest: _resource_states(_json(raw, where, digest, "resources"), where, digest)
        for digest, *_, raw in rows
    }
    if tags:
        orphan = next(iter(tags))
        raise WorkspaceConfigError(
            f"{where} is corrupt: tag {tags[orphan][0]!r} names snapshot {orphan[:12]}, which "
            "is not in the index; restore the store from a backup"
        )
    data = shapes.checked(
        "index",
        {"format": INDEX_FORMAT, "snapshots": entries},
        where,
        what="snapshot index",
        advice="restore the store from a backup",
    )
    infos = [SnapshotInfo.from_json(item) for item in data["snapshots"]]
    for info in infos:
        info.resources = states[info.hash]
    return infos


def _resource_states(value: Any, where: str, digest: str) -> dict[str, dict[str, Any]] | None:
    if value is None:
        return None
    if type(value) is dict and all(
        type(name) is str
        and type(state) is dict
        and type(state.get("git_commit")) is str
        and type(state.get("dirty")) is bool
        for name, state in value.items()
    ):
        return value
    raise WorkspaceConfigError(
        f"{where} is corrupt: snapshot {str(digest)[:12]}: resources is not what "
        "dws_dagster writes; restore the store from a backup"
    )


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


def validate_tag(tag: str) -> str:
    """Refuse a tag that cannot name a folder, be printed or be told from a hash, before
    anything is written. A tag names a results folder, and its staging copy
    `.dws-staging-<tag>-<32 hex>` too: file names hold 255 bytes, so a tag holds 200 (UTF-8)."""
    max_bytes = 200
    if (
        not isinstance(tag, str)
        or not tag
        or len(tag) > 128
        or any(c.isspace() or c in "/\\\x00" or not c.isprintable() for c in tag)
        or tag in (".", "..", CURRENT)
    ):
        raise SnapshotError(
            f"invalid tag {tag!r}: use 1-128 printable characters without "
            f"spaces or slashes, other than '{CURRENT}'"
        )
    size = len(tag.encode("utf-8"))
    if size > max_bytes:
        raise SnapshotError(
            f"tag {tag[:20]!r}... is {size} bytes in UTF-8; a tag names a folder, so it may "
            f"hold at most {max_bytes} bytes: choose a shorter tag"
        )
    if _HEXISH.match(tag):
        raise SnapshotError(
            f"tag {tag!r} looks like a snapshot hash; choose a tag that does "
            "not (for example 'v-{tag}')"
        )
    return tag


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
