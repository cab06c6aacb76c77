"""One error hierarchy, so callers can catch everything dws_dagster refuses with one clause.

Every message names the ref, asset, step or file concerned and says what to do about it.
"""

from __future__ import annotations


class DwsError(Exception):
    """Base class of every error dws_dagster raises on purpose.

    Examples:
        .. code-block:: python

            from dws_dagster import DwsError
            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("clean")
                .with_parameters({})
                .with_input_ref("source-data/trips")
                .with_output_ref("intermediate-data/clean")
            )
            try:
                with builder.eval():
                    pass  # the step's work
            except DwsError as exc:  # whatever dws_dagster refused
                print(f"refused: {exc}")  # names the ref, asset or file, and what to do
    """


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


class ConnectUnsupportedError(DwsError):
    """A feature that needs the Spark driver's JVM in this process was asked of a Spark
    Connect session (no JVM on the client): the message names the feature and what works
    instead (docs/spark-connect.md).

    Examples:
        A resource on a Hadoop filesystem needs a classic session; on Spark Connect a step writing
        it fails before anything is written:

        .. code-block:: python

            from dagster_pyspark import PySparkResource

            from dws_dagster import SparkWorkspaceIOManager, Workspace, WorkspaceResource

            Workspace.open().add_resource("lake", "intermediate-data", uri="s3a://bucket/lake")
            pyspark = PySparkResource(spark_config={"spark.remote": "sc://spark-connect:15002"})
            workspace = WorkspaceResource(root=".")
            io_manager = SparkWorkspaceIOManager(workspace=workspace, pyspark=pyspark)
            # An asset bound to dws_ref("lake", ...) now fails with ConnectUnsupportedError:
            # use a classic session with the filesystem's Hadoop settings for that resource.
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
