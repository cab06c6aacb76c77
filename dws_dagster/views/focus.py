"""What the lineage reports and drawings share: the nodes and edges to show, the walk from the
focus up and down the graph, and the rows describing the focus's last run.

Pure (graph in, data out) and importing only the stdlib and the graph model, so every renderer
can share it without importing Dagster or Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from dws_dagster.views.graph_model import GraphEdge, GraphNode, LastRun, LineageGraph

#: Text trees stop here; JSON and HTML show the whole graph.
MAX_TEXT_DEPTH = 40


def all_nodes(graph: LineageGraph) -> dict[str, GraphNode]:
    """The graph's nodes plus placeholders for the focus or edge ends it lacks, sorted by id."""
    nodes = graph.with_placeholders()
    return {node_id: nodes[node_id] for node_id in sorted(nodes)}


def merged_edges(graph: LineageGraph) -> list[GraphEdge]:
    """Edges once per (source, target), stale if any duplicate is, sorted for stable output."""
    merged: dict[tuple[str, str], bool] = {}
    for edge in graph.edges:
        key = (edge.source, edge.target)
        merged[key] = merged.get(key, False) or edge.stale
    return [GraphEdge(source, target, stale) for (source, target), stale in sorted(merged.items())]


@dataclass(frozen=True)
class TreeLine:
    """One line of a pre-order walk; `lasts[i]` says whether the ancestor at depth i+1 (or
    this node, for the final entry) is the last of its siblings, which draws the guides."""

    node_id: str
    lasts: tuple[bool, ...]
    stale: bool
    repeated: bool


def refs_overlap(a: str, b: str) -> bool:
    """Whether one ref is the other or holds it: readers of either are readers of the focus."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def walk(graph: LineageGraph, edges: list[GraphEdge], upstream: bool) -> list[TreeLine]:
    """Pre-order walk from the focus; a node met again is listed as repeated, not expanded.

    Iterative, so long chains cannot hit the recursion limit, and cycles end at the first
    repeat.
    """
    neighbours: dict[str, list[tuple[str, bool]]] = {}
    for edge in edges:
        here, there = (edge.target, edge.source) if upstream else (edge.source, edge.target)
        neighbours.setdefault(here, []).append((there, edge.stale))
    if not upstream and graph.focus in graph.nodes:
        # Readers of another version of the focus ref, or of a ref nested in or around it,
        # are downstream too (their edges are stale or partial): list them under the focus.
        focus_ref = graph.nodes[graph.focus].ref
        for node_id, node in sorted(graph.nodes.items()):
            if node_id != graph.focus and refs_overlap(node.ref, focus_ref):
                neighbours.setdefault(graph.focus, []).extend(neighbours.get(node_id, []))
    lines: list[TreeLine] = []
    seen: set[str] = set()
    stack: list[tuple[str, tuple[bool, ...], bool]] = [(graph.focus, (), False)]
    while stack:
        node_id, lasts, stale = stack.pop()
        repeated = node_id in seen
        lines.append(TreeLine(node_id, lasts, stale, repeated))
        if repeated:
            continue
        seen.add(node_id)
        children = neighbours.get(node_id, [])
        for index in range(len(children) - 1, -1, -1):
            child, child_stale = children[index]
            stack.append((child, (*lasts, index == len(children) - 1), child_stale))
    return lines


def _format_duration(seconds: float | None) -> str:
    """Seconds to something readable at a glance: `1.2 s`, `3 min 4 s`, `1 h 2 min 3 s`."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min {secs} s"
    return f"{minutes} min {secs} s"


def last_run_rows(last_run: LastRun) -> list[tuple[str, str]]:
    rows = [
        ("step", last_run.step or "-"),
        ("status", last_run.status),
        ("run id", last_run.run_id or "-"),
        ("started", last_run.start_time or "-"),
        ("finished", last_run.end_time or "-"),
        ("duration", _format_duration(last_run.duration_seconds)),
    ]
    if last_run.error:
        rows.append(("error", last_run.error))
    return rows
