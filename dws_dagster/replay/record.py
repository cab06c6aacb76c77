"""What a replay found, kept in the workspace it replayed (`.dataworkspace/replays/`), so that the
lineage page of the snapshot can draw each ref's verdict after the replay's own output is gone.

One JSON file per replay, named like the replay's default scratch folder, beside it; the same
document `dws-dagster replay --format json` prints. These files are read back as untrusted
input: checked against `formats.ReplayFile` before anything of them is shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dws_dagster.workspace import formats
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.files import atomic_write_json, read_json_file

if TYPE_CHECKING:
    from dws_dagster.replay.run import ReplayReport

#: Under `.dataworkspace/`: replays' scratch folders and their records.
REPLAYS_DIR = "replays"
_FORMAT = 1
_ADVICE = "delete that file (it only records a past replay) or replay the snapshot again"


def report_json(
    report: ReplayReport, *, replayed_at: str, in_place: bool = False
) -> dict[str, Any]:
    """The replay's verdicts as one JSON document (what is printed and what is kept)."""
    return {
        "format": _FORMAT,
        "snapshot": report.plan.snapshot.hash,
        "snapshot_name": report.plan.snapshot.name,
        "tags": report.plan.snapshot.tags,
        "replayed_at": replayed_at,
        "into": str(report.scratch),
        "in_place": in_place,
        "reproduced": report.reproduced,
        "refs": [
            {
                "ref": v.ref,
                "step": v.step,
                "verdict": v.outcome,
                "recorded": v.recorded,
                "reproduced": v.reproduced,
                "detail": v.detail,
                "columns": None if v.columns is None else list(v.columns),
            }
            for v in report.verdicts
        ],
    }


def replays_dir(ws: Workspace) -> Path:
    return ws.meta_dir / REPLAYS_DIR


def save_replay(ws: Workspace, document: dict[str, Any], name: str) -> Path:
    """Keep `document` (from `report_json`) as `replays/<name>.json` of `ws`."""
    path = replays_dir(ws) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, document)
    return path


def kept_replays(ws: Workspace) -> Iterator[dict[str, Any]]:
    """Every kept replay of `ws`, checked, in file-name order. A damaged record is a
    `WorkspaceConfigError` naming the file."""
    folder = replays_dir(ws)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        if not path.is_file() or path.is_symlink():
            continue
        raw = read_json_file(path, what="replay record", advice=_ADVICE)
        checked = formats.check(formats.REPLAY, raw, path, advice=_ADVICE, what="replay record")
        yield {**checked}


def latest_replay(ws: Workspace, snapshot_hash: str) -> dict[str, Any] | None:
    """The newest kept replay of snapshot `snapshot_hash`, checked; None if it was never
    replayed. A damaged record is a `WorkspaceConfigError` naming the file."""
    newest: dict[str, Any] | None = None
    for document in kept_replays(ws):
        if document["snapshot"] != snapshot_hash:
            continue
        if newest is None or document["replayed_at"] > newest["replayed_at"]:
            newest = document
    return newest


def latest_verdict(ws: Workspace, ref: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the replay, its verdict of `ref`) of the newest kept replay, of any snapshot, that
    replayed `ref`; None if none did."""
    newest: tuple[dict[str, Any], dict[str, Any]] | None = None
    for document in kept_replays(ws):
        for verdict in document["refs"]:
            if verdict["ref"] == ref and (
                newest is None or document["replayed_at"] > newest[0]["replayed_at"]
            ):
                newest = (document, verdict)
    return newest
