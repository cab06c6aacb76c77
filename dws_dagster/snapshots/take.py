"""Taking a snapshot: the state of every ref's lineage, data and code at one moment.

A snapshot is kept in the workspace store as references to the records (`dws_snapshot_refs`),
so taking one copies no record, with an index entry (see `history`) holding its tags, message,
time, metrics and results copies (see `results_archive`). Its hash covers what versions refs
have and how they were made (never when, where or by whom), so it is the same on any machine.
Taking one is one transaction: all or nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import xxhash
from sqlalchemy import func, insert, select

from dws_dagster.errors import DwsError, SnapshotError, WorkspaceConfigError
from dws_dagster.snapshots import snapshot_data
from dws_dagster.snapshots.file_hashes import FileHashCache
from dws_dagster.snapshots.index import (
    SnapshotInfo,
    index_where,
    list_snapshots,
)
from dws_dagster.snapshots.objects import ObjectStore, Stored
from dws_dagster.snapshots.restore import finish_interrupted_restore
from dws_dagster.snapshots.results_archive import archive_results, folder_name
from dws_dagster.snapshots.results_metrics import snapshot_metrics
from dws_dagster.snapshots.retention import (
    DRIFT,
    DataRow,
    DataScan,
    RetentionReport,
    capture,
    resource_states,
    retain,
)
from dws_dagster.store import schema
from dws_dagster.store.gc_pause import gc_paused
from dws_dagster.store.messages import too_deep
from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.definition import RESTORE_INTENT_FILE, Workspace
from dws_dagster.workspace.files import canonical_json
from dws_dagster.workspace.records import identity_digest
from dws_dagster.workspace.records import (
    record_identity as record_identity,  # re-exported: callers of the old home
)
from dws_dagster.workspace.redaction import redact_text
from dws_dagster.workspace.remote_versions import RemoteData
from dws_dagster.workspace.shapes import validate_tag
from dws_dagster.workspace.trees import remove_tree


@dataclass
class SnapshotOutcome:
    info: SnapshotInfo
    created: bool
    tag_added: bool = False
    warnings: list[str] = field(default_factory=list)
    #: What retaining the snapshot's data cost (None: no new snapshot was taken).
    retention: RetentionReport | None = None
    #: Refs whose data changed outside any step (their records say another version).
    drift: list[str] = field(default_factory=list)


_SNAPSHOTS = schema.snapshots
_TAGS = schema.snapshot_tags


def snapshot_hash(
    ws: Workspace, states: dict[str, RefState], data: list[DataRow], code: dict[str, dict[str, Any]]
) -> str:
    """Deterministic, portable hash of a workspace state: no paths, hosts or timestamps."""
    try:
        rows = [
            (ref, state.status, None if state.record is None else identity_digest(state.record))
            for ref, state in sorted(states.items())
        ]
    except orjson.JSONEncodeError as exc:
        raise WorkspaceConfigError(too_deep(f"workspace store {ws.store.shown}", exc)) from None
    return hash_of_rows(ws, rows, data, code)


def hash_of_rows(
    ws: Workspace,
    rows: list[tuple[str, str, str | None]],
    data: list[DataRow],
    code: dict[str, dict[str, Any]],
) -> str:
    """The snapshot hash of (ref, status, identity digest of its record) rows sorted by ref
    (what the store gives without reading any record), the data found on disk (each ref's
    kind and version, sorted by ref) and the code resources' git state: two snapshots differ
    whenever the workspace's lineage, data or code differ."""
    body = {
        "resources": sorted([r.name, r.role] for r in ws.resources.values()),
        "refs": rows,
        "data": [[row.ref, row.kind, row.version] for row in data],
        "code": code,
    }
    return xxhash.xxh3_128_hexdigest(canonical_json(body))


def current_data(ws: Workspace) -> tuple[list[DataRow], dict[str, dict[str, Any]]]:
    """What a snapshot taken now would record of the data and the code: the data rows (see
    `retention.capture`) and the code resources' git state."""
    hashes = FileHashCache.of_workspace(ws.meta_dir)
    try:
        rows, _ = capture(ws, ws.store.recorded_versions(), hashes)
    finally:
        hashes.save()
    return rows, resource_states(ws)


def _results_refs(ws: Workspace, refs: list[str]) -> list[str]:
    """The refs (with a good record) of results resources, in the resources' order."""
    # Stored refs are normalised, so the resource is the text before the first slash.
    order = {
        name: i
        for i, (name, resource) in enumerate(ws.resources.items())
        if resource.role == "results"
    }
    chosen = [ref for ref in refs if ref.split("/", 1)[0] in order]
    return sorted(chosen, key=lambda r: (order[r.split("/", 1)[0]], r))


def take_snapshot(
    ws: Workspace, tag: str | None = None, message: str = "", *, remote: RemoteData | None = None
) -> SnapshotOutcome:
    """Snapshot the workspace: its lineage, the data of every ref and of source-data and code
    resources (retained, so the snapshot restores while it exists), code's git state; results
    get a per-snapshot copy with `lineage.json`. A restore a crash interrupted is finished
    first (`remote` moves its remote data, if it has any): a snapshot of a half-restored
    workspace would be of nothing anyone made."""
    if tag is not None:
        validate_tag(tag)
    if (ws.meta_dir / RESTORE_INTENT_FILE).exists():
        finish_interrupted_restore(ws, remote)
    hashes = FileHashCache.of_workspace(ws.meta_dir)
    outcome = _take(ws, tag, message, hashes)
    # Only now, the snapshot taken (or found): a refused one leaves the cache as it was.
    # Every ref was scanned, so what was not is gone from the cache.
    hashes.save(prune=True)
    return outcome


def _take(ws: Workspace, tag: str | None, message: str, hashes: FileHashCache) -> SnapshotOutcome:
    """`take_snapshot`'s work, planned before anything is touched: everything that can refuse
    it from what the store holds (the tag, the index, its positions, the results' records) is
    checked before a file is retained; what a later refusal finds (a tag taken meanwhile, a
    results folder in the way, a disk error) takes back every object it retained."""
    store = ws.store
    placed: list[Path] = []
    objects = ObjectStore.of_workspace(ws.meta_dir)
    added: list[Stored] = []
    warnings: list[str] = []
    try:
        # Scanning every ref and copying what changed may take long (a first snapshot copies
        # everything), and steps wait for the store's lock at most its timeout: both happen
        # before taking it. Under the lock the lineage is checked to be what was scanned (if
        # a step committed meanwhile, the scan is redone there: the hash cache makes it
        # cheap), and every object a new version needs is checked present (a `gc` may have
        # freed what nothing referenced yet). The results copies go if anything fails before
        # the store commits, the commit itself included (a full disk refuses it): an index
        # entry and its copies commit together, or neither stays.
        with gc_paused():
            seen = store.last_operation()
            rows = store.identity_rows()
            data, scans = capture(ws, store.recorded_versions(), hashes, warnings.append)
            code = resource_states(ws)
            digest = hash_of_rows(ws, rows, data, code)
            infos = list_snapshots(ws)
            _check_tag(infos, tag, digest)
            copied = RetentionReport(versions=len(scans))
            if not any(info.hash == digest for info in infos):
                _check_positions(ws)
                _results_states(ws, rows)
                _retain(ws, objects, scans, hashes, copied, record=False, added=added)
        with store.locked(), gc_paused():
            if store.last_operation() != seen:
                warnings.clear()
                rows = store.identity_rows()
                data, scans = capture(ws, store.recorded_versions(), hashes, warnings.append)
                code = resource_states(ws)
                digest = hash_of_rows(ws, rows, data, code)
            infos = list_snapshots(ws)
            _check_tag(infos, tag, digest)
            existing = next((i for i in infos if i.hash == digest), None)
            if existing is not None:
                _take_back(ws, objects, added)  # what a snapshot taken meanwhile holds stays
                if tag is None or tag in existing.tags:
                    return SnapshotOutcome(existing, created=False)
                existing.tags.append(tag)
                _add_tag(ws, existing.hash, tag)
                return SnapshotOutcome(existing, created=False, tag_added=True)

            info = SnapshotInfo(
                hash=digest,
                tags=[tag] if tag else [],
                message=redact_text(message or ""),
                created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                resources=code,
            )
            outcome = SnapshotOutcome(
                info,
                created=True,
                warnings=warnings,
                drift=[row.ref for row in data if row.kind == DRIFT],
            )
            outcome.retention = _retain(
                ws, objects, scans, hashes, copied, record=True, added=added
            )
            results_refs, states = _results_states(ws, rows)
            info.metrics = snapshot_metrics(
                ws,
                results_refs,
                {ref: states[ref].record for ref in results_refs},
                outcome.warnings,
            )
            placed = archive_results(
                ws, info, states, results_refs, outcome.warnings, folder_name(info, infos)
            )
            # In the transaction `store.locked()` holds: the manifest and the index entry
            # commit together when the block ends, or not at all.
            store.save_snapshot(digest)
            snapshot_data.save_rows(ws, digest, data)
            _add_snapshot(ws, info)
        return outcome
    except BaseException:
        for folder in placed:
            remove_tree(folder, ignore_errors=True)
        _take_back(ws, objects, added)
        raise
    finally:
        objects.close()


def _results_states(
    ws: Workspace, rows: list[tuple[str, str, str | None]]
) -> tuple[list[str], dict[str, RefState]]:
    """The refs (with a good record) of results resources and their states: only these
    records are read (the rest of a snapshot is references to records), and a damaged one
    refuses the snapshot."""
    results_refs = _results_refs(
        ws, [ref for ref, _status, identity in rows if identity is not None]
    )
    return results_refs, ws.store.states_in(None, results_refs)


def _take_back(ws: Workspace, objects: ObjectStore, added: list[Stored]) -> None:
    """Remove the objects this snapshot put in the object store, for a snapshot that does not
    go ahead: under the store's lock, so that only objects no retained version names go (a
    snapshot that committed meanwhile may name the same content; one still retaining checks
    its objects again under the lock). Best effort: what stays is freed by `gc`."""
    if not added:
        return
    try:
        with ws.store.locked():
            live = snapshot_data.live_digests(ws)
            objects.take_back([stored for stored in added if stored.digest not in live])
    except (DwsError, OSError):
        pass
    added.clear()


def _check_tag(infos: list[SnapshotInfo], tag: str | None, digest: str) -> None:
    owner = next((i for i in infos if tag is not None and tag in i.tags), None)
    if owner is not None and owner.hash != digest:
        raise SnapshotError(
            f"tag {tag!r} already names snapshot {owner.hash[:12]}; "
            "choose another tag, or delete that snapshot first"
        )


def _check_positions(ws: Workspace) -> None:
    """Refuse, before anything is retained, an index whose positions the new entry could not
    follow (see `_next`)."""
    ws_id = ws.store.workspace_id
    with ws.store.reading() as connection:
        for table, what in ((_SNAPSHOTS, "snapshot"), (_TAGS, "tag")):
            last = connection.execute(
                select(func.coalesce(func.max(table.c.position), 0)).where(
                    table.c.workspace_id == ws_id
                )
            ).scalar()
            _next(ws, last, what)


def _retain(
    ws: Workspace,
    objects: ObjectStore,
    scans: dict[str, DataScan],
    hashes: FileHashCache,
    report: RetentionReport,
    *,
    record: bool,
    added: list[Stored],
) -> RetentionReport:
    """Retain every scanned version no earlier snapshot retained already: its files into the
    object store (counted in `report`; a file there already costs one `stat`; each one newly
    stored goes to `added`) and, when `record` (under the store's lock), its manifest into
    the store."""
    report.versions = len(scans)
    wanted = {(ref, found.version) for ref, found in scans.items() if found.version is not None}
    # Most of a snapshot is what the previous one held: only the rest is looked up.
    have = wanted & snapshot_data.latest_rows(ws)
    have |= snapshot_data.retained(ws, wanted - have)
    manifests = []
    for ref, found in scans.items():
        if found.version is None or (ref, found.version) in have:
            continue
        manifests.append(
            (ref, found.version, found.link, retain(objects, found, hashes, report, added))
        )
    if record:
        report.new_versions = len(manifests)
        snapshot_data.save_manifests(ws, manifests)
    return report


# ------------------------------------------------------------------ the index entry


def _add_snapshot(ws: Workspace, info: SnapshotInfo) -> None:
    store = ws.store
    ws_id = store.workspace_id
    with store.locked() as connection:
        position = connection.execute(
            select(func.coalesce(func.max(_SNAPSHOTS.c.position), 0)).where(
                _SNAPSHOTS.c.workspace_id == ws_id
            )
        ).scalar()
        connection.execute(
            insert(_SNAPSHOTS).values(
                workspace_id=ws_id,
                hash=info.hash,
                position=_next(ws, position, "snapshot"),
                message=info.message,
                created=info.created,
                metrics=None if info.metrics is None else orjson.dumps(info.metrics).decode(),
                results=orjson.dumps(info.results).decode(),
                resources=None if info.resources is None else orjson.dumps(info.resources).decode(),
            )
        )
        for tag in info.tags:
            _add_tag(ws, info.hash, tag)


def _add_tag(ws: Workspace, digest: str, tag: str) -> None:
    store = ws.store
    ws_id = store.workspace_id
    with store.locked() as connection:
        position = connection.execute(
            select(func.coalesce(func.max(_TAGS.c.position), 0)).where(
                _TAGS.c.workspace_id == ws_id
            )
        ).scalar()
        connection.execute(
            insert(_TAGS).values(
                workspace_id=ws_id, tag=tag, hash=digest, position=_next(ws, position, "tag")
            )
        )


def _next(ws: Workspace, last: Any, what: str) -> int:
    """The position after `last`, the greatest on record (a database column edited by hand
    can hold text there, which SQLite sorts after every number)."""
    if type(last) is not int:
        raise WorkspaceConfigError(
            f"{index_where(ws)} is corrupt: a {what} position is {str(last)[:40]!r}, not a "
            "number; restore the store from a backup"
        )
    return last + 1
