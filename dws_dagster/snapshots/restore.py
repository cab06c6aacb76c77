"""Restore a snapshot: every ref's data and the lineage, all of it or nothing.

A restore goes in three steps, so that neither a refusal nor a crash leaves the workspace half
restored:

1. **Plan**, touching nothing: for each ref the snapshot captured, where its data stands now and
   where the snapshot's version can come from (the retained files, a kept copy, the snapshot's
   results copy). A ref that cannot be brought back refuses the whole restore (unless partial).
2. **Stage**: every version is rebuilt beside its ref and checked to have the snapshot's
   version. Still nothing the workspace reads has changed; any failure removes the copies.
   Remote data (object stores, HDFS) is not copied: the snapshot's version is found where the
   writer kept it (`<uri>/.dws/versions/…`, see remote.py) and its version checked there.
3. **Swap**: an intent file (`.dataworkspace/restore-in-progress.json`) lists the staged copies;
   each is renamed into place (what it replaces is kept as a version), the lineage is reset to
   the snapshot's in one transaction, and the intent goes. A crash during this step leaves the
   intent, and the next snapshot, restore, gc or `status` finishes the restore from it: every
   copy it names was checked already, so going forward is always possible.

Steps 1 and 2 are `restore_plan`'s; this module runs them and does step 3, which is also what
finishes an interrupted restore.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from dws_dagster.errors import InvalidResourceRefError, SnapshotRestoreError, WorkspaceConfigError
from dws_dagster.snapshots import snapshot_data
from dws_dagster.snapshots.file_hashes import FileHashCache
from dws_dagster.snapshots.index import resolve_snapshot, snapshot_manifest
from dws_dagster.snapshots.objects import ObjectStore
from dws_dagster.snapshots.restore_plan import (
    Plan,
    RestoreReport,
    plan_all,
    refusal,
    remove_path,
    rows_to_restore,
    stage_all,
)
from dws_dagster.store.gc_pause import gc_paused
from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.data_files import is_ignored_name
from dws_dagster.workspace.definition import RESTORE_INTENT_FILE, RESULTS_SNAPSHOT_DIR, Workspace
from dws_dagster.workspace.files import atomic_write_json, fsync_dir
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.remote_versions import RemoteData, kept_location
from dws_dagster.workspace.shapes import VERSION_PATTERN
from dws_dagster.workspace.swap import (
    STAGING_PREFIX,
    is_staging_name,
    kept_version_path,
    swap_into_place,
)
from dws_dagster.workspace.trees import make_folders

INTENT_FILE = RESTORE_INTENT_FILE
_VERSION = re.compile(VERSION_PATTERN)
_INTENT_FORMAT = 1


def restore_snapshot(
    ws: Workspace,
    name: str,
    progress: Callable[[str], None] | None = None,
    *,
    partial: bool = False,
    code: bool = False,
    remote: RemoteData | None = None,
    replayed: Mapping[str, Path] | None = None,
) -> RestoreReport:
    """Make a snapshot's lineage and data current again.

    Data comes back from the snapshot's retained files, from kept versions (`.dws/versions/`
    in the resource) or, for results, from the snapshot's own copy; what is replaced is kept
    as a version in turn. Every ref is checked and staged before anything is touched: when
    some ref's data cannot be brought back the restore is refused (`SnapshotRestoreError`,
    nothing changed) unless `partial` is set, in which case the other refs are restored and
    those are marked unknown. Code resources in git are left to git unless `code` is set.
    Refs in remote resources need `remote` (dws_dagster.spark.remote_data gives it): without
    it they cannot be brought back. `replayed` ({ref: path}) offers data a replay reproduced
    as the first source of those refs (checked like every other copy: only a copy with the
    snapshot's version is used).
    """
    info = resolve_snapshot(ws, name)
    # Every record it restores is read and checked (the store is untrusted input): a damaged
    # one refuses the restore before anything changes.
    manifest = snapshot_manifest(ws, info.hash)["refs"]
    lineage = {ref: RefState.from_json(raw).owner for ref, raw in manifest.items()}
    report = RestoreReport(info)
    store = ws.store
    hashes = FileHashCache.of_workspace(ws.meta_dir)
    objects = ObjectStore.of_workspace(ws.meta_dir)
    with store.locked(), gc_paused():
        finish_interrupted_restore(ws, remote)
        current = store.refs()
        rows = rows_to_restore(ws, info, manifest)
        plans, missing = plan_all(
            ws, info, rows, lineage, hashes, objects, report, progress, code, remote,
            replayed or {},
        )  # fmt: skip
        if missing and not partial:
            raise SnapshotRestoreError(refusal(info, missing))
        report.not_restored = list(missing)
        staged = stage_all(ws, info, plans, objects, report, lineage, partial)
        report.not_restored.sort()
        unknown = [ref for ref, _ in report.not_restored]
        _swap_all(ws, info.hash, staged, unknown, remote)
        report.lineage_restored = sorted(lineage)
        report.lineage_removed = sorted(set(current) - set(lineage))
    # Only once the restore went ahead: a refused one leaves the cache (and everything else
    # under .dataworkspace/) as it was.
    hashes.save()
    return report


# ------------------------------------------------------------------------------ swap


def _swap_all(
    ws: Workspace,
    snapshot_hash: str,
    staged: list[Plan],
    unknown: list[str],
    remote: RemoteData | None,
) -> None:
    """Put every staged copy in place. What each replaces is kept as a version of its ref
    (`.dws/versions/`) unless a snapshot retained that version already: a restore never
    loses data, and never keeps it twice. (Remote data is always kept where it lies: it is
    how a remote version is retained.)"""
    retained = snapshot_data.retained(
        ws, ((plan.row.ref, plan.now) for plan in staged if plan.now is not None)
    )
    swaps: list[dict[str, Any]] = []
    for plan in staged:
        if plan.remote:
            swaps.append(
                {
                    "ref": plan.row.ref,
                    "remote": True,
                    "version": None if plan.remove else plan.row.version,
                }
            )
            continue
        swaps.append(
            {
                "ref": plan.row.ref,
                "staging": plan.staging.name if plan.staging is not None else None,
                "keep": None if (plan.row.ref, plan.now) in retained else plan.now,
            }
        )
    intent = {
        "format": _INTENT_FORMAT,
        "snapshot": snapshot_hash,
        "unknown": unknown,
        "swaps": swaps,
    }
    path = ws.meta_dir / INTENT_FILE
    atomic_write_json(path, intent)
    _finish(ws, intent, remote)
    path.unlink()
    fsync_dir(ws.meta_dir)


def _finish(ws: Workspace, intent: dict[str, Any], remote: RemoteData | None) -> None:
    """Put every staged copy the intent names in place, then the snapshot's lineage: each
    step may have been done already by a run that crashed, so each is done only if needed."""
    for swap in intent["swaps"]:
        if swap.get("remote"):
            _finish_remote(ws, swap, remote)
            continue
        parsed = ws.check_writable(swap["ref"])
        target = ws.local_path(parsed)
        root = ws.resource_root(parsed.name)
        keep = kept_version_path(root, parsed.subpath, swap["keep"]) if swap["keep"] else None
        if swap["staging"] is None:  # the snapshot had no data here
            if target.exists() or target.is_symlink():
                if keep is not None and not keep.exists():
                    make_folders(keep.parent)
                    os.replace(target, keep)
                else:
                    remove_path(target)
            continue
        staging = target.parent / swap["staging"]
        if not staging.exists():
            continue  # swapped in already
        if parsed.subpath is None and target.is_dir() and staging.is_dir():
            _carry_over_unversioned(target, staging)
        swap_into_place(staging, target, keep_old_as=keep)
    ws.store.reset(intent["snapshot"], intent["unknown"])


def _finish_remote(ws: Workspace, swap: dict[str, Any], remote: RemoteData | None) -> None:
    """Move a remote ref's kept version back in place, what is there now going where its own
    version is kept. Repeatable: a crash between the two moves leaves the ref empty and the
    wanted version still kept, and the next run does the second move."""
    parsed = as_ref(swap["ref"])
    resource = ws.resource(parsed.name)
    if resource.is_local or remote is None:
        raise SnapshotRestoreError(
            f"an interrupted restore has remote data to put back at {swap['ref']}, which needs "
            "Spark: run 'dws-dagster status' (it finishes the restore), then check the result"
        )
    uri, target, wanted = str(resource.uri), ws.location(parsed), swap["version"]
    now = remote.version(target)
    if now == wanted:
        return
    if now is not None:
        keep = kept_location(uri, parsed.subpath, now)
        if remote.version(keep) is None:
            remote.move(target, keep)
        else:  # the same version (content) is kept already
            remote.delete(target)
    if wanted is not None:
        remote.move(kept_location(uri, parsed.subpath, wanted), target)


def finish_interrupted_restore(ws: Workspace, remote: RemoteData | None = None) -> bool:
    """Finish a restore a crash interrupted after it began putting data in place (see the
    module's docstring); True when there was one. The intent is read as untrusted input: it
    can only name staged copies beside refs of this workspace."""
    path = ws.meta_dir / INTENT_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise WorkspaceConfigError(f"cannot read {path}: {exc}; fix its permissions") from None
    intent = _checked_intent(raw, path)
    with ws.store.locked(), gc_paused():
        _finish(ws, intent, remote)
    path.unlink(missing_ok=True)
    return True


def _checked_intent(raw: bytes, path: Path) -> dict[str, Any]:
    bad = WorkspaceConfigError(
        f"{path} is damaged (it is not what an interrupted restore leaves); nothing was "
        "changed. Remove it, then run the restore again"
    )
    try:
        intent = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad from None
    if (
        type(intent) is not dict
        or intent.get("format") != _INTENT_FORMAT
        or type(intent.get("snapshot")) is not str
        or type(intent.get("swaps")) is not list
        or type(intent.get("unknown")) is not list
        or not all(type(ref) is str for ref in intent["unknown"])
    ):
        raise bad
    for swap in intent["swaps"]:
        if type(swap) is not dict or type(swap.get("ref")) is not str:
            raise bad
        if "remote" in swap:
            version = swap.get("version")
            if swap["remote"] is not True or (
                version is not None
                and (type(version) is not str or not _VERSION.fullmatch(version))
            ):
                raise bad
            try:
                as_ref(swap["ref"])
            except InvalidResourceRefError:
                raise bad from None
            continue
        staging, keep = swap.get("staging"), swap.get("keep")
        try:
            name = as_ref(swap["ref"]).parts[-1] if as_ref(swap["ref"]).subpath else None
        except InvalidResourceRefError:
            raise bad from None
        if staging is not None and (
            type(staging) is not str
            or "/" in staging
            or not staging.startswith(STAGING_PREFIX)
            or (name is not None and not is_staging_name(staging, name))
        ):
            raise bad
        if keep is not None and type(keep) is not str:
            raise bad
    return intent


def _carry_over_unversioned(target: Path, staging: Path) -> None:
    """Move what a resource root holds beside its data (snapshot archives, kept versions,
    hidden files the snapshot did not have) into the staged copy, so swapping the root does
    not take them away."""
    for entry in list(target.iterdir()):
        if (is_ignored_name(entry.name) or entry.name == RESULTS_SNAPSHOT_DIR) and not (
            staging / entry.name
        ).exists():
            os.replace(entry, staging / entry.name)
