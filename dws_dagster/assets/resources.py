"""The workspace as a Dagster resource."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field, PrivateAttr

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace.snapshots.replay_run import REPLAY_WORKSPACE_ENV
from dws_dagster.workspace.workspace import Workspace


class WorkspaceResource(ConfigurableResource):
    """The Data Workspace that assets read and write (a folder holding `.dataworkspace/`).

    Relative roots are resolved from the process's working directory, upwards, the way
    `dws-dagster` finds a workspace, so one definition works for `dagster dev` and the CLI.
    """

    root: str = Field(default=".", description="Workspace folder, or a folder inside it.")
    search_parents: bool = Field(
        default=True, description="Look for `.dataworkspace/` in the parent folders of root."
    )

    _workspace: Workspace | None = PrivateAttr(default=None)

    def workspace(self) -> Workspace:
        """The opened workspace (resources reloaded at most once per resource instance).

        In a run `dws-dagster replay` launches, the replay's scratch workspace instead: the
        replay names it in the environment (`DWS_REPLAY_WORKSPACE`), and it is used only if it
        is a replay of this resource's workspace, so a stray variable cannot redirect writes."""
        if self._workspace is None:
            configured = Workspace.open(self.root, search_parents=self.search_parents)
            scratch = os.environ.get(REPLAY_WORKSPACE_ENV)
            self._workspace = configured if not scratch else _replay_of(configured, scratch)
        return self._workspace


def _replay_of(configured: Workspace, scratch: str) -> Workspace:
    replay = Workspace.open(scratch, search_parents=False)
    of = replay.replay_of
    if of is None or Path(of["root"]).resolve() != configured.root.resolve():
        raise WorkspaceConfigError(
            f"{REPLAY_WORKSPACE_ENV} names {replay.root}, which is not a replay of the "
            f"workspace at {configured.root}: unset the variable (dws-dagster replay sets it "
            "for the runs it launches)"
        )
    return replay
