"""The workspace as a Dagster resource."""

from __future__ import annotations

import os

from dagster import ConfigurableResource
from pydantic import Field, PrivateAttr

from dws_dagster.replay.env import replay_workspace
from dws_dagster.workspace.definition import Workspace


class WorkspaceResource(ConfigurableResource):
    """The Data Workspace that assets read and write (a folder holding `.dataworkspace/`).

    Relative roots are resolved from the process's working directory, upwards, the way
    `dws-dagster` finds a workspace, so one definition works for `dagster dev` and the CLI.

    Examples:
        .. code-block:: python

            from dagster import AssetExecutionContext, Definitions, asset

            from dws_dagster import WorkspaceResource

            @asset
            def report(context: AssetExecutionContext, workspace: WorkspaceResource) -> None:
                ws = workspace.workspace()  # the opened Workspace
                state = ws.store.get("results/forecast")
                context.log.info(f"forecast version: {state.version if state else 'none yet'}")

            defs = Definitions(
                assets=[report],
                resources={
                    # the store's URL, password included, is in $LINEAGE_DB_URL where the code runs
                    "workspace": WorkspaceResource(root=".", store_url_env="LINEAGE_DB_URL"),
                },
            )
    """

    root: str = Field(default=".", description="Workspace folder, or a folder inside it.")
    search_parents: bool = Field(
        default=True, description="Look for `.dataworkspace/` in the parent folders of root."
    )
    store_url_env: str | None = Field(
        default=None,
        description="Name of an environment variable holding the lineage store's URL, password "
        "included, read where the code runs (the variable's name is configuration, its value "
        "never is). Unset or empty there: the workspace's own store ($DWS_STORE_URL, "
        "config.json, else SQLite in .dataworkspace/).",
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
            url = os.environ.get(self.store_url_env) if self.store_url_env else None
            if url:
                configured.use_store_url(url, origin=f"${self.store_url_env}")
            # A replay's scratch workspace keeps its own store, whatever this one names.
            self._workspace = replay_workspace(
                configured, f"the code location's WorkspaceResource(root={self.root!r})"
            )
        return self._workspace
