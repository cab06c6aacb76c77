"""One error hierarchy, so callers can catch everything dws_dagster refuses with one clause,
declared in one package so a reader finds every refusal here, grouped by the side that raises
it: `base` (`DwsError`), `workspace_errors` (the model, store, snapshots, replay, views),
`spark_errors`, `dagster_errors`, `openlineage_errors`. Import them from here.

Every message names the ref, asset, step or file concerned and says what to do about it;
docs/errors.md lists them with the situations that raise them.

Import rule: the standard library only (type hints aside): every layer raises these.
"""

from __future__ import annotations

from dws_dagster.errors.base import (
    DwsError,
)
from dws_dagster.errors.dagster_errors import (
    BindingError,
    CheckConfigError,
    ComponentConfigError,
    DagsterCompatibilityError,
    DemoError,
    MissingPartitionError,
    OutputTypeError,
    PartitionRangeError,
    ReplayOutsideScratchError,
    SchemaDriftError,
    SensorConfigError,
)
from dws_dagster.errors.openlineage_errors import (
    EventBuildError,
    InvalidLocationError,
    OutboxError,
    TransportConfigError,
)
from dws_dagster.errors.spark_errors import (
    ConnectUnsupportedError,
    RangeWriteError,
    RowsOutsideRangeError,
    StorageError,
)
from dws_dagster.errors.workspace_errors import (
    DataNotFoundError,
    DataReadError,
    InvalidParameterError,
    InvalidResourceRefError,
    LineageApiError,
    LineageConflictError,
    LineageConsistencyError,
    NoLineageError,
    PageAssetError,
    RemoteDataError,
    ReplayEnvironmentError,
    ReplayNotLandedError,
    ReplayScratchError,
    RetentionError,
    SnapshotError,
    SnapshotNotFoundError,
    SnapshotRestoreError,
    StoreLockError,
    StoreUnavailableError,
    SwapError,
    UnknownRefStateError,
    UnknownResourceError,
    WorkspaceConfigError,
    WorkspaceNotFoundError,
    WorkspaceWriteError,
)

__all__ = [
    "BindingError",
    "CheckConfigError",
    "ComponentConfigError",
    "ConnectUnsupportedError",
    "DagsterCompatibilityError",
    "DataNotFoundError",
    "DataReadError",
    "DemoError",
    "DwsError",
    "EventBuildError",
    "InvalidLocationError",
    "InvalidParameterError",
    "InvalidResourceRefError",
    "LineageApiError",
    "LineageConflictError",
    "LineageConsistencyError",
    "MissingPartitionError",
    "NoLineageError",
    "OutboxError",
    "OutputTypeError",
    "PageAssetError",
    "PartitionRangeError",
    "RangeWriteError",
    "RemoteDataError",
    "ReplayEnvironmentError",
    "ReplayNotLandedError",
    "ReplayOutsideScratchError",
    "ReplayScratchError",
    "RetentionError",
    "RowsOutsideRangeError",
    "SchemaDriftError",
    "SensorConfigError",
    "SnapshotError",
    "SnapshotNotFoundError",
    "SnapshotRestoreError",
    "StorageError",
    "StoreLockError",
    "StoreUnavailableError",
    "SwapError",
    "TransportConfigError",
    "UnknownRefStateError",
    "UnknownResourceError",
    "WorkspaceConfigError",
    "WorkspaceNotFoundError",
    "WorkspaceWriteError",
]
