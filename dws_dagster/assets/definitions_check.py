"""Definitions-time checks: every workspace-bound asset names a known resource, and the
one-writer rule (no two assets write the same ref or refs nested in one another) holds before
anything runs."""

from __future__ import annotations

import itertools

from dagster import Definitions

from dws_dagster.assets.io_manager import SparkWorkspaceIOManager
from dws_dagster.errors import LineageConflictError
from dws_dagster.workspace.refs import ResourceRef


def check_definitions(defs: Definitions) -> Definitions:
    """Check `defs` against the workspace and return it unchanged.

    Use as `defs = check_definitions(Definitions(...))` in the code location's module, so a
    conflict stops the code location from loading (shown in the UI and by `dagster dev`) instead
    of surfacing in a run. Raises LineageConflictError naming both assets, or the binding's error
    (unknown resource, invalid ref) naming the asset.

    Examples:
        .. code-block:: python

            from dagster import Definitions, asset
            from pyspark.sql import DataFrame

            from dws_dagster import (
                SparkWorkspaceIOManager,
                WorkspaceResource,
                check_definitions,
                dws_ref,
                dws_source_asset,
            )

            trips = dws_source_asset("trips", "source-data", "trips", format="csv")

            @asset(metadata=dws_ref("intermediate-data", "hourly_actuals"))
            def hourly_actuals(trips: DataFrame) -> DataFrame:
                return trips.groupBy("zone", "hour").count()

            io_manager = SparkWorkspaceIOManager(workspace=WorkspaceResource(root="."))
            defs = check_definitions(  # in the code location's module: a conflict stops it loading
                Definitions(assets=[trips, hourly_actuals], resources={"io_manager": io_manager})
            )

        A second asset bound to `intermediate-data/hourly_actuals`, or to a ref inside it, makes
        `check_definitions` raise `LineageConflictError` naming both assets.
    """
    managers = {
        key: value
        for key, value in (defs.resources or {}).items()
        if isinstance(value, SparkWorkspaceIOManager)
    }
    if not managers:
        return defs
    writers: dict[ResourceRef, str] = {}
    graph = defs.resolve_asset_graph()
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: tuple(k.path)):
        node = graph.get(key)
        manager = managers.get(node.io_manager_key)
        if manager is None:
            continue
        binding = manager.binding_for(node.metadata, key.path)
        if not node.is_materializable:
            continue
        asset = key.to_user_string()
        for other_ref in [binding.ref, *binding.ref.ancestors()]:
            other = writers.get(other_ref)
            if other is not None:
                raise LineageConflictError(_message(asset, binding.ref, other, other_ref))
        writers[binding.ref] = asset
    _check_nested_below(writers)
    return defs


def _check_nested_below(writers: dict[ResourceRef, str]) -> None:
    """Refs registered before a ref that covers them: sorted order puts parents first."""
    ordered = sorted(writers)
    for parent, child in itertools.pairwise(ordered):
        if parent.covers(child) and writers[parent] != writers[child]:
            raise LineageConflictError(_message(writers[child], child, writers[parent], parent))


def _message(asset: str, ref: ResourceRef, other: str, other_ref: ResourceRef) -> str:
    if ref == other_ref:
        clash = f"assets '{other}' and '{asset}' both write ref {ref}"
    else:
        clash = (
            f"asset '{asset}' writes ref {ref}, inside ref {other_ref} written by asset '{other}'"
        )
    return (
        f"{clash}: each asset must own its ref (no two assets write the same or nested "
        "refs); give one of them another dws_ref subpath"
    )
