"""Replaying in place: making a snapshot current again with the data its replay reproduced.

Steps are never run over the live workspace: a step that fails halfway, or writes something
else than it wrote, would leave it half replayed. The replay runs in its scratch workspace
as always; only when every ref it was asked for reproduced exactly does its data land, through
`restore`, as the first source of those refs. Restore then applies its own all-or-nothing
checks to the whole snapshot (every ref's data checked and staged before anything is touched;
refused, nothing changed, when some ref cannot be brought back), and keeps what it replaces as
versions, so landing a replay can be undone like any restore.
"""

from __future__ import annotations

from dws_dagster.errors import ReplayNotLandedError
from dws_dagster.replay.run import REPRODUCED, ReplayReport
from dws_dagster.snapshots.restore import restore_snapshot
from dws_dagster.snapshots.restore_plan import RestoreReport
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.remote_versions import RemoteData


def land_replay(
    ws: Workspace, report: ReplayReport, scratch: Workspace, remote: RemoteData | None = None
) -> RestoreReport:
    """Restore `report`'s snapshot in `ws` with the replay's reproduced data as the first
    source of every replayed ref; `ReplayNotLandedError` (nothing changed) unless every ref
    reproduced exactly, `SnapshotRestoreError` (nothing changed) when restore refuses."""
    snapshot = report.plan.snapshot
    if not report.reproduced:
        missed = [v.ref for v in report.verdicts if v.outcome != REPRODUCED]
        shown = ", ".join(missed[:5]) + (f" and {len(missed) - 5} more" if len(missed) > 5 else "")
        raise ReplayNotLandedError(
            f"not replayed in place: {len(missed)} ref(s) of snapshot {snapshot.name} did not "
            f"reproduce exactly ({shown}); the workspace was not changed. The replay is in "
            f"{report.scratch}; 'dws-dagster restore {snapshot.name}' brings back the "
            "snapshot's own copies instead"
        )
    replayed = {v.ref: scratch.local_path(as_ref(v.ref)) for v in report.verdicts}
    return restore_snapshot(ws, snapshot.hash, remote=remote, replayed=replayed)
