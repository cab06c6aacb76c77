"""What column lineage read from a Spark plan is, whichever plan it was read from.

Both walkers (`spark/plan.py` over the analyzed plan of a classic session,
`spark/connect/` over the client's plan of a Spark Connect session) give a `PlanLineage` of
these types and classify sources by the same rules, kept here: the OpenLineage kinds, DIRECT
(IDENTITY, TRANSFORMATION, AGGREGATION) when a column's value is derived from a source and
INDIRECT (JOIN, FILTER, GROUP_BY, SORT, WINDOW, CONDITIONAL) when it only decides which rows
there are or which branch is taken; `stronger` orders the direct subtypes and `tidy` gives the
one answer both walkers must agree on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class LineageKind(StrEnum):
    DIRECT = "DIRECT"
    INDIRECT = "INDIRECT"


@dataclass(frozen=True, order=True)
class ColumnSource:
    """One input column an output column (or the whole dataset) depends on."""

    path: str
    column: str
    kind: LineageKind
    subtype: str


@dataclass(frozen=True)
class PlanInput:
    path: str
    format: str | None
    columns: tuple[str, ...]
    #: (column, Spark simple type, nullable) of the columns as Spark read them; empty when
    #: the plan does not say
    schema: tuple[tuple[str, str, bool], ...] = ()


@dataclass(frozen=True)
class PlanLineage:
    inputs: tuple[PlanInput, ...]
    columns: dict[str, tuple[ColumnSource, ...]]
    dataset: tuple[ColumnSource, ...]
    complete: bool


Sources = frozenset[ColumnSource]

#: The direct subtypes, weakest first: an expression over a column is at least as strong as
#: the strongest one around it (a cast of an identity is a transformation).
DIRECT_RANK = {"IDENTITY": 0, "TRANSFORMATION": 1, "AGGREGATION": 2}


def stronger(a: str, b: str) -> str:
    return a if DIRECT_RANK[a] >= DIRECT_RANK[b] else b


def tidy(sources: Iterable[ColumnSource]) -> tuple[ColumnSource, ...]:
    """Sorted, and one DIRECT entry per input column (the strongest subtype)."""
    direct: dict[tuple[str, str], ColumnSource] = {}
    indirect: set[ColumnSource] = set()
    for source in sources:
        if source.kind is LineageKind.DIRECT:
            key = (source.path, source.column)
            current = direct.get(key)
            if current is None or DIRECT_RANK[source.subtype] > DIRECT_RANK[current.subtype]:
                direct[key] = source
        else:
            indirect.add(source)
    return tuple(sorted([*direct.values(), *indirect]))


def plan_inputs(
    inputs: dict[str, tuple[str | None, list[str]]],
    types: dict[str, dict[str, tuple[str, bool]]],
) -> tuple[PlanInput, ...]:
    """The inputs a walker collected (path: its format and the columns read, in order; path:
    column: its type), sorted by path, each with the types of its columns that are known."""
    return tuple(
        PlanInput(
            path,
            fmt,
            tuple(cols),
            tuple((col, *types[path][col]) for col in cols if col in types.get(path, {})),
        )
        for path, (fmt, cols) in sorted(inputs.items())
    )
