"""Everything the lineage page draws, as plain data (`page_data`): one node per asset or step
with its partitions (or versions) grouped with a count, the range of their keys and their
statuses; edges between those nodes with how many inputs each stands for; every node's details
and history; column-level lineage; and, on the page of a replayed snapshot, the replay's
verdicts (`page_replay`). `lineage_page.render_page` embeds it in the page.

Pure functions of the graph, like the other renderers: no Dagster, no Spark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from dws_dagster.views.graph_model import LineageGraph
from dws_dagster.views.page.columns import column_lineage
from dws_dagster.views.page.details import (
    HISTORY_PER_NODE,
    history_of,
    last_run_of,
    node_details,
)
from dws_dagster.views.page.groups import (
    STATUS_INDEX,
    STATUSES,
    Group,
    group_nodes,
    step_of,
)
from dws_dagster.views.page.verdicts import group_replay, match_verdicts, replay_summary

__all__ = ["PAGE_FORMAT", "page_data"]

#: Version of the embedded JSON's layout, for tools that read it out of a page.
PAGE_FORMAT = 1
#: Worst first: the status a node with members of several statuses is drawn with.
_SEVERITY = ("failed", "unknown", "missing", "stale", "other", "ok", "source")
#: Refs whose history is read from the store for one page (the rest show what the graph has).
HISTORY_REFS = 500


def _parts(group: Group, runs: dict[str, int]) -> dict[str, Any]:
    """The members as columns (keys, versions, statuses, end times, runs): compact for
    thousands of partitions, expanded by the page only when a person lists them."""
    keys, versions, ends, run_ids, refs = [], [], [], [], []
    statuses = []
    show_refs = False
    for member in group.members:
        record = member.record or {}
        keys.append(member.key)
        versions.append(member.node.version)
        statuses.append(str(STATUS_INDEX[member.status]))
        end = record.get("end_time") or member.node.end_time
        ends.append(end if isinstance(end, str) else None)
        run_id = step_of(record).get("run_id") or member.node.run_id
        run_ids.append(runs.setdefault(run_id, len(runs)) if isinstance(run_id, str) else -1)
        suffix = (
            member.node.ref[len(group.ref) :].lstrip("/")
            if member.node.ref.startswith(group.ref)
            else member.node.ref
        )
        refs.append(suffix)
        show_refs = show_refs or suffix not in ("", member.key)
    parts: dict[str, Any] = {
        "key": keys,
        "version": versions,
        "status": "".join(statuses),
        "end": ends,
        "run": run_ids,
    }
    if show_refs:
        parts["ref"] = refs
    return parts


def _overall(counts: Mapping[str, int]) -> str:
    return next((status for status in _SEVERITY if counts.get(status)), "ok")


def page_data(graph: LineageGraph) -> dict[str, Any]:
    """Everything the page draws, as plain data (what `render_page` embeds)."""
    nodes = graph.with_placeholders()
    groups = group_nodes(graph, nodes)
    where = {m.node.id: g.index for g in groups for m in g.members}
    focus_group = where[graph.focus]

    single_refs = [g.ref for g in groups if len({m.node.ref for m in g.members}) == 1]
    stored: dict[str, list[dict[str, Any]]] = {}
    if graph.load_history is not None and single_refs:
        # The focus first, then the nodes nearest... every node, while the budget lasts.
        wanted = sorted(single_refs, key=lambda ref: ref != groups[focus_group].ref)
        stored = graph.load_history(wanted[:HISTORY_REFS], HISTORY_PER_NODE + 5)

    links: dict[tuple[int, int], list[int]] = {}
    self_reads: Counter[int] = Counter()
    seen_edges: set[tuple[str, str]] = set()
    for edge in graph.edges:
        if (edge.source, edge.target) in seen_edges:
            continue
        seen_edges.add((edge.source, edge.target))
        source, target = where[edge.source], where[edge.target]
        if source == target:
            self_reads[source] += 1
            continue
        link = links.setdefault((source, target), [0, 0])
        link[0] += 1
        link[1] += int(edge.stale)

    column_edges, columns, external = column_lineage(groups)
    if graph.replay is not None:
        matched, outside = match_verdicts(groups, graph.replay)
    runs: dict[str, int] = {}
    out_groups = []
    for group in groups:
        counts = Counter(m.status for m in group.members)
        keys = sorted({m.key for m in group.members})
        focus = group.index == focus_group
        partitioned = (
            any(step_of(m.record).get("partition") for m in group.members)
            or len({m.node.ref for m in group.members}) > 1
        )
        out_groups.append(
            {
                "id": group.index,
                "key": "\x1f".join(group.key),
                "kind": group.kind,
                "name": group.name,
                "ref": group.ref,
                "step": group.step,
                "role": next((m.node.role for m in group.members if m.node.role), None),
                "focus": focus,
                "partitioned": partitioned,
                "count": len(keys),
                "members": len(group.members),
                "range": [keys[0], keys[-1]] if keys else None,
                "counts": {status: counts[status] for status in STATUSES if counts[status]},
                "status": _overall(counts),
                "details": node_details(group, graph, focus),
                "last_run": last_run_of(group, graph, focus),
                "history": history_of(group, graph, stored),
                "columns": columns.get(group.index, []),
                "external_columns": external.get(group.index, []),
                "self_reads": self_reads[group.index],
                "parts": _parts(group, runs),
            }
        )
        if graph.replay is not None:
            out_groups[-1]["replay"] = group_replay(group, matched)
    focus_member = next(
        i for i, m in enumerate(groups[focus_group].members) if m.node.id == graph.focus
    )
    focus_node = nodes[graph.focus]
    data = {
        "format": PAGE_FORMAT,
        "title": f"Lineage of {focus_node.ref}",
        "focus": {
            "group": focus_group,
            "member": focus_member,
            "id": graph.focus,
            "ref": focus_node.ref,
        },
        "snapshot": graph.snapshot,
        "statuses": list(STATUSES),
        "runs": sorted(runs, key=runs.__getitem__),
        "groups": out_groups,
        "edges": [[s, t, count, stale] for (s, t), (count, stale) in sorted(links.items())],
        "column_edges": column_edges,
        "counts": {"nodes": len(nodes), "edges": len(seen_edges)},
        "truncated": graph.truncated,
    }
    if graph.replay is not None:
        data["replay"] = replay_summary(graph.replay, outside)
    return data
