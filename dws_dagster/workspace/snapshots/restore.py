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
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from dws_dagster.errors import (
    DwsError,
    InvalidResourceRefError,
    RetentionError,
    SnapshotRestoreError,
    WorkspaceConfigError,
)
from dws_dagster.workspace.files import atomic_write_json, fsync_dir, write_error
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.shapes import VERSION_PATTERN
from dws_dagster.workspace.snapshots import snapshot_data
from dws_dagster.workspace.snapshots.file_hashes import FileHashCache
from dws_dagster.workspace.snapshots.objects import ObjectStore
from dws_dagster.workspace.snapshots.remote import RemoteData, kept_location
from dws_dagster.workspace.snapshots.retention import (
    CODE,
    LINEAGE,
    MISSING,
    REMOTE,
    DataRow,
    inside,
    missing_objects,
    preload,
    root_rows,
    scan,
    stage,
)
from dws_dagster.workspace.snapshots.snapshots import (
    RestoreReport,
    SnapshotInfo,
    _results_folder,
    resolve_snapshot,
    snapshot_manifest,
)
from dws_dagster.workspace.store.gc_pause import gc_paused
from dws_dagster.workspace.store.messages import recovery_advice
from dws_dagster.workspace.store.ref_state import RefState
from dws_dagster.workspace.swap import (
    STAGING_PREFIX,
    copy_data,
    kept_version_path,
    staging_path,
    swap_into_place,
)
from dws_dagster.workspace.versions import DataNotFoundError, is_ignored_name, short
from dws_dagster.workspace.workspace import RESTORE_INTENT_FILE, RESULTS_SNAPSHOT_DIR, Workspace

INTENT_FILE = RESTORE_INTENT_FILE
_VERSION = re.compile(VERSION_PATTERN)
_DIRTY = ", with uncommitted changes"
_INTENT_FORMAT = 1


@dataclass
class _Plan:
    """One ref's way back: `unchanged`, or the sources to try in order."""

    row: DataRow
    now: str | None = None
    unchanged: bool = False
    #: The snapshot had no data here: what is there now goes (kept as a version).
    remove: bool = False
    sources: list[tuple[str, Any]] = field(default_factory=list)
    problem: str | None = None
    staging: Path | None = None
    #: Inside a resource the snapshot captured whole: its data comes back with the resource.
    via_root: bool = False
    #: Remote data: moved back from where its version is kept, not staged.
    remote: bool = False


def restore_snapshot(
    ws: Workspace,
    name: str,
    progress: Callable[[str], None] | None = None,
    *,
    partial: bool = False,
    code: bool = False,
    remote: RemoteData | None = None,
) -> RestoreReport:
    """Make a snapshot's lineage and data current again.

    Data comes back from the snapshot's retained files, from kept versions (`.dws/versions/`
    in the resource) or, for results, from the snapshot's own copy; what is replaced is kept
    as a version in turn. Every ref is checked and staged before anything is touched: when
    some ref's data cannot be brought back the restore is refused (`SnapshotRestoreError`,
    nothing changed) unless `partial` is set, in which case the other refs are restored and
    those are marked unknown. Code resources in git are left to git unless `code` is set.
    Refs in remote resources need `remote` (dws_dagster.spark.remote_data gives it): without
    it they cannot be brought back.
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
    try:
        with store.locked(), gc_paused():
            finish_interrupted_restore(ws, remote)
            current = store.refs()
            rows = _rows(ws, info, manifest)
            plans, missing = _plan_all(
                ws, info, rows, lineage, hashes, objects, report, progress, code, remote
            )
            if missing and not partial:
                raise SnapshotRestoreError(_refusal(info, missing))
            report.not_restored = list(missing)
            staged = _stage_all(ws, info, plans, objects, report, lineage, partial)
            report.not_restored.sort()
            unknown = [ref for ref, _ in report.not_restored]
            _swap_all(ws, info.hash, staged, unknown, remote)
            report.lineage_restored = sorted(lineage)
            report.lineage_removed = sorted(set(current) - set(lineage))
    finally:
        hashes.save()
    return report


def _rows(ws: Workspace, info: SnapshotInfo, manifest: dict[str, Any]) -> list[DataRow]:
    """The snapshot's data rows; for a snapshot taken before data was captured, the versions
    its lineage records."""
    if info.resources is not None:
        return snapshot_data.rows_of(ws, info.hash)
    rows = []
    for ref, raw in sorted(manifest.items()):
        version = RefState.from_json(raw).version
        if version is not None:
            rows.append(DataRow(ref, LINEAGE, version))
    return rows


def _plan_all(
    ws: Workspace,
    info: SnapshotInfo,
    rows: list[DataRow],
    lineage: dict[str, str | None],
    hashes: FileHashCache,
    objects: ObjectStore,
    report: RestoreReport,
    progress: Callable[[str], None] | None,
    code: bool,
    remote: RemoteData | None,
) -> tuple[list[_Plan], list[tuple[str, str]]]:
    plans: list[_Plan] = []
    missing: list[tuple[str, str]] = []
    preload(ws, hashes)
    roots = root_rows(rows)
    for row in rows:
        if progress is not None:
            progress(row.ref)
        if inside(row.ref, roots):  # comes back with its resource: reported, not staged
            plan = _Plan(row, via_root=True)
            plan.now = scan(ws, row.ref, hashes).version
            plan.unchanged = plan.now == row.version
            plans.append(plan)
            continue
        plan = _plan(ws, info, row, hashes, objects, remote)
        if (
            plan.problem is None
            and row.kind == CODE
            and not code
            and not plan.unchanged
            and info.resources is not None
            and row.ref in info.resources
        ):
            commit = info.resources[row.ref]["git_commit"]
            report.code_left.append(
                (
                    row.ref,
                    (
                        f"code is in git and differs from the snapshot's (commit {commit[:12]}"
                        f"{_DIRTY if info.resources[row.ref]['dirty'] else ''}): "
                        f"check that commit out, or restore with code=True (`--code`) to put the "
                        "snapshot's files back"
                    ),
                )
            )
            continue
        if plan.problem is not None:
            owner = lineage.get(row.ref)
            missing.append((row.ref, f"{plan.problem}; {recovery_advice(row.ref, owner)}"))
        else:
            plans.append(plan)
    return plans, missing


def _plan(
    ws: Workspace,
    info: SnapshotInfo,
    row: DataRow,
    hashes: FileHashCache,
    objects: ObjectStore,
    remote: RemoteData | None,
) -> _Plan:
    """Where `row`'s data stands and where its version may come from; touches nothing."""
    plan = _Plan(row)
    parsed = as_ref(row.ref)
    resource = ws.resources.get(parsed.name)
    if resource is None:
        plan.problem = f"resource '{parsed.name}' no longer exists in the workspace"
        return plan
    if row.kind == REMOTE or not resource.is_local:
        return _plan_remote(ws, plan, remote)
    plan.now = scan(ws, parsed, hashes).version
    if row.version is None or row.kind == MISSING:
        plan.unchanged = plan.now is None
        plan.remove = plan.now is not None
    elif plan.now == row.version:
        plan.unchanged = True
    if plan.unchanged:
        return plan
    try:  # only what will be written: reading through a link is allowed, writing is not
        ws.check_writable(parsed)
    except InvalidResourceRefError as exc:
        plan.problem = str(exc)
        return plan
    if plan.remove or row.version is None:
        return plan
    kept = snapshot_data.manifest(ws, row.ref, row.version)
    if kept is not None and not missing_objects(objects, kept[1]):
        plan.sources.append(("retained", kept))
    root = ws.resource_root(resource)
    copy = kept_version_path(root, parsed.subpath, row.version)
    if copy.exists():
        plan.sources.append(("path", copy))
    for number, entry in enumerate(info.results):
        if entry["ref"] == row.ref:
            folder = _results_folder(ws, info, number)
            if folder is not None:
                path = folder / parsed.subpath if parsed.subpath else folder
                if path.exists():
                    plan.sources.append(("results", path))
    if not plan.sources:
        where = f"data is now at {short(plan.now)}" if plan.now else "its data is missing"
        lost = (
            " (its retained files are missing from .dataworkspace/objects)"
            if kept is not None
            else ""
        )
        plan.problem = f"version {short(row.version)} was not kept{lost} ({where})"
    return plan


def _plan_remote(ws: Workspace, plan: _Plan, remote: RemoteData | None) -> _Plan:
    """A remote ref's way back: its version where the writer kept it, checked by its marker."""
    row = plan.row
    parsed = as_ref(row.ref)
    resource = ws.resource(parsed.name)
    plan.remote = True
    if resource.is_local:  # was remote when the snapshot was taken: its data was not kept here
        plan.problem = (
            f"resource '{parsed.name}' was remote when the snapshot was taken and "
            "is local now: its kept versions are where it used to be"
        )
        return plan
    if remote is None:
        plan.problem = (
            "remote data needs Spark to be checked and moved back: restore with "
            "'dws-dagster restore' (it starts Spark for remote refs), or pass "
            "remote=dws_dagster.spark.remote_data.hadoop_data()"
        )
        return plan
    plan.now = remote.version(ws.location(parsed))
    if row.version is None or row.kind == MISSING:
        plan.unchanged = plan.now is None
        plan.remove = plan.now is not None
        return plan
    if plan.now == row.version:
        plan.unchanged = True
        return plan
    source = kept_location(str(resource.uri), parsed.subpath, row.version)
    if remote.version(source) != row.version:
        where = f"data is now at {short(plan.now)}" if plan.now else "its data is missing"
        plan.problem = (
            f"version {short(row.version)} was not kept at {source} ({where}); "
            "remote versions are kept by the Spark IO manager when it replaces them"
        )
        return plan
    plan.sources.append(("remote", source))
    return plan


def _refusal(info: SnapshotInfo, missing: list[tuple[str, str]]) -> str:
    shown = "; ".join(f"{ref}: {why}" for ref, why in missing[:5])
    more = f"; and {len(missing) - 5} more" if len(missing) > 5 else ""
    return (
        f"cannot restore snapshot {info.name} ({info.hash[:12]}): the data of "
        f"{len(missing)} ref(s) cannot be brought back ({shown}{more}); nothing was "
        "changed. Restore with partial=True (`dws-dagster restore --partial`) to restore "
        "the rest and mark these unknown until their steps run again (or, for source "
        "data, until 'dws-dagster observe REF' records its data as it is)"
    )


# ----------------------------------------------------------------------------- stage


def _stage_all(
    ws: Workspace,
    info: SnapshotInfo,
    plans: list[_Plan],
    objects: ObjectStore,
    report: RestoreReport,
    lineage: dict[str, str | None],
    partial: bool,
) -> list[_Plan]:
    """Stage every plan's data beside its ref; on a refusal or any error every staged copy
    goes and nothing else was touched."""
    staged: list[_Plan] = []
    with_root: list[_Plan] = []
    try:
        for plan in plans:
            if plan.unchanged:
                report.data_unchanged.append(plan.row.ref)
                continue
            if plan.via_root:
                with_root.append(plan)
                continue
            if plan.remove or plan.remote:  # checked where it is kept; moved back at the swap
                staged.append(plan)
                continue
            problem = _stage(ws, plan, objects)
            if problem is None:
                staged.append(plan)
                continue
            owner = lineage.get(plan.row.ref)
            why = (plan.row.ref, f"{problem}; {recovery_advice(plan.row.ref, owner)}")
            if not partial:
                raise SnapshotRestoreError(_refusal(info, [why]))
            report.not_restored.append(why)
    except BaseException:
        for plan in staged:
            if plan.staging is not None:
                _remove_path(plan.staging)
        raise
    failed = {ref for ref, _ in report.not_restored}
    back = []
    for plan in with_root:
        ref, root = plan.row.ref, plan.row.ref.split("/", 1)[0]
        if root not in failed:
            back.append(ref)
            continue
        # Partial: the resource stays as it is, and so does what lies inside it.
        owner = lineage.get(ref)
        report.not_restored.append(
            (
                ref,
                (
                    f"version {short(plan.row.version)} was not kept (nor its resource '{root}', "
                    f"which holds it); {recovery_advice(ref, owner)}"
                ),
            )
        )
    report.data_restored = sorted([*(plan.row.ref for plan in staged), *back])
    return staged


def _stage(ws: Workspace, plan: _Plan, objects: ObjectStore) -> str | None:
    """Build the wanted version at a staging path beside the ref, checked; why not, else
    None."""
    parsed = as_ref(plan.row.ref)
    target = ws.local_path(parsed)
    target.parent.mkdir(parents=True, exist_ok=True)
    for how, source in plan.sources:
        staging = staging_path(target)
        try:
            if how == "retained":
                link, files = source
                stage(objects, files, link, staging)
            else:
                copy_data(source, staging)
                if how == "results" and staging.is_dir():
                    (staging / "lineage.json").unlink(missing_ok=True)
            restored: str | None = ws.version_of(parsed, at=staging, on_skip=lambda _m: None)
        except (DataNotFoundError, RetentionError):
            restored = None  # a damaged copy: the next source may do
        except OSError as exc:  # the disk, not the copy: nothing else would do better
            _remove_path(staging)
            if isinstance(exc, DwsError):
                raise
            raise write_error(target, exc, action="restore the data of") from exc
        except BaseException:
            _remove_path(staging)
            raise
        if restored == plan.row.version:
            plan.staging = staging
            return None
        _remove_path(staging)
    return (
        f"no kept copy of version {short(plan.row.version)} has that version any more "
        "(a damaged copy)"
    )


# ------------------------------------------------------------------------------ swap


def _swap_all(
    ws: Workspace,
    snapshot_hash: str,
    staged: list[_Plan],
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
                    keep.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(target, keep)
                else:
                    _remove_path(target)
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
            or (name is not None and not staging.startswith(f"{STAGING_PREFIX}{name}-"))
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


def _remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
