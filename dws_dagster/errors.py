"""One error hierarchy, so callers can catch everything dws_dagster refuses with one clause.

Every message names the ref, asset, step or file concerned and says what to do about it.
"""

from __future__ import annotations


class DwsError(Exception):
    """Base class of every error dws_dagster raises on purpose."""


class InvalidResourceRefError(DwsError, ValueError):
    """A resource name or subpath is malformed or would escape its resource."""


class UnknownResourceError(DwsError, KeyError):
    """A ref or path names a resource the workspace does not define."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class WorkspaceNotFoundError(DwsError):
    """No `.dataworkspace/` folder where one was expected."""


class WorkspaceConfigError(DwsError):
    """A file under `.dataworkspace/` is missing, corrupt, or of an unknown format."""


class LineageConsistencyError(DwsError):
    """A step would read two versions of one ref (directly or transitively)."""


class LineageConflictError(DwsError):
    """Two independent steps would write the same ref, or nested refs."""


class UnknownRefStateError(DwsError):
    """A ref's data may be partial after a failed step; it must be rewritten before it is read."""


class LineageApiError(DwsError):
    """The script lineage API was used out of order or with missing settings."""


class InvalidParameterError(DwsError, ValueError):
    """A step parameter cannot be recorded (not JSON-serialisable, or too large)."""


class SnapshotNotFoundError(DwsError, LookupError):
    """No snapshot matches the tag, hash or hash prefix given (or a prefix is ambiguous)."""


class RemoteDataError(DwsError):
    """The workspace layer cannot read data in a remote (object-store) resource."""


class SnapshotError(DwsError):
    """A snapshot cannot be taken, restored or deleted as asked."""


class ConnectUnsupportedError(DwsError):
    """A feature that needs the Spark driver's JVM in this process was asked of a Spark
    Connect session (no JVM on the client): the message names the feature and what works
    instead (docs/spark-connect.md)."""


class SnapshotRestoreError(SnapshotError):
    """A restore would leave some ref's data disagreeing with its restored lineage."""


class RetentionError(SnapshotError):
    """Data could not be retained for a snapshot, or brought back from retention."""
