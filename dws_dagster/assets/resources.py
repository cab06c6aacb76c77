"""The workspace as a Dagster resource."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field, PrivateAttr

from dws_dagster.workspace.snapshots.replay_env import replay_workspace
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
        replay names it in the environment (`DWS_REPLAY_WORKSPACE`), and the runs start in
        it, so `root="."` finds it by itself and an absolute root naming the workspace
        replayed is given it in its place; any other workspace is refused, so a replay never
        writes elsewhere (`replay_env.replay_workspace`)."""
        if self._workspace is None:
            configured = Workspace.open(self.root, search_parents=self.search_parents)
            self._workspace = replay_workspace(
                configured, f"the code location's WorkspaceResource(root={self.root!r})"
            )
        return self._workspace
