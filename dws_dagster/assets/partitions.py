"""Where each partition of a bound asset lives: the binding's ref joined with its partition
template, filled from the partition key (and the window or dimensions Dagster gives it).

The write path (the IO manager) and the read path (the sensor's asset catalog) name partitions
here, so the two can never disagree on a partition's ref. Imports Dagster but never Spark: the
sensor runs without a JVM.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from dagster import MultiPartitionsDefinition, TimeWindowPartitionsDefinition

from dws_dagster.assets.bindings import Binding
from dws_dagster.errors import BindingError, InvalidResourceRefError
from dws_dagster.workspace.refs import ResourceRef

#: `{partition}` is the partition key made path-safe; multi-dimensional keys default to
#: `dim=value/...` (Hive style, so Spark finds the dimensions as columns when reading them all).
DEFAULT_PARTITION_TEMPLATE = "{partition}"
_SAFE = "-_.=~+@ ,"
_HIVE_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[^=]+")


def partition_key_ref(binding: Binding, partitions_def: Any, key: str, what: str) -> ResourceRef:
    """The ref of one Dagster partition key of a bound asset: the time window or dimensions
    its partitions definition gives the key fill the template (`fill_partition_template`)."""
    dimensions = window = None
    if isinstance(partitions_def, MultiPartitionsDefinition):
        dimensions = dict(partitions_def.get_partition_key_from_str(str(key)).keys_by_dimension)
    elif isinstance(partitions_def, TimeWindowPartitionsDefinition):
        span = partitions_def.time_window_for_partition_key(str(key))
        window = (span.start, span.end)
    return fill_partition_template(
        binding, str(key), dimensions=dimensions, window=window, what=what
    )


def fill_partition_template(
    binding: Binding,
    key: str,
    *,
    dimensions: Mapping[str, str] | None = None,
    window: tuple[dt.datetime, dt.datetime] | None = None,
    what: str = "asset",
) -> ResourceRef:
    """The binding's ref joined with its partition template filled from the values given
    (the caller reads them from Dagster), refusing templates those values cannot fill."""
    template = binding.partition_template
    if template is None:
        template = (
            "/".join(f"{dim}={{{dim}}}" for dim in sorted(dimensions))
            if dimensions
            else DEFAULT_PARTITION_TEMPLATE
        )
    values: dict[str, Any] = {"partition": path_safe(key)}
    for dim, value in (dimensions or {}).items():
        values[dim] = path_safe(value)
    if window is not None:
        values["start"], values["end"] = window
    try:
        relative = template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise BindingError(
            f"{what}: partition template {template!r} cannot be filled for partition "
            f"{key!r} ({exc!s}); use {{partition}}, {{start}}, {{end}} or the dimension "
            "names of a multi-partition"
        ) from None
    try:
        return binding.ref.child(relative)
    except InvalidResourceRefError as exc:
        raise BindingError(
            f"{what}: partition {key!r} gives an invalid subpath {relative!r} under "
            f"{binding.ref}: {exc}"
        ) from None


def is_hive_style(base: ResourceRef, partition: ResourceRef) -> bool:
    """True when the partition's folders below `base` are all named `column=value`, so Spark
    restores those columns when several partitions are read together (`basePath`)."""
    relative = partition.parts[len(base.parts) :]
    return bool(relative) and all(_HIVE_SEGMENT.fullmatch(part) for part in relative)


def path_safe(value: str) -> str:
    """A partition key as one path component: `/`, `:` and other unsafe characters are
    percent-encoded (as Spark does for partition values), so distinct keys never collide."""
    if value in (".", ".."):
        return quote(value, safe="").replace(".", "%2E")
    return quote(value, safe=_SAFE)
