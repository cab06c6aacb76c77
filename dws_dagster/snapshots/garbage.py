"""Free retained data that no snapshot references (`dws-dagster gc`).

Deleting a snapshot frees nothing by itself: its data may be shared with other snapshots, and
deciding that needs every snapshot's rows. `gc` does it in two locked transactions, so it can
never free what a snapshot still needs, even with snapshots taken meanwhile on other processes:

1. retained versions no snapshot's data rows name are dropped from the store (committed);
2. under the lock again (no snapshot can start retaining), the object files no remaining
   version names are deleted, with what interrupted work left: half-stored objects and staged
   results copies. A results copy in place that no snapshot names (its snapshot was killed
   before committing) is named for the user to delete: it may as well be theirs.

A crash between or during the two leaves files nothing names, which the next `gc` frees.

Remote versions are retained where they lie (remote.py): under the lock, each kept one that no
snapshot references is freed unless its writer's `keep_versions` (noted in the ref's record)
keeps it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dws_dagster.errors import InvalidResourceRefError
from dws_dagster.snapshots import snapshot_data
from dws_dagster.snapshots.index import list_snapshots
from dws_dagster.snapshots.objects import ObjectStore
from dws_dagster.snapshots.restore import finish_interrupted_restore
from dws_dagster.store.gc_pause import gc_paused
from dws_dagster.workspace.definition import RESULTS_SNAPSHOT_DIR, Workspace
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.remote_versions import (
    KEEP_VERSIONS_KEY,
    RemoteData,
    kept_folder,
    kept_location,
    prunable,
    versions_in,
)
from dws_dagster.workspace.swap import KEPT_MARK, STAGING_PREFIX
from dws_dagster.workspace.trees import remove_tree


@dataclass
class GcReport:
    """What `collect_garbage` freed (or, with `dry_run`, would free)."""

    dry_run: bool
    versions: list[tuple[str, str]] = field(default_factory=list)
    objects: int = 0
    #: Bytes given back to the filesystem (an object still hard-linked from the workspace
    #: frees nothing: its file is the workspace's data).
    bytes_freed: int = 0
    still_linked: int = 0
    #: Deleted: what interrupted work left (half-stored objects, staged results copies).
    leftovers: list[Path] = field(default_factory=list)
    #: Named, not deleted: folders under a results resource's `snapshots/` no snapshot names.
    results_copies: list[Path] = field(default_factory=list)
    #: Kept remote versions (ref, version) no snapshot references, beyond `keep_versions`.
    remote_versions: list[tuple[str, str]] = field(default_factory=list)
    #: Remote resources not looked at (no `remote` given to reach them).
    remote_skipped: list[str] = field(default_factory=list)


def collect_garbage(
    ws: Workspace, *, dry_run: bool = False, remote: RemoteData | None = None
) -> GcReport:
    """Free every retained version, object and results copy that no snapshot references
    (remote kept versions too, through `remote`)."""
    report = GcReport(dry_run)
    objects = ObjectStore.of_workspace(ws.meta_dir)
    store = ws.store
    with store.locked(), gc_paused():
        finish_interrupted_restore(ws, remote)
        report.versions = snapshot_data.unreferenced_versions(ws)
        if not dry_run:
            snapshot_data.drop_versions(ws, report.versions)
    with store.locked(), gc_paused():
        live = snapshot_data.live_digests(ws)
        if dry_run:  # what step 1 would have dropped still names its objects
            live -= _only_named_by(ws, report.versions, live)
        for digest, info in list(objects.digests()):
            if digest in live:
                continue
            report.objects += 1
            if info.st_nlink > 1:
                report.still_linked += 1
            else:
                report.bytes_freed += info.st_size
            if not dry_run:
                objects.remove(digest)
        unnamed = _orphan_results_copies(ws)
        staged = [path for path in unnamed if path.name.startswith(STAGING_PREFIX)]
        # Copies a snapshot is making right now are not leftovers: the object store skips
        # what a live snapshot holds (snapshots retain before taking the lock gc holds).
        report.leftovers = objects.clear_leftovers(dry_run=dry_run) + staged
        # A folder in place may be a user's own, however reserved `snapshots/` is: named,
        # never deleted.
        report.results_copies = [
            path for path in unnamed if not path.name.startswith(STAGING_PREFIX)
        ]
        if not dry_run:
            for path in staged:
                _remove(path)
        _collect_remote(ws, report, remote)
    return report


def _collect_remote(ws: Workspace, report: GcReport, remote: RemoteData | None) -> None:
    """Free kept remote versions nothing needs. The caller holds the store's lock: no
    snapshot can start referencing one meanwhile (a snapshot only references current data)."""
    resources = [res for res in ws.resources.values() if not res.is_local]
    if remote is None:
        report.remote_skipped = [res.name for res in resources]
        return
    if not resources:
        return
    referenced = snapshot_data.referenced(ws)
    for resource in resources:
        uri = str(resource.uri)
        for subpath, entries in _kept_folders(remote, uri):
            try:
                parsed = ResourceRef(resource.name, subpath)
            except InvalidResourceRefError:
                continue  # not a ref's folder: not ours
            if parsed.subpath != subpath:
                continue
            ref = str(parsed)
            state = ws.store.get(ref)
            extra = (state.record or {}).get("extra") if state is not None else None
            keep = extra.get(KEEP_VERSIONS_KEY) if isinstance(extra, dict) else None
            keep = keep if type(keep) is int and keep > 0 else 0
            for version in prunable(versions_in(entries), referenced.get(ref, ()), keep):
                report.remote_versions.append((ref, version))
                if not report.dry_run:
                    remote.delete(kept_location(uri, subpath, version))


def _kept_folders(remote: RemoteData, uri: str) -> list[tuple[str | None, list[tuple[str, int]]]]:
    """Every subpath with a kept folder under the resource's `.dws/versions/` (refs whose
    lineage is gone included: their versions are nobody's now), with that folder's entries:
    each folder is listed once (a request per folder on an object store)."""
    found: list[tuple[str | None, list[tuple[str, int]]]] = []
    pending: list[str | None] = [None]
    while pending:
        subpath = pending.pop()
        entries = remote.kept(kept_folder(uri, subpath))
        if any(name.startswith(KEPT_MARK) for name, _ in entries):
            found.append((subpath, entries))
        pending.extend(
            f"{subpath}/{name}" if subpath else name
            for name, _ in entries
            if not name.startswith((KEPT_MARK, "."))
        )
    return sorted(found, key=lambda item: item[0] or "")


def _only_named_by(ws: Workspace, versions: list[tuple[str, str]], live: set[str]) -> set[str]:
    """Digests that only `versions` need (for a dry run, which drops nothing)."""
    doomed = set(versions)
    if not doomed:
        return set()
    needed_elsewhere: set[str] = set()
    named: set[str] = set()
    for (ref, version), files in snapshot_data.all_manifests(ws):
        target = named if (ref, version) in doomed else needed_elsewhere
        target.update(entry.digest for entry in files)
    return named - needed_elsewhere


def _orphan_results_copies(ws: Workspace) -> list[Path]:
    """Results copies under `snapshots/` that no snapshot names, staged or in place: left by
    a snapshot that never committed (its process was killed). Snapshots take the store's
    lock, which gc holds: none is being made now."""
    named: set[str] = set()
    for info in list_snapshots(ws):
        for copy in info.results:
            named.add(f"{copy['ref'].split('/', 1)[0]}/{copy['folder']}")
    found = []
    for resource in ws.resources.values():
        if resource.role != "results" or not resource.is_local:
            continue
        folder = ws.resource_root(resource) / RESULTS_SNAPSHOT_DIR
        if folder.is_symlink() or not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith(".") and not entry.name.startswith(STAGING_PREFIX):
                continue  # hidden: not ours
            if f"{resource.name}/{RESULTS_SNAPSHOT_DIR}/{entry.name}" not in named:
                found.append(entry)
    return found


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
