"""Source data no asset wrote (files dropped into a source-data resource) as observable source
assets: each observation carries the data's content version, so Dagster marks downstream assets
stale when the files change, and the workspace store knows the version they were built from."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MetadataValue,
    ObserveResult,
    SourceAsset,
    observable_source_asset,
)

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.bindings import dws_ref
from dws_dagster.assets.io_manager import SparkWorkspaceIOManager
from dws_dagster.errors import DwsError


def dws_source_asset(
    key: str | Sequence[str],
    resource: str,
    subpath: str | None = None,
    *,
    format: str = "parquet",
    read_options: Mapping[str, Any] | None = None,
    description: str | None = None,
    group_name: str | None = None,
    io_manager_key: str = "io_manager",
    metadata: Mapping[str, Any] | None = None,
) -> SourceAsset:
    """An observable source asset for the workspace ref `resource/subpath`.

    Downstream assets take it as a DataFrame input (read by the IO manager under
    `io_manager_key`); observing it (UI "Observe sources", a schedule, or automation) records
    its content version as the asset's data version and as an observation in the workspace.

    Examples:
        .. code-block:: python

            from dagster import asset
            from pyspark.sql import DataFrame

            from dws_dagster import dws_ref, dws_source_asset

            # files dropped into data/source/trips/ by another system
            trips = dws_source_asset(
                "trips", "source-data", "trips", format="csv", group_name="landing"
            )

            @asset(metadata=dws_ref("intermediate-data", "hourly_actuals"))
            def hourly_actuals(trips: DataFrame) -> DataFrame:  # read by the IO manager
                return trips.groupBy("zone", "hour").count()

        Observing `trips` ("Observe sources" in the UI, a schedule or automation) records the files'
        version: `hourly_actuals` shows stale when they change.
    """
    binding = dws_ref(resource, subpath, format=format, read_options=read_options)
    key_path = [key] if isinstance(key, str) else list(key)

    def observe(context: AssetExecutionContext) -> ObserveResult:
        manager = getattr(context.resources, io_manager_key)
        if not isinstance(manager, SparkWorkspaceIOManager):
            raise DwsError(
                f"source asset '{'/'.join(key_path)}': resource '{io_manager_key}' is a "
                f"{type(manager).__name__}, not a SparkWorkspaceIOManager; pass io_manager_key="
                "the key of your SparkWorkspaceIOManager"
            )
        version, location, observed_at = manager.observe_source(
            binding, key_path, log=context.log.warning
        )
        return ObserveResult(
            data_version=DataVersion(version),
            metadata={
                keys.REF: MetadataValue.text(binding[keys.REF]),
                keys.VERSION: MetadataValue.text(version),
                keys.OBSERVED_AT: MetadataValue.text(observed_at),
                "dagster/uri": MetadataValue.text(location),
            },
        )

    # The observation op is named after the function: one name per source asset.
    observe.__name__ = f"observe_{'__'.join(key_path)}"
    with warnings.catch_warnings():
        # observable_source_asset is marked beta; it is Dagster's one way to version sources.
        warnings.simplefilter("ignore", dagster_compat.beta_warning())
        return observable_source_asset(
            key=key_path,
            metadata={**binding, **(metadata or {})},
            io_manager_key=io_manager_key,
            description=description or f"Source data at workspace ref {binding[keys.REF]}.",
            group_name=group_name,
            required_resource_keys={io_manager_key},
        )(observe)
