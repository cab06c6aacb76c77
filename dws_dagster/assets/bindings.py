"""How an asset maps to workspace refs: the `dws_ref` metadata (format, Spark options,
partition template, versioning) and the default ref of an asset without it. Where each
partition lives below the ref is `partitions.py`.

Kept free of Dagster imports so that bindings can be checked and tested on their own; the IO
manager and the definitions check feed it plain metadata mappings.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dws_dagster import metadata_keys as keys
from dws_dagster.errors import BindingError, DwsError, InvalidResourceRefError
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.refs import ResourceRef

FORMATS = ("parquet", "csv", "json", "orc")

VERSIONINGS = ("rows", "files")


@dataclass(frozen=True)
class Binding:
    """Where an asset's data lives in the workspace and how it is stored."""

    ref: ResourceRef
    format: str = "parquet"
    write_options: Mapping[str, str] = field(default_factory=dict)
    read_options: Mapping[str, str] = field(default_factory=dict)
    partition_by: tuple[str, ...] = ()
    partition_template: str | None = None
    explicit: bool = True
    versioning: str | None = None  # None: the IO manager's setting


def dws_ref(
    resource: str,
    subpath: str | None = None,
    *,
    format: str = "parquet",
    write_options: Mapping[str, Any] | None = None,
    read_options: Mapping[str, Any] | None = None,
    partition_by: Sequence[str] | None = None,
    partition_template: str | None = None,
    versioning: str | None = None,
) -> dict[str, Any]:
    """Asset metadata binding an asset to the workspace ref `resource/subpath`.

    Use as `@asset(metadata=dws_ref("intermediate-data", "hourly_actuals"))`; merge with other
    metadata by `{**dws_ref(...), "owner": ...}`. `partition_template` places each partition
    below the ref (placeholders `{partition}`, `{start}`, `{end}` for time windows, with
    strftime specs such as `{start:%Y/%m/%d}`, and dimension names for multi-partitions).
    `partition_by` names columns Spark partitions the files by (`DataFrameWriter.partitionBy`).
    `versioning` ("rows" or "files") overrides SparkWorkspaceIOManager.versioning for this asset.

    Examples:
        .. code-block:: python

            from dagster import DailyPartitionsDefinition, asset
            from pyspark.sql import DataFrame

            from dws_dagster import dws_ref

            @asset(metadata=dws_ref("intermediate-data", "hourly_actuals"))
            def hourly_actuals(trips: DataFrame) -> DataFrame:
                return trips.groupBy("zone", "hour").count()

            @asset(
                partitions_def=DailyPartitionsDefinition(start_date="2024-01-01"),
                metadata={
                    **dws_ref(
                        "intermediate-data",
                        "daily_trips",
                        format="csv",
                        partition_template="{start:%Y/%m/%d}",  # daily_trips/2024/01/31
                        versioning="files",
                    ),
                    "owner": "forecasting",
                },
            )
            def daily_trips(trips: DataFrame) -> DataFrame:
                return trips.groupBy("zone").count()
    """
    metadata: dict[str, Any] = {keys.REF: str(ResourceRef(resource, subpath))}
    binding = binding_from_metadata(
        {
            keys.REF: metadata[keys.REF],
            keys.FORMAT: format,
            keys.WRITE_OPTIONS: dict(write_options or {}),
            keys.READ_OPTIONS: dict(read_options or {}),
            keys.PARTITION_BY: list(partition_by or ()),
            keys.PARTITION_TEMPLATE: partition_template,
            keys.VERSIONING: versioning,
        },
        what=f"dws_ref({resource!r}, {subpath!r})",
    )
    metadata[keys.FORMAT] = binding.format
    if binding.write_options:
        metadata[keys.WRITE_OPTIONS] = dict(binding.write_options)
    if binding.read_options:
        metadata[keys.READ_OPTIONS] = dict(binding.read_options)
    if binding.partition_by:
        metadata[keys.PARTITION_BY] = list(binding.partition_by)
    if binding.partition_template is not None:
        metadata[keys.PARTITION_TEMPLATE] = binding.partition_template
    if binding.versioning is not None:
        metadata[keys.VERSIONING] = binding.versioning
    return metadata


def metadata_value(value: Any) -> Any:
    """Metadata read back from Dagster arrives wrapped (TextMetadataValue, JsonMetadataValue)."""
    return getattr(value, "value", value)


def binding_from_metadata(
    metadata: Mapping[str, Any] | None,
    *,
    default_ref: ResourceRef | None = None,
    default_format: str = "parquet",
    what: str = "asset",
) -> Binding:
    """The binding an asset's metadata declares, else the default ref (key path in the IO
    manager's default resource)."""
    metadata = metadata or {}
    raw_ref = metadata_value(metadata.get(keys.REF))
    if raw_ref is None:
        if default_ref is None:
            raise BindingError(
                f"{what} has no workspace ref: add metadata=dws_ref(RESOURCE, SUBPATH), or set "
                "default_resource on SparkWorkspaceIOManager"
            )
        ref, explicit = default_ref, False
    elif isinstance(raw_ref, str):
        try:
            ref, explicit = ResourceRef.parse(raw_ref), True
        except InvalidResourceRefError as exc:
            raise BindingError(f"{what}: metadata {keys.REF}: {exc}") from None
    else:
        raise BindingError(
            f"{what}: metadata {keys.REF} must be a string such as "
            f"'resource/subpath', got {type(raw_ref).__name__}"
        )
    fmt = metadata_value(metadata.get(keys.FORMAT)) or default_format
    if fmt not in FORMATS:
        raise BindingError(f"{what}: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    template = metadata_value(metadata.get(keys.PARTITION_TEMPLATE))
    if template is not None:
        _check_template(template, what)
    partition_by = metadata_value(metadata.get(keys.PARTITION_BY)) or ()
    if isinstance(partition_by, str) or not all(isinstance(c, str) for c in partition_by):
        raise BindingError(f"{what}: {keys.PARTITION_BY} must be a list of column names")
    versioning = metadata_value(metadata.get(keys.VERSIONING))
    if versioning is not None and versioning not in VERSIONINGS:
        raise BindingError(
            f"{what}: unknown versioning {versioning!r}; choose one of {', '.join(VERSIONINGS)}"
        )
    return Binding(
        ref=ref,
        format=fmt,
        write_options=_options(metadata.get(keys.WRITE_OPTIONS), what),
        read_options=_options(metadata.get(keys.READ_OPTIONS), what),
        partition_by=tuple(partition_by),
        partition_template=template,
        explicit=explicit,
        versioning=versioning,
    )


def default_ref(
    ws: Workspace, default_resource: str | None, key_path: Sequence[str]
) -> ResourceRef:
    """Where an asset without a binding of its own lives: at its key path in
    `default_resource`, by default the workspace's only intermediate-data resource."""
    name = default_resource
    if name is None:
        candidates = sorted(r.name for r in ws.resources.values() if r.role == "intermediate-data")
        if len(candidates) != 1:
            raise BindingError(
                f"asset '{'/'.join(key_path)}' has no dws_ref metadata and the workspace has "
                f"{len(candidates)} intermediate-data resources ({', '.join(candidates)}): "
                "set default_resource on SparkWorkspaceIOManager, or bind the asset with "
                "metadata=dws_ref(...)"
            )
        name = candidates[0]
    return ResourceRef(name, "/".join(key_path))


def binding_in(
    ws: Workspace,
    metadata: Mapping[str, Any] | None,
    key_path: Sequence[str],
    *,
    default_resource: str | None = None,
    default_format: str = "parquet",
) -> Binding:
    """The binding of an asset from its metadata, else at its key path in the default resource,
    checked against `ws` (the resource must exist); errors name the asset."""
    what = f"asset '{'/'.join(key_path)}'"
    default = None
    if not metadata or keys.REF not in metadata:
        default = default_ref(ws, default_resource, key_path)
    binding = binding_from_metadata(
        metadata, default_ref=default, default_format=default_format, what=what
    )
    try:
        ws.check_ref(binding.ref)
    except DwsError as exc:
        raise type(exc)(f"{what}: {exc}") from None
    return binding


def _options(raw: Any, what: str) -> dict[str, str]:
    raw = metadata_value(raw) or {}
    if not isinstance(raw, Mapping):
        raise BindingError(f"{what}: Spark options must be a mapping of name to value")
    return {str(key): str(value) for key, value in raw.items()}


def _check_template(template: Any, what: str) -> None:
    if not isinstance(template, str) or not template.strip():
        raise BindingError(f"{what}: partition template must be a non-empty string")
    fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    if not fields:
        raise BindingError(
            f"{what}: partition template {template!r} has no placeholder, so every partition "
            "would share one subpath; include {partition} (or {start}, or dimension names)"
        )
    for name in fields:
        if not name.isidentifier():
            raise BindingError(
                f"{what}: partition template {template!r}: placeholder "
                f"{{{name}}} is not a plain name"
            )
