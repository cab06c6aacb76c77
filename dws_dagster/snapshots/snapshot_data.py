"""The store's side of retention: each snapshot's data rows and each retained version's files.

Rows read back are untrusted (the database can be edited like any file of the workspace): a
kind or a version that dws_dagster does not write is named as damage, never acted on.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson
from sqlalchemy import delete, insert, select, tuple_

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.snapshots.retention import (
    KINDS,
    LOCAL_KINDS,
    DataRow,
    RetainedFile,
    manifest_files,
)
from dws_dagster.store import schema
from dws_dagster.store.retained import referenced_versions
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.shapes import VERSION_PATTERN

_DATA = schema.snapshot_data
_VERSIONS = schema.data_versions
_CHUNK = 400
_ADVICE = "delete that snapshot, or restore the store from a backup"
_VERSION = re.compile(VERSION_PATTERN)


def save_rows(ws: Workspace, snapshot_hash: str, rows: Sequence[DataRow]) -> None:
    """Record a new snapshot's data rows (the caller holds the store's lock)."""
    store = ws.store
    with store.locked() as connection:
        for start in range(0, len(rows), _CHUNK):
            connection.execute(
                insert(_DATA),
                [
                    {
                        "workspace_id": store.workspace_id,
                        "hash": snapshot_hash,
                        "ref": row.ref,
                        "kind": row.kind,
                        "version": row.version,
                    }
                    for row in rows[start : start + _CHUNK]
                ],
            )


def rows_of(ws: Workspace, snapshot_hash: str) -> list[DataRow]:
    """A snapshot's data rows, sorted by ref."""
    store = ws.store
    with store.reading() as connection:
        found = connection.execute(
            select(_DATA.c.ref, _DATA.c.kind, _DATA.c.version)
            .where(_DATA.c.workspace_id == store.workspace_id, _DATA.c.hash == snapshot_hash)
            .order_by(_DATA.c.ref)
        ).all()
    rows = []
    for ref, kind, version in found:
        where = f"workspace store {store.shown}: snapshot {snapshot_hash[:12]}, ref {ref!r:.80}"
        if kind not in KINDS:
            raise WorkspaceConfigError(f"{where}: unknown data kind {kind!r:.40}; {_ADVICE}")
        if version is not None and (type(version) is not str or not _VERSION.fullmatch(version)):
            raise WorkspaceConfigError(f"{where}: {version!r:.60} is not a version; {_ADVICE}")
        rows.append(DataRow(store.checked_ref(ref, where), kind, version))
    return rows


def delete_rows(ws: Workspace, snapshot_hash: str) -> None:
    store = ws.store
    with store.locked() as connection:
        connection.execute(
            delete(_DATA).where(
                _DATA.c.workspace_id == store.workspace_id, _DATA.c.hash == snapshot_hash
            )
        )


def latest_rows(ws: Workspace) -> set[tuple[str, str | None]]:
    """(ref, version) of every data row of the newest snapshot that has data rows: each of its
    local versions was retained when it was taken, and stays retained while it exists."""
    store = ws.store
    ws_id = store.workspace_id
    snapshots = schema.snapshots
    newest = (
        select(snapshots.c.hash)
        .where(snapshots.c.workspace_id == ws_id, snapshots.c.resources.is_not(None))
        .order_by(snapshots.c.position.desc())
        .limit(1)
        .scalar_subquery()
    )
    with store.reading() as connection:
        return {
            (ref, version)
            for ref, version in connection.execute(
                select(_DATA.c.ref, _DATA.c.version).where(
                    _DATA.c.workspace_id == ws_id,
                    _DATA.c.hash == newest,
                    _DATA.c.kind.in_(LOCAL_KINDS),
                )
            )
        }


def retained(ws: Workspace, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which (ref, version) pairs have retained files."""
    wanted = sorted(set(pairs))
    found: set[tuple[str, str]] = set()
    store = ws.store
    with store.reading() as connection:
        for start in range(0, len(wanted), _CHUNK):
            found.update(
                tuple(row)
                for row in connection.execute(
                    select(_VERSIONS.c.ref, _VERSIONS.c.version).where(
                        _VERSIONS.c.workspace_id == store.workspace_id,
                        tuple_(_VERSIONS.c.ref, _VERSIONS.c.version).in_(
                            wanted[start : start + _CHUNK]
                        ),
                    )
                )
            )
    return found


def referenced(ws: Workspace, ref: str | None = None) -> dict[str, set[str]]:
    """The versions some snapshot's data rows name, by ref (of `ref` only, when given): what
    must stay retained, locally or where remote data keeps its versions."""
    return referenced_versions(ws.store, ref)


def save_manifests(ws: Workspace, manifests: Sequence[tuple[str, str, bool, list[Any]]]) -> None:
    """Record retained versions (ref, version, linked, file rows)."""
    store = ws.store
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    with store.locked() as connection:
        for start in range(0, len(manifests), _CHUNK):
            connection.execute(
                insert(_VERSIONS),
                [
                    {
                        "workspace_id": store.workspace_id,
                        "ref": ref,
                        "version": version,
                        "link": link,
                        "files": orjson.dumps(files).decode(),
                        "created": now,
                    }
                    for ref, version, link, files in manifests[start : start + _CHUNK]
                ],
            )


def manifest(ws: Workspace, ref: str, version: str) -> tuple[bool, list[RetainedFile]] | None:
    """A retained version's files (and whether they are to be linked back), or None."""
    store = ws.store
    with store.reading() as connection:
        row = connection.execute(
            select(_VERSIONS.c.link, _VERSIONS.c.files).where(
                _VERSIONS.c.workspace_id == store.workspace_id,
                _VERSIONS.c.ref == ref,
                _VERSIONS.c.version == version,
            )
        ).first()
    if row is None:
        return None
    return bool(row[0]), manifest_files(ref, version, row[1])


def unreferenced_versions(ws: Workspace) -> list[tuple[str, str]]:
    """Retained versions no snapshot's data rows name (what `gc` may free)."""
    store = ws.store
    ws_id = store.workspace_id
    live = select(_DATA.c.ref, _DATA.c.version).where(_DATA.c.workspace_id == ws_id)
    with store.reading() as connection:
        kept = {tuple(row) for row in connection.execute(live)}
        every = connection.execute(
            select(_VERSIONS.c.ref, _VERSIONS.c.version).where(_VERSIONS.c.workspace_id == ws_id)
        ).all()
    return sorted((ref, version) for ref, version in every if (ref, version) not in kept)


def drop_versions(ws: Workspace, pairs: Sequence[tuple[str, str]]) -> None:
    store = ws.store
    with store.locked() as connection:
        for start in range(0, len(pairs), _CHUNK):
            connection.execute(
                delete(_VERSIONS).where(
                    _VERSIONS.c.workspace_id == store.workspace_id,
                    tuple_(_VERSIONS.c.ref, _VERSIONS.c.version).in_(
                        list(pairs[start : start + _CHUNK])
                    ),
                )
            )


def all_manifests(ws: Workspace) -> Iterator[tuple[tuple[str, str], list[RetainedFile]]]:
    """Every retained version's files."""
    store = ws.store
    with store.reading() as connection:
        rows = connection.execute(
            select(_VERSIONS.c.ref, _VERSIONS.c.version, _VERSIONS.c.files).where(
                _VERSIONS.c.workspace_id == store.workspace_id
            )
        ).all()
    for ref, version, files in rows:
        yield (ref, version), manifest_files(ref, version, files)


def live_digests(ws: Workspace) -> set[str]:
    """Every file hash some retained version needs."""
    return {entry.digest for _, files in all_manifests(ws) for entry in files}
