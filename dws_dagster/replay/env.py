"""What a process that `dws-dagster replay` started knows of the replay: the scratch workspace
it is to write (`DWS_REPLAY_WORKSPACE`), whose `config.json` names the workspace it replays.

A replayed step may find its workspace by itself: a `--workspace $PWD` argument, a path worked
out from its own file, `WorkspaceResource(root=".")` resolved from the folder it runs in. Each
of these can name the replayed workspace itself, which a replay must never write: whatever a
step opens, `replay_workspace` gives the scratch workspace in its place, and `in_scratch` maps
a path into the replayed workspace to the same path in the scratch one. A workspace that is
neither is refused: a replay writes nowhere else.
"""

from __future__ import annotations

import os
from pathlib import Path

from dws_dagster.errors import ReplayEnvironmentError
from dws_dagster.workspace.definition import Workspace

#: Set in the environment of the steps a replay runs (scripts and the Dagster worker): the
#: scratch workspace, opened in place of the workspace it replays.
REPLAY_WORKSPACE_ENV = "DWS_REPLAY_WORKSPACE"


def replay_scratch() -> Workspace | None:
    """The scratch workspace this process replays into; None outside a replay."""
    named = os.environ.get(REPLAY_WORKSPACE_ENV)
    if not named:
        return None
    scratch = Workspace.open(named, search_parents=False)
    if scratch.replay_of is None:
        raise ReplayEnvironmentError(
            f"{REPLAY_WORKSPACE_ENV} names {scratch.root}, which is not a replay's scratch "
            "workspace: the variable is set by 'dws-dagster replay' for the steps it runs; "
            "unset it in this shell"
        )
    return scratch


def replay_workspace(opened: Workspace, what: str) -> Workspace:
    """The workspace `what` (the step or resource opening it) is to use: `opened`, except in
    a replay, where the replayed workspace is never written and its scratch workspace is
    given instead."""
    scratch = replay_scratch()
    if scratch is None:
        return opened
    assert scratch.replay_of is not None
    here = opened.root.resolve()
    if here == scratch.root.resolve():
        return opened
    if here == Path(scratch.replay_of["root"]).resolve():
        return scratch
    raise ReplayEnvironmentError(
        f"{what} opened the workspace at {opened.root} while replaying the one at "
        f"{scratch.replay_of['root']} into {scratch.root}: a replay writes only into its "
        "scratch workspace. Open the workspace the step belongs to (its own folder, as "
        "WorkspaceResource(root='.') or the lineage API's default find it), not another one"
    )


def in_scratch(path: Path, scratch: Workspace) -> Path:
    """`path` inside the workspace `scratch` replays (or the repository holding it) as the
    same path in `scratch` (or its clone); any other path as it is."""
    of = scratch.replay_of or {}
    pairs = [(Path(of["root"]), scratch.root)] if "root" in of else []
    clone = of.get("clone")
    if clone is not None and pairs and scratch.root.is_relative_to(clone):
        # (config.json is untrusted: a clone that does not hold the workspace maps nothing)
        inside = scratch.root.relative_to(clone).parts
        repository = Path(of["root"])
        for _ in inside:
            repository = repository.parent
        pairs.append((repository, Path(clone)))
    for original, replica in pairs:
        for form in (path, _resolved(path)):
            for base in (original, _resolved(original)):
                if form.is_absolute() and form.is_relative_to(base):
                    return replica / form.relative_to(base)
    return path


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path
