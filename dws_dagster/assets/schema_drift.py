"""Schema drift between the partitions a step reads together.

Spark reads several Parquet/ORC partitions as one scan with the schema of one file: a column
added in later partitions is silently dropped and a changed type fails mid-job or is misread.
So a read of partitions whose recorded schemas differ is refused before the step's body runs,
naming the partitions on each side and the columns that differ. Writing a partition with a new
schema stays allowed (that is how a backfill migrates an asset to it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dws_dagster.errors import SchemaDriftError

_SHOWN = 5


def check_one_schema(
    markers: Mapping[str, Mapping[str, Any] | None], *, what: str, upstream: str
) -> None:
    """Refuse when the partitions' markers (partition key -> marker, None for data written
    outside dws_dagster) record more than one schema."""
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for key, marker in markers.items():
        columns = (marker or {}).get("columns")
        if isinstance(columns, list):
            groups.setdefault(tuple((str(c[0]), str(c[1])) for c in columns), []).append(key)
    if len(groups) < 2:
        return
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[1][0]))
    (common, common_keys), others = ordered[0], ordered[1:]
    lines = [f"{_keys(common_keys)} have {_describe(common)}"]
    for schema, keys in others:
        lines.append(f"{_keys(keys)}: {_difference(common, schema)}")
    raise SchemaDriftError(
        f"{what}: the {len(markers)} partitions of '{upstream}' read together do not share one "
        f"schema ({'; '.join(lines)}); Spark would silently drop or misread columns. "
        f"Rematerialize the partitions with the old schema (a backfill of '{upstream}') so "
        "they all have the new one, or read only partitions of one schema"
    )


def _keys(keys: Sequence[str]) -> str:
    shown = ", ".join(sorted(keys)[:_SHOWN])
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return f"partition{'s' if len(keys) > 1 else ''} {shown}{more}"


def _describe(schema: tuple[tuple[str, str], ...]) -> str:
    return "(" + ", ".join(f"{name} {kind}" for name, kind in schema) + ")"


def _difference(base: tuple[tuple[str, str], ...], other: tuple[tuple[str, str], ...]) -> str:
    before, after = dict(base), dict(other)
    parts = [
        f"column '{name}' is {after[name]}, not {kind}"
        for name, kind in before.items()
        if name in after and after[name] != kind
    ]
    parts += [f"column '{name}' is missing" for name in before if name not in after]
    parts += [
        f"column '{name}' {kind} is added" for name, kind in after.items() if name not in before
    ]
    if not parts:
        parts = ["the same columns in another order"]
    return ", ".join(parts)
