"""dws_dagster: Data Workspaces lineage made native to Dagster and PySpark.

Names are imported on first use, so the command line and scripts that only need the workspace
layer never pay for importing Dagster or Spark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dws_dagster._version import __version__ as __version__

_EXPORTS = {
    "Workspace": "dws_dagster.workspace.definition",
    "Resource": "dws_dagster.workspace.resources",
    "ResourceRef": "dws_dagster.workspace.refs",
    "LineageBuilder": "dws_dagster.lineage_api.builder",
    "Lineage": "dws_dagster.lineage_api.steps",
    "ResultsLineage": "dws_dagster.lineage_api.steps",
    "LineageRecord": "dws_dagster.workspace.records",
    "DwsError": "dws_dagster.errors",
    "ConnectUnsupportedError": "dws_dagster.errors",
    "LineageConsistencyError": "dws_dagster.errors",
    "LineageConflictError": "dws_dagster.errors",
    "InvalidResourceRefError": "dws_dagster.errors",
    "UnknownResourceError": "dws_dagster.errors",
    "UnknownRefStateError": "dws_dagster.errors",
    "SnapshotNotFoundError": "dws_dagster.errors",
    "SnapshotError": "dws_dagster.errors",
    "SnapshotRestoreError": "dws_dagster.errors",
    "RetentionError": "dws_dagster.errors",
    "InvalidParameterError": "dws_dagster.errors",
    "LineageApiError": "dws_dagster.errors",
    "WorkspaceConfigError": "dws_dagster.errors",
    "WorkspaceNotFoundError": "dws_dagster.errors",
    "WorkspaceWriteError": "dws_dagster.errors",
    "StoreUnavailableError": "dws_dagster.errors",
    "StoreLockError": "dws_dagster.errors",
    "NoLineageError": "dws_dagster.errors",
    "SpecialFileWarning": "dws_dagster.workspace.data_files",
    "TransportConfigError": "dws_dagster.errors",
    "OutboxError": "dws_dagster.errors",
    "PartitionRangeError": "dws_dagster.errors",
    "RangeWriteError": "dws_dagster.errors",
    "RowsOutsideRangeError": "dws_dagster.errors",
    "StorageError": "dws_dagster.errors",
    "ReplayEnvironmentError": "dws_dagster.errors",
    "ReplayScratchError": "dws_dagster.errors",
    "SparkWorkspaceIOManager": "dws_dagster.assets.io_manager",
    "OutputTypeError": "dws_dagster.errors",
    "MissingPartitionError": "dws_dagster.errors",
    "SchemaDriftError": "dws_dagster.errors",
    "WorkspaceResource": "dws_dagster.assets.workspace_resource",
    "dws_ref": "dws_dagster.assets.bindings",
    "BindingError": "dws_dagster.errors",
    "check_definitions": "dws_dagster.assets.definitions_check",
    "dws_source_asset": "dws_dagster.assets.source_assets",
    "dws_metrics": "dws_dagster.assets.materialization",
    "lineage_sensor": "dws_dagster.sensor.lineage_sensor",
    "process_events": "dws_dagster.sensor.lineage_sensor",
    "WorkspaceComponent": "dws_dagster.components.workspace_component.component",
    "ComponentConfigError": "dws_dagster.errors",
    "RefBinding": "dws_dagster.assets.binding_config",
    "dws_asset_checks": "dws_dagster.checks.asset_checks",
    "with_dws_checks": "dws_dagster.checks.asset_checks",
    "CheckConfigError": "dws_dagster.errors",
}

#: Literal, for type checkers and readers; tests/test_public_api.py checks it against
#: `_EXPORTS` and the imports below.
__all__ = [
    "BindingError",
    "CheckConfigError",
    "ComponentConfigError",
    "ConnectUnsupportedError",
    "DwsError",
    "InvalidParameterError",
    "InvalidResourceRefError",
    "Lineage",
    "LineageApiError",
    "LineageBuilder",
    "LineageConflictError",
    "LineageConsistencyError",
    "LineageRecord",
    "MissingPartitionError",
    "NoLineageError",
    "OutboxError",
    "OutputTypeError",
    "PartitionRangeError",
    "RangeWriteError",
    "RefBinding",
    "ReplayEnvironmentError",
    "ReplayScratchError",
    "Resource",
    "ResourceRef",
    "ResultsLineage",
    "RetentionError",
    "RowsOutsideRangeError",
    "SchemaDriftError",
    "SnapshotError",
    "SnapshotNotFoundError",
    "SnapshotRestoreError",
    "SparkWorkspaceIOManager",
    "SpecialFileWarning",
    "StorageError",
    "StoreLockError",
    "StoreUnavailableError",
    "TransportConfigError",
    "UnknownRefStateError",
    "UnknownResourceError",
    "Workspace",
    "WorkspaceComponent",
    "WorkspaceConfigError",
    "WorkspaceNotFoundError",
    "WorkspaceResource",
    "WorkspaceWriteError",
    "check_definitions",
    "dws_asset_checks",
    "dws_metrics",
    "dws_ref",
    "dws_source_asset",
    "lineage_sensor",
    "process_events",
    "with_dws_checks",
]

if TYPE_CHECKING:
    from dws_dagster.assets.binding_config import RefBinding
    from dws_dagster.assets.bindings import dws_ref
    from dws_dagster.assets.definitions_check import check_definitions
    from dws_dagster.assets.io_manager import SparkWorkspaceIOManager
    from dws_dagster.assets.materialization import dws_metrics
    from dws_dagster.assets.source_assets import dws_source_asset
    from dws_dagster.assets.workspace_resource import WorkspaceResource
    from dws_dagster.checks.asset_checks import dws_asset_checks, with_dws_checks
    from dws_dagster.components.workspace_component.component import WorkspaceComponent
    from dws_dagster.errors import (
        BindingError,
        CheckConfigError,
        ComponentConfigError,
        ConnectUnsupportedError,
        DwsError,
        InvalidParameterError,
        InvalidResourceRefError,
        LineageApiError,
        LineageConflictError,
        LineageConsistencyError,
        MissingPartitionError,
        NoLineageError,
        OutboxError,
        OutputTypeError,
        PartitionRangeError,
        RangeWriteError,
        ReplayEnvironmentError,
        ReplayScratchError,
        RetentionError,
        RowsOutsideRangeError,
        SchemaDriftError,
        SnapshotError,
        SnapshotNotFoundError,
        SnapshotRestoreError,
        StorageError,
        StoreLockError,
        StoreUnavailableError,
        TransportConfigError,
        UnknownRefStateError,
        UnknownResourceError,
        WorkspaceConfigError,
        WorkspaceNotFoundError,
        WorkspaceWriteError,
    )
    from dws_dagster.lineage_api.builder import LineageBuilder
    from dws_dagster.lineage_api.steps import Lineage, ResultsLineage
    from dws_dagster.sensor.lineage_sensor import lineage_sensor, process_events
    from dws_dagster.workspace.data_files import SpecialFileWarning
    from dws_dagster.workspace.definition import Workspace
    from dws_dagster.workspace.records import LineageRecord
    from dws_dagster.workspace.refs import ResourceRef
    from dws_dagster.workspace.resources import Resource


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dws_dagster' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
