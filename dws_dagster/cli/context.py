"""What a command works on: the workspace the command line names, and remote data.

One place decides which workspace `--workspace` (or the current folder) means, so every
command refuses a wrong folder the same way. Remote data goes through Spark's Hadoop
filesystems, started only when a remote ref needs it: this module imports no pyspark, so
commands over local data start no JVM.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dws_dagster.errors import WorkspaceNotFoundError
from dws_dagster.workspace.definition import WORKSPACE_DIR, Workspace
from dws_dagster.workspace.remote_versions import LazyRemoteData, RemoteData


def open_workspace(args: argparse.Namespace) -> Workspace:
    """The workspace `--workspace DIR` names (DIR must be its root: the flag names THE
    workspace, so a wrong DIR is never silently replaced by one enclosing it), else the
    nearest one at or above the current folder."""
    if args.workspace is None:
        return Workspace.open()
    root = Path(args.workspace).absolute()
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise WorkspaceNotFoundError(
            f"--workspace {root} {what}: pass the root folder of a workspace (the one holding "
            f"{WORKSPACE_DIR}/), or create one with 'dws-dagster init {root}'"
        )
    try:
        return Workspace.open(root, search_parents=False)
    except WorkspaceNotFoundError:
        try:
            enclosing: Path | None = Workspace.find_root(root.parent)
        except WorkspaceNotFoundError:
            enclosing = None
        hint = (
            f"; it is inside the workspace at {enclosing}: pass --workspace {enclosing}"
            if enclosing is not None
            else f"; create one with 'dws-dagster init {root}'"
        )
        raise WorkspaceNotFoundError(
            f"--workspace {root} is not a workspace (no {WORKSPACE_DIR}/config.json){hint}"
        ) from None


def remote_data() -> LazyRemoteData:
    """Remote data through Spark's Hadoop filesystems, started only if a remote ref needs it
    (this module imports no pyspark: commands over local data start no JVM)."""

    def hadoop() -> RemoteData:
        from dws_dagster.spark.remote_data import hadoop_data

        return hadoop_data()

    return LazyRemoteData(hadoop)
