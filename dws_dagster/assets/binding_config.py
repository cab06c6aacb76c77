"""Bindings given as configuration rather than as asset metadata: an asset key and the ref it
lives at, as `dws_ref` takes them. The `WorkspaceComponent` binds assets defined elsewhere in a
project this way (from its `defs.yaml`), handing the same list to the IO manager, which stores
the assets, to the lineage sensor, which records them, and to the dws asset checks.

An asset is bound once: by `dws_ref` metadata or by configuration, never both (two places
that could disagree about where its data lives).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dagster import Config
from pydantic import Field

from dws_dagster import metadata_keys as keys
from dws_dagster.assets.bindings import dws_ref
from dws_dagster.errors import BindingError
from dws_dagster.workspace.refs import ResourceRef


class RefBinding(Config):
    """An asset bound to a workspace ref by configuration (`dws_ref` fields).

    Examples:
        Assets defined elsewhere (without `dws_ref` metadata), bound by configuration:

        .. code-block:: python

            from dws_dagster import (
                RefBinding,
                SparkWorkspaceIOManager,
                WorkspaceResource,
                dws_asset_checks,
                lineage_sensor,
            )

            bindings = [
                RefBinding(asset="hourly_actuals", ref="intermediate-data/hourly_actuals"),
                RefBinding(
                    asset="daily_trips",
                    ref="intermediate-data/daily_trips",
                    partition_template="{start:%Y/%m/%d}",
                ),
            ]
            workspace = WorkspaceResource(root=".")
            io_manager = SparkWorkspaceIOManager(workspace=workspace, bindings=bindings)
            sensor = lineage_sensor(bindings=bindings)  # records them where they are stored
            checks = dws_asset_checks(["hourly_actuals"], bindings=bindings)
    """

    asset: str = Field(description="The asset's key, as 'a/b' (its user string).")
    ref: str = Field(description="The workspace ref: 'resource/subpath'.")
    format: str = Field(default="parquet", description="parquet, csv, json or orc.")
    partition_template: str | None = Field(
        default=None, description="Where each partition lives below the ref."
    )
    partition_by: list[str] = Field(default=[], description="Columns Spark partitions by.")
    write_options: dict[str, str] = Field(default={}, description="Spark writer options.")
    read_options: dict[str, str] = Field(default={}, description="Spark reader options.")
    versioning: str | None = Field(default=None, description="'rows' or 'files'.")

    def metadata(self) -> dict[str, Any]:
        """The asset metadata `dws_ref` would give (checked as it checks it)."""
        ref = ResourceRef.parse(self.ref)
        return dws_ref(
            ref.name,
            ref.subpath,
            format=self.format,
            write_options=self.write_options,
            read_options=self.read_options,
            partition_by=self.partition_by,
            partition_template=self.partition_template,
            versioning=self.versioning,
        )


def bindings_by_asset(bindings: Iterable[RefBinding]) -> dict[str, dict[str, Any]]:
    """Each configured asset's binding metadata, by the asset's user string."""
    return {binding.asset: binding.metadata() for binding in bindings}


def bound_metadata(
    metadata: Mapping[str, Any] | None,
    key_path: Sequence[str],
    by_asset: Mapping[str, Mapping[str, Any]],
) -> Mapping[str, Any] | None:
    """An asset's metadata with its configured binding, if it has one. An asset bound both by
    `dws_ref` metadata and by configuration is refused (`BindingError`)."""
    asset = "/".join(key_path)
    configured = by_asset.get(asset)
    if configured is None:
        return metadata
    if metadata and keys.REF in metadata:
        raise BindingError(
            f"asset '{asset}' is bound twice: by its dws_ref metadata "
            f"({getattr(metadata[keys.REF], 'value', metadata[keys.REF])}) and by configuration "
            f"({configured[keys.REF]}); keep one of them"
        )
    return {**(metadata or {}), **configured}
