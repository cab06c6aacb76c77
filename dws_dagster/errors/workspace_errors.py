"""Refusals of the workspace's own layers: the model, the lineage store, snapshots, replay
and the views (no Dagster, no Spark needed to meet them)."""

from __future__ import annotations

from dws_dagster.errors.base import DwsError


class InvalidResourceRefError(DwsError, ValueError):
    """A resource name or subpath is malformed or would escape its resource.

    Examples:
        .. code-block:: python

            from dws_dagster import InvalidResourceRefError, ResourceRef

            try:
                ResourceRef("intermediate-data", "../secrets")
            except InvalidResourceRefError as exc:  # also a ValueError
                print(exc)  # ... contains '..': a ref may not leave its resource; ...
    """


class UnknownResourceError(DwsError, KeyError):
    """A ref or path names a resource the workspace does not define.

    Examples:
        .. code-block:: python

            from dws_dagster import UnknownResourceError, Workspace

            ws = Workspace.open()
            try:
                ws.check_ref("nowhere/trips")
            except UnknownResourceError as exc:  # also a KeyError
                print(exc)  # unknown resource 'nowhere' in workspace ... (known: ...); add it ...
    """

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class WorkspaceNotFoundError(DwsError):
    """No `.dataworkspace/` folder where one was expected.

    Examples:
        .. code-block:: python

            from dws_dagster import Workspace, WorkspaceNotFoundError

            try:
                ws = Workspace.open()  # the nearest workspace at or above the current folder
            except WorkspaceNotFoundError:
                ws = Workspace.init(".")  # none: make this folder one
    """


class WorkspaceConfigError(DwsError):
    """A file under `.dataworkspace/` is missing, corrupt, or of an unknown format.

    Examples:
        .. code-block:: python

            from dws_dagster import Workspace, WorkspaceConfigError

            ws = Workspace.open()
            try:
                ws.add_resource("intermediate-data", "intermediate-data", path="data/other")
            except WorkspaceConfigError as exc:
                print(exc)  # resource 'intermediate-data' already exists in workspace ...
    """


class LineageConsistencyError(DwsError):
    """A step would read two versions of one ref (directly or transitively).

    Examples:
        `features` read `intermediate-data/prep` before `prep` ran again, so a step reading both
        would mix two versions of `prep`:

        .. code-block:: python

            from dws_dagster import LineageConsistencyError
            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("train")
                .with_parameters({})
                .with_input_refs(["intermediate-data/prep", "intermediate-data/features"])
            )
            try:
                builder.eval()  # refused before the step's work
            except LineageConsistencyError as exc:
                print(exc)  # ... re-run, in this order, 'features' ..., then re-run 'train'
    """


class LineageConflictError(DwsError):
    """Two independent steps would write the same ref, or nested refs.

    Examples:
        .. code-block:: python

            from dws_dagster import LineageConflictError
            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("clean_v2")
                .with_parameters({})
                .with_no_inputs()
                .with_output_ref("intermediate-data/clean")  # step 'clean' writes it
            )
            try:
                builder.eval()
            except LineageConflictError as exc:
                print(exc)  # ... give this output its own subpath, or hand the ref over with ...

        In Dagster, `check_definitions` refuses two assets bound to one ref when the code location
        loads.
    """


class UnknownRefStateError(DwsError):
    """A ref's data may be partial after a failed step; it must be rewritten before it is read.

    Examples:
        `prep` failed after writing part of `intermediate-data/prep`, so its data is `unknown`:

        .. code-block:: python

            from dws_dagster import UnknownRefStateError
            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("features")
                .with_parameters({})
                .with_input_ref("intermediate-data/prep")
            )
            try:
                builder.eval()
            except UnknownRefStateError as exc:
                print(exc)  # ... re-run 'prep' to rewrite intermediate-data/prep, then ...
    """


class LineageApiError(DwsError):
    """The script lineage API was used out of order or with missing settings.

    Examples:
        .. code-block:: python

            from dws_dagster import LineageApiError
            from dws_dagster.lineage import LineageBuilder

            try:
                LineageBuilder().with_step_name("clean").with_no_inputs().eval()
            except LineageApiError as exc:
                print(exc)  # LineageBuilder needs parameters (with_parameters()) before eval()
    """


class InvalidParameterError(DwsError, ValueError):
    """A step parameter cannot be recorded (not JSON-serialisable, or too large).

    Examples:
        .. code-block:: python

            from dws_dagster import InvalidParameterError
            from dws_dagster.lineage import LineageBuilder

            model = object()
            builder = LineageBuilder().with_step_name("train").with_no_inputs()
            try:
                builder.with_parameters({"model": model}).eval()
            except InvalidParameterError as exc:  # also a ValueError
                print(exc)  # parameter 'model' is a builtins.object, which cannot be recorded ...
    """


class SnapshotNotFoundError(DwsError, LookupError):
    """No snapshot matches the tag, hash or hash prefix given (or a prefix is ambiguous).

    Examples:
        Met through the command line, which prints its message and exits 1:

        .. code-block:: console

            $ dws-dagster restore v9
            error: no snapshot is tagged 'v9' or has a hash starting with it (recent: ...); see ...
    """


class RemoteDataError(DwsError):
    """The workspace layer cannot read data in a remote (object-store) resource."""


class SnapshotError(DwsError):
    """A snapshot cannot be taken, restored or deleted as asked.

    Examples:
        Met through the command line, which prints its message and exits 1:

        .. code-block:: console

            $ dws-dagster snapshot v1
            error: tag 'v1' already names snapshot 4e7511a5d5a9; choose another tag, or delete ...

        The lineage sensor's `snapshot_on_results` reports one as a skipped snapshot on its tick.
    """


class SnapshotRestoreError(SnapshotError):
    """A restore would leave some ref's data disagreeing with its restored lineage.

    Examples:
        Met through the command line, which prints its message, changes nothing and exits 1:

        .. code-block:: console

            $ dws-dagster restore v1
            error: cannot restore snapshot v1 (4e7511a5d5a9): the data of 1 ref(s) cannot be ...
            $ dws-dagster restore v1 --partial  # restore the rest; those refs become unknown
    """


class RetentionError(SnapshotError):
    """Data could not be retained for a snapshot, or brought back from retention.

    Examples:
        Met through the command line, which prints its message and exits 1:

        .. code-block:: console

            $ dws-dagster snapshot v2
            error: .../part-0.parquet changed while it was being retained (...); nothing was ...
            $ dws-dagster snapshot v2  # again, once nothing writes there
    """


class ReplayEnvironmentError(DwsError):
    """A step run by a replay opened a workspace that is neither the replayed one nor its
    replay, or the environment names a folder that is not a replay's scratch workspace.

    Examples:
        A step that `dws-dagster replay` runs may write only the replay's scratch workspace
        (named in its environment, `DWS_REPLAY_WORKSPACE`) or the workspace replayed (given
        the scratch one in its place):

        .. code-block:: python

            from dws_dagster import ReplayEnvironmentError
            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("train")
                .with_parameters({})
                .with_no_inputs()
                .with_workspace_directory("../another-workspace")
            )
            try:
                builder.eval()
            except ReplayEnvironmentError as exc:
                print(exc)  # ... a replay writes only into its scratch workspace. Open the ...
    """


class ReplayNotLandedError(SnapshotRestoreError):
    """A replay in place did not reproduce every ref: the workspace was left as it was."""


class ReplayScratchError(SnapshotError):
    """The scratch workspace for a replay cannot be made where it was asked for.

    Examples:
        Met through the command line, which prints its message and exits 1:

        .. code-block:: console

            $ dws-dagster replay v1 --into ~/scratch  # a folder that holds files
            error: --into .../scratch is not an empty folder: replay into a new folder (it is ...
            $ dws-dagster replay v1 --into ~/scratch/replay-v1  # created
    """


class StoreUnavailableError(DwsError):
    """The workspace store's database cannot be reached or read (it names the store, never its
    password).

    Examples:
        .. code-block:: python

            from dws_dagster import StoreUnavailableError, Workspace

            try:  # DWS_STORE_URL=postgresql://dws@db.internal:5432/lineage, a server that is down
                Workspace.open().store.get("intermediate-data/hourly_actuals")
            except StoreUnavailableError as exc:
                print(exc)  # workspace store postgresql://dws@db.internal:5432/lineage: ...
    """


class StoreLockError(DwsError):
    """The workspace store's write lock could not be taken in time.

    Examples:
        .. code-block:: python

            from dws_dagster import StoreLockError
            from dws_dagster.lineage import LineageBuilder

            builder = LineageBuilder().with_step_name("clean").with_parameters({}).with_no_inputs()
            try:
                lineage = builder.eval()  # the step's claims, under the store's write lock
            except StoreLockError as exc:
                print(exc)  # ... another process holds it (a long snapshot or restore?); wait ...
    """


class NoLineageError(DwsError, LookupError):
    """A ref has no recorded lineage to show.

    Examples:
        Met through the command line, which prints its message and exits 1:

        .. code-block:: console

            $ dws-dagster lineage intermediate-data/hourly_actual
            error: ref intermediate-data/hourly_actual has no lineage: no step has written ...
            $ dws-dagster status  # the refs that have lineage
    """


class PageAssetError(DwsError):
    """A file the page inlines is missing from the installation, or could end the element
    it is inlined in (a packaging fault)."""


class WorkspaceWriteError(DwsError, OSError):
    """A file cannot be written (read-only or full disk, no permission, a file where a folder
    should be). Also an OSError with the cause's errno, so code that sorts disk faults by
    errno (the Spark storage layer) still can.

    Examples:
        .. code-block:: python

            import errno
            from pathlib import Path

            from dws_dagster import Workspace, WorkspaceWriteError

            Path("notes.txt").write_text("a file, not a folder")
            try:
                Workspace.init("notes.txt/forecast")
            except WorkspaceWriteError as exc:  # a DwsError, and an OSError with the cause's errno
                print(exc)  # names the file and what to do (on a full disk: the free space)
                disk_full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SwapError(DwsError):
    """Data could not be put in place; the previous data is still there."""


class DataNotFoundError(DwsError, FileNotFoundError):
    """A ref names data that does not exist, so it has no version."""


class DataReadError(DwsError, OSError):
    """A data file cannot be read (no permission, an I/O error), so the data has no version."""
