"""Naming the columns in which a replayed ref differs from what the snapshot recorded.

A version says only that two datasets differ. To say where, the recorded data is found where
restore would find it (the workspace's own data when it still holds that version, the
snapshot's retained files, a kept version, the snapshot's results copy), every candidate
checked to have the recorded version, and handed with the replay's data to a
`ColumnComparer` (the Spark layer gives one). When the recorded data is gone, or the data is
not in a format Spark reads, the verdict says so instead of naming columns.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dws_dagster.errors import DwsError
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.snapshots import snapshot_data
from dws_dagster.workspace.snapshots.history import SnapshotInfo, results_folder
from dws_dagster.workspace.snapshots.objects import ObjectStore
from dws_dagster.workspace.snapshots.replay_run import (
    DIFFERS,
    NON_DETERMINISTIC,
    RefVerdict,
    ReplayReport,
)
from dws_dagster.workspace.snapshots.retention import missing_objects, stage
from dws_dagster.workspace.swap import copy_data, kept_version_path
from dws_dagster.workspace.workspace import Workspace

#: Compares the data at two paths in one format; the columns that differ (added, removed,
#: retyped or holding other values), in the recorded data's column order.
ColumnComparer = Callable[[Path, Path, str], tuple[str, ...]]

#: Formats Spark reads without a package this machine may not have.
SPARK_FORMATS = ("parquet", "csv", "json", "orc")
#: Under the scratch workspace's `.dataworkspace/`: recorded data brought back to compare.
_RECORDED_DIR = "replay-recorded"


def name_differing_columns(
    ws: Workspace, report: ReplayReport, scratch: Workspace, compare: ColumnComparer
) -> None:
    """Give every differing verdict of `report` the columns that differ, in place; a verdict
    whose data cannot be compared says why in its detail."""
    info = report.plan.snapshot
    for number, verdict in enumerate(report.verdicts):
        if verdict.outcome not in (DIFFERS, NON_DETERMINISTIC) or verdict.recorded is None:
            continue
        report.verdicts[number] = _with_columns(ws, info, scratch, verdict, compare)


def _with_columns(
    ws: Workspace,
    info: SnapshotInfo,
    scratch: Workspace,
    verdict: RefVerdict,
    compare: ColumnComparer,
) -> RefVerdict:
    assert verdict.recorded is not None
    reproduced = scratch.local_path(as_ref(verdict.ref))
    fmt = _recorded_format(scratch, ws, verdict.ref) or _format_of_files(reproduced)
    if fmt is None or fmt not in SPARK_FORMATS:
        return _noted(verdict, "its columns were not compared (not data Spark reads)")
    recorded = recorded_data(ws, info, verdict.ref, verdict.recorded, scratch.meta_dir)
    if recorded is None:
        return _noted(
            verdict,
            "its columns were not compared: the recorded data is no longer kept (freed by gc)",
        )
    try:
        columns = compare(recorded, reproduced, fmt)
    except DwsError as exc:
        return _noted(verdict, f"its columns could not be compared: {exc}")
    if columns:
        said = f"columns that differ: {', '.join(columns)}"
    else:
        said = "every column holds the recorded values; the rows combine them differently"
    return dataclasses.replace(_noted(verdict, said), columns=columns)


def _noted(verdict: RefVerdict, note: str) -> RefVerdict:
    detail = f"{verdict.detail}; {note}" if verdict.detail else note
    return dataclasses.replace(verdict, detail=detail)


def _recorded_format(scratch: Workspace, ws: Workspace, ref: str) -> str | None:
    """The format the data was written in, as the writer recorded it (the replay's record
    first, then the workspace's)."""
    for store in (scratch.store, ws.store):
        state = store.get(ref)
        record: dict[str, Any] = (state.record if state is not None else None) or {}
        fmt = (record.get("extra") or {}).get("format")
        if isinstance(fmt, str):
            return fmt
    return None


def _format_of_files(path: Path) -> str | None:
    """The format of data no writer recorded one for (a script's files): the one suffix all
    its data files share, if Spark reads it."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    suffixes = {
        p.suffix.lstrip(".").lower()
        for p in files
        if not p.name.startswith(("_", "."))
        and not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts[:-1])
    }
    return suffixes.pop() if len(suffixes) == 1 else None


def recorded_data(
    ws: Workspace, info: SnapshotInfo, ref: str, version: str, work: Path
) -> Path | None:
    """Where `ref`'s data at `version` can be read: the workspace's own data when it still
    holds that version, else a copy brought back under `work` from the snapshot's retained
    files, a kept version or the snapshot's results copy; None when none of them has it."""
    parsed = as_ref(ref)
    resource = ws.resources.get(parsed.name)
    if resource is None or not resource.is_local:
        return None
    if _version(ws, ref, None) == version:
        return ws.local_path(parsed)
    target = work / _RECORDED_DIR / ref
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    kept = snapshot_data.manifest(ws, ref, version)
    objects = ObjectStore.of_workspace(ws.meta_dir)
    if kept is not None and not missing_objects(objects, kept[1]):
        stage(objects, kept[1], False, target)
        if _version(ws, ref, target) == version:
            return target
        shutil.rmtree(target, ignore_errors=True)
    copy = kept_version_path(ws.resource_root(resource), parsed.subpath, version)
    if copy.exists() and _version(ws, ref, copy) == version:
        return copy
    for number, entry in enumerate(info.results):
        folder = results_folder(ws, info, number) if entry["ref"] == ref else None
        path = (folder / parsed.subpath if parsed.subpath else folder) if folder else None
        if path is None or not path.exists():
            continue
        copy_data(path, target)
        if target.is_dir():
            (target / "lineage.json").unlink(missing_ok=True)
        if _version(ws, ref, target) == version:
            return target
        shutil.rmtree(target, ignore_errors=True)
    return None


def _version(ws: Workspace, ref: str, at: Path | None) -> str | None:
    try:
        return ws.version_of(ref, at=at, on_skip=lambda _message: None)
    except (DwsError, OSError):
        return None
