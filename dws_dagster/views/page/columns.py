"""Column-level lineage between the lineage page's nodes, from the records'
`extra.column_lineage` (the shape of the IO manager's `dws/column_lineage` metadata): which
columns of which node each column came from, and the sources outside the graph.
"""

from __future__ import annotations

import bisect
from typing import Any

from dws_dagster.views.page.groups import Group, parent_ref
from dws_dagster.workspace.records import COLUMN_LINEAGE_KEY
from dws_dagster.workspace.redaction import redact_text

#: Column sources outside the graph (files no step wrote, refs not drawn) listed per node.
EXTERNAL_SHOWN = 200


class _RefIndex:
    """Which group a ref named by column lineage belongs to: the group of that ref, else of
    the refs inside it (a step that read a whole partitioned folder) when they are all in
    one group, else of the nearest ref around it."""

    def __init__(self, groups: list[Group]) -> None:
        self._exact: dict[str, int] = {}
        for group in groups:
            for member in group.members:
                self._exact.setdefault(member.node.ref, group.index)
        self._sorted = sorted(self._exact)
        self._memo: dict[str, int | None] = {}

    def find(self, ref: str) -> int | None:
        if ref in self._memo:
            return self._memo[ref]
        found = self._exact.get(ref)
        if found is None:
            start = bisect.bisect_left(self._sorted, ref + "/")
            end = bisect.bisect_left(self._sorted, ref + "0")  # "0" sorts right after "/"
            inside = {self._exact[other] for other in self._sorted[start:end]}
            if len(inside) == 1:
                found = inside.pop()
            parent = parent_ref(ref)
            while found is None and not inside and parent is not None:
                found = self._exact.get(parent)
                parent = parent_ref(parent)
        self._memo[ref] = found
        return found


def column_lineage(
    groups: list[Group],
) -> tuple[list[list[Any]], dict[int, list[str]], dict[int, list[Any]]]:
    """Edges (source group, column, target group, column or None for the whole table, kind,
    subtype), every group's columns (sorted: stored records keep no schema order), and
    sources no group holds.

    Records are untrusted: anything not shaped like the IO manager's description is skipped.
    The partitions of an asset repeat the same lineage, so the sources are first collected
    as they are written (a set per node, cheap type checks only), then each distinct one is
    resolved to its node once."""
    index = _RefIndex(groups)
    edges: dict[tuple[Any, ...], None] = {}
    columns: dict[int, dict[str, None]] = {}
    external: dict[int, dict[tuple[Any, ...], None]] = {}
    for group in groups:
        own = columns.setdefault(group.index, {})
        raw: set[tuple[Any, ...]] = set()
        for member in group.members:
            extra = member.record.get("extra") if member.record is not None else None
            lineage = extra.get(COLUMN_LINEAGE_KEY) if type(extra) is dict else None
            if type(lineage) is not dict:
                continue
            by_column = lineage.get("columns")
            if type(by_column) is dict:
                for column, sources in by_column.items():
                    own[column] = None
                    if type(sources) is list:
                        for src in sources:
                            if type(src) is dict:
                                raw.add(
                                    (
                                        src.get("ref"),
                                        src.get("location"),
                                        src.get("column"),
                                        column,
                                        src.get("kind"),
                                        src.get("subtype"),
                                    )
                                )
            dataset = lineage.get("dataset")
            if type(dataset) is list:
                for src in dataset:
                    if type(src) is dict:
                        raw.add(
                            (
                                src.get("ref"),
                                src.get("location"),
                                src.get("column"),
                                None,
                                src.get("kind"),
                                src.get("subtype"),
                            )
                        )
        for ref, location, name, column, kind, subtype in raw:
            if type(name) is not str or not isinstance(column, str | None):
                continue
            kind = str(kind or "direct").lower()
            subtype = str(subtype).lower() if subtype else None
            where = index.find(ref) if type(ref) is str else None
            if where is None:
                shown = ref if type(ref) is str else location
                if type(shown) is str:
                    external.setdefault(group.index, {})[
                        (redact_text(shown), name, column, kind, subtype)
                    ] = None
                continue
            columns.setdefault(where, {})[name] = None
            if where != group.index or name != column:
                edges[(where, name, group.index, column, kind, subtype)] = None
    ordered = sorted(edges, key=lambda e: (e[2], str(e[3]), e[0], e[1], e[4], str(e[5])))
    return (
        [list(edge) for edge in ordered],
        {g: sorted(names) for g, names in columns.items() if names},
        {
            g: sorted((list(item) for item in items), key=lambda i: [str(x) for x in i])[
                :EXTERNAL_SHOWN
            ]
            for g, items in external.items()
        },
    )
