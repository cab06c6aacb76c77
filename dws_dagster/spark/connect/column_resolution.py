"""The columns of a Spark Connect plan's nodes as the walk lays them out, and Spark's rules for
naming them: a name resolves case-insensitively, through a qualifier (`t.col`) or into nested
fields (`col.field`), and a name two different columns answer is ambiguous (`UnknownNode`: the
walk gives up on the node rather than guess). `at_level` and `as_indirect` classify the sources
read through an expression as `spark/lineage_model.py` says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dws_dagster.spark.lineage_model import ColumnSource, LineageKind, stronger


@dataclass(frozen=True)
class Col:
    """One output column of a node: `key` links it to its sources (as an `exprId` does in the
    analyzed plan); `qualifier` is the alias or table name it may be named through."""

    key: int
    name: str
    qualifier: tuple[str, ...] = ()


@dataclass
class Out:
    """A node's columns, and those below it that a Sort or Filter above may still name (Spark
    resolves such a name through the projection under it)."""

    cols: list[Col]
    below: list[Col] = field(default_factory=list)


@dataclass
class Scope:
    cols: list[Col]
    fallback: list[Col] = field(default_factory=list)


class UnknownNode(Exception):
    """A node the walk cannot follow: its columns get no sources, the lineage is incomplete."""


def same_name(a: str, b: str) -> bool:
    return a.lower() == b.lower()  # Spark's default resolver: names are case-insensitive


def at_level(sources: Iterable[ColumnSource], level: str) -> set[ColumnSource]:
    """`sources` read through an expression of strength `level`: direct ones weaker than it
    take it (a cast of an identity is a transformation), indirect ones stay."""
    found: set[ColumnSource] = set()
    for source in sources:
        if source.kind is LineageKind.DIRECT and stronger(source.subtype, level) != source.subtype:
            source = ColumnSource(source.path, source.column, source.kind, level)
        found.add(source)
    return found


def as_indirect(sources: Iterable[ColumnSource], subtype: str) -> set[ColumnSource]:
    return {
        ColumnSource(s.path, s.column, LineageKind.INDIRECT, subtype)
        if s.kind is LineageKind.DIRECT
        else s
        for s in sources
    }


@dataclass(frozen=True)
class Wide:
    """Columns a single select item makes, named by Spark (`names` None) or by an alias."""

    names: tuple[str, ...] | None
    sources: set[ColumnSource]


def match_name(cols: Sequence[Col], parts: tuple[str, ...]) -> tuple[Col, tuple[str, ...]] | None:
    """Spark's resolution of a multi-part name among `cols`: a qualifier first (`t.col`, the
    longest that matches), then a column with nested fields (`col.field`); two different
    columns for one name is no answer (Spark refuses it as ambiguous)."""
    for size in range(min(3, len(parts) - 1), 0, -1):
        found = {
            c.key: c
            for c in cols
            if len(c.qualifier) >= size
            and all(same_name(a, b) for a, b in zip(c.qualifier[-size:], parts[:size], strict=True))
            and same_name(c.name, parts[size])
        }
        if len(found) == 1:
            return next(iter(found.values())), parts[size + 1 :]
        if found:
            raise UnknownNode(f"ambiguous column {'.'.join(parts)}")
    found = {c.key: c for c in cols if same_name(c.name, parts[0])}
    if len(found) > 1:
        raise UnknownNode(f"ambiguous column {'.'.join(parts)}")
    return (next(iter(found.values())), parts[1:]) if found else None


def only_column(cols: Sequence[Col], name: str) -> Col:
    found = [c for c in cols if same_name(c.name, name)]
    if len({c.key for c in found}) != 1:
        raise UnknownNode(f"no single column {name} to join on")
    return found[0]
