"""Restoring a snapshot, steps 1 and 2 (see `restore`): plan each ref's way back, then stage
every version beside its ref and check it.

These steps touch nothing the workspace reads, so they can refuse at any point (a version
not kept, a damaged copy, a full disk) and leave the workspace as it was: every staged copy
is removed again. Only what they hand on, every copy checked, goes to `restore`'s swap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dws_dagster.errors import (
    DataNotFoundError,
    DwsError,
    InvalidResourceRefError,
    RetentionError,
    SnapshotRestoreError,
)
from dws_dagster.snapshots import snapshot_data
from dws_dagster.snapshots.file_hashes import FileHashCache
from dws_dagster.snapshots.index import SnapshotInfo, results_folder
from dws_dagster.snapshots.objects import ObjectStore
from dws_dagster.snapshots.retention import (
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
from dws_dagster.store.messages import recovery_advice
from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.files import write_error
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.remote_versions import RemoteData, kept_location
from dws_dagster.workspace.swap import copy_data, kept_version_path, staging_path
from dws_dagster.workspace.trees import make_folders, remove_path
from dws_dagster.workspace.versions import short


@dataclass
class RestoreReport:
    """What `restore.restore_snapshot` did, ref by ref (planning and staging fill most of it)."""

    info: SnapshotInfo
    data_unchanged: list[str] = field(default_factory=list)
    data_restored: list[str] = field(default_factory=list)
    not_restored: list[tuple[str, str]] = field(default_factory=list)
    lineage_restored: list[str] = field(default_factory=list)
    lineage_removed: list[str] = field(default_factory=list)
    #: Code resources in git left as they are (ref, what to do): restoring them rewrites
    #: files git tracks, so it is asked for (`code=True`).
    code_left: list[tuple[str, str]] = field(default_factory=list)
    #: Refs whose data came from a replay's reproduced copy (`restore_snapshot(replayed=)`).
    data_replayed: list[str] = field(default_factory=list)


_DIRTY = ", with uncommitted changes"


@dataclass
class Plan:
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
    #: Which of `sources` the staged copy came from.
    used: str | None = None
    #: Folders made to hold the staged copy (deepest last): removed again on a refusal.
    made: list[Path] = field(default_factory=list)


def rows_to_restore(ws: Workspace, info: SnapshotInfo, manifest: dict[str, Any]) -> list[DataRow]:
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


def plan_all(
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
    replayed: Mapping[str, Path],
) -> tuple[list[Plan], list[tuple[str, str]]]:
    plans: list[Plan] = []
    missing: list[tuple[str, str]] = []
    preload(ws, hashes)
    roots = root_rows(rows)
    for row in rows:
        if progress is not None:
            progress(row.ref)
        if inside(row.ref, roots):  # comes back with its resource: reported, not staged
            plan = Plan(row, via_root=True)
            plan.now = scan(ws, row.ref, hashes).version
            plan.unchanged = plan.now == row.version
            plans.append(plan)
            continue
        plan = _plan(ws, info, row, hashes, objects, remote, replayed.get(row.ref))
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
    replayed: Path | None = None,
) -> Plan:
    """Where `row`'s data stands and where its version may come from; touches nothing."""
    plan = Plan(row)
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
    if replayed is not None and replayed.exists():
        plan.sources.append(("replayed", replayed))
    plan.sources += kept_copies(ws, info, row.ref, row.version, objects)
    if not plan.sources:
        where = f"data is now at {short(plan.now)}" if plan.now else "its data is missing"
        lost = (
            " (its retained files are missing from .dataworkspace/objects)"
            if snapshot_data.manifest(ws, row.ref, row.version) is not None
            else ""
        )
        plan.problem = f"version {short(row.version)} was not kept{lost} ({where})"
    return plan


def kept_copies(
    ws: Workspace, info: SnapshotInfo, ref: str, version: str, objects: ObjectStore
) -> list[tuple[str, Any]]:
    """Where a local ref's `version` may still be kept, cheapest first, for `stage_copy`: the
    snapshot's retained files (all objects present), a kept version beside the ref, the
    snapshot's results copy. Each is only a candidate until staged and checked."""
    parsed = as_ref(ref)
    sources: list[tuple[str, Any]] = []
    kept = snapshot_data.manifest(ws, ref, version)
    if kept is not None and not missing_objects(objects, kept[1]):
        sources.append(("retained", kept))
    copy = kept_version_path(ws.resource_root(ws.resource(parsed.name)), parsed.subpath, version)
    if copy.exists():
        sources.append(("path", copy))
    for number, entry in enumerate(info.results):
        if entry["ref"] == ref:
            folder = results_folder(ws, info, number)
            if folder is not None:
                path = folder / parsed.subpath if parsed.subpath else folder
                if path.exists():
                    sources.append(("results", path))
    return sources


def _plan_remote(ws: Workspace, plan: Plan, remote: RemoteData | None) -> Plan:
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


def refusal(info: SnapshotInfo, missing: list[tuple[str, str]]) -> str:
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


def stage_all(
    ws: Workspace,
    info: SnapshotInfo,
    plans: list[Plan],
    objects: ObjectStore,
    report: RestoreReport,
    lineage: dict[str, str | None],
    partial: bool,
) -> list[Plan]:
    """Stage every plan's data beside its ref; on a refusal or any error every staged copy
    goes and nothing else was touched."""
    staged: list[Plan] = []
    with_root: list[Plan] = []
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
                raise SnapshotRestoreError(refusal(info, [why]))
            report.not_restored.append(why)
    except BaseException:
        for plan in staged:
            if plan.staging is not None:
                remove_path(plan.staging)
            remove_made(plan)
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
    report.data_replayed = sorted(plan.row.ref for plan in staged if plan.used == "replayed")
    return staged


def _stage(ws: Workspace, plan: Plan, objects: ObjectStore) -> str | None:
    """Build the wanted version at a staging path beside the ref, checked; why not, else
    None."""
    assert plan.row.version is not None  # planned without sources otherwise
    target = ws.local_path(as_ref(plan.row.ref))
    plan.made = [folder for folder in target.parents if not folder.exists()][::-1]
    try:
        make_folders(target.parent)
        staged = stage_copy(
            ws, plan.row.ref, plan.row.version, plan.sources, objects, target,
            lambda: staging_path(target),
        )  # fmt: skip
    except BaseException:
        remove_made(plan)
        raise
    if staged is None:
        remove_made(plan)
        return (
            f"no kept copy of version {short(plan.row.version)} has that version any more "
            "(a damaged copy)"
        )
    plan.staging, plan.used = staged
    return None


def stage_copy(
    ws: Workspace,
    ref: str,
    version: str,
    sources: list[tuple[str, Any]],
    objects: ObjectStore,
    target: Path,
    place: Callable[[], Path],
) -> tuple[Path, str] | None:
    """The first of `sources` that, built at a new path from `place()`, has `version` as
    `ref`'s data: that path and the source's kind; None when none has it (nothing is left
    behind). A disk error is raised naming `target` (`WorkspaceWriteError`): another source
    would not do better."""
    parsed = as_ref(ref)
    for how, source in sources:
        staging = place()
        try:
            if how == "retained":
                link, files = source
                stage(objects, files, link, staging)
            else:
                copy_data(source, staging, shown=target)
                if how == "results" and staging.is_dir():
                    (staging / "lineage.json").unlink(missing_ok=True)
            restored: str | None = ws.version_of(parsed, at=staging, on_skip=lambda _m: None)
        except (DataNotFoundError, RetentionError):
            restored = None  # a damaged copy: the next source may do
        except OSError as exc:  # the disk, not the copy: nothing else would do better
            remove_path(staging)
            if isinstance(exc, DwsError):
                raise
            raise write_error(target, exc, action="restore the data of") from exc
        except BaseException:
            remove_path(staging)
            raise
        if restored == version:
            return staging, how
        remove_path(staging)
    return None


def remove_made(plan: Plan) -> None:
    """Remove the folders made for `plan`'s staged copy, deepest first (only while empty)."""
    for folder in reversed(plan.made):
        try:
            folder.rmdir()
        except OSError:
            break
    plan.made = []
