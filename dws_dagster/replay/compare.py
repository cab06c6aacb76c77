"""Naming the columns in which a replayed ref differs from what the snapshot recorded.

A version says only that two datasets differ. To say where, the recorded data is found where
restore finds it (the workspace's own data when it still holds that version, else restore's
`kept_copies`, staged and checked to have the recorded version by its `stage_copy`), and
handed with the replay's data to a `ColumnComparer` (the Spark layer gives one). When the
recorded data is gone, or the data is not in a format Spark reads, the verdict says so instead
of naming columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dws_dagster.errors import DwsError
from dws_dagster.replay.run import (
    DIFFERS,
    NON_DETERMINISTIC,
    RefVerdict,
    ReplayReport,
)
from dws_dagster.snapshots.index import SnapshotInfo
from dws_dagster.snapshots.objects import ObjectStore
from dws_dagster.snapshots.restore_plan import kept_copies, remove_path, stage_copy
from dws_dagster.workspace.data_files import iter_data_files
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.refs import as_ref

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
    try:
        recorded = recorded_data(ws, info, verdict.ref, verdict.recorded, scratch.meta_dir)
        if recorded is None:
            return _noted(
                verdict,
                "its columns were not compared: the recorded data is no longer kept (freed by gc)",
            )
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
    # Spark's own rule for what is data (no `_`/`.` names, no `.crc`), walked without
    # recursion: data may be nested deeper than Python's recursion limit.
    files = [path] if path.is_file() else [p for _rel, p in iter_data_files(path)]
    suffixes = {p.suffix.lstrip(".").lower() for p in files}
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
    remove_path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    objects = ObjectStore.of_workspace(ws.meta_dir)
    sources = kept_copies(ws, info, ref, version, objects)
    staged = stage_copy(ws, ref, version, sources, objects, target, lambda: target)
    return None if staged is None else staged[0]


def _version(ws: Workspace, ref: str, at: Path | None) -> str | None:
    try:
        return ws.version_of(ref, at=at, on_skip=lambda _message: None)
    except (DwsError, OSError):
        return None
