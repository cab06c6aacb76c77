"""The lineage report around one ref: where the focus came from, what reads it and how its
step last ran, as terminal text (`render_text`) or as the same report in plain data for tools
(`render_json`).

Pure (graph in, string or dict out), importing only the stdlib and workspace modules free of
Dagster and Spark, so the CLI and tests share it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from dws_dagster.views.focus import (
    MAX_TEXT_DEPTH,
    TreeLine,
    all_nodes,
    last_run_rows,
    merged_edges,
    walk,
)
from dws_dagster.views.graph_model import GraphNode, LineageGraph
from dws_dagster.workspace.versions import short

__all__ = ["render_json", "render_text", "text_line", "text_lines"]


def text_line(node: GraphNode, line: TreeLine) -> str:
    version = f"@{short(node.version)}" if node.version is not None else " (no version)"
    parts = [f"{node.ref}{version}"]
    if node.step is not None:
        parts.append(f"<- {node.step}")
    parts.append(f"[{node.status}]")
    text = "  ".join(parts)
    if not node.current:
        text += " (not current)"
    if line.stale:
        text += " (stale)"
    if line.repeated:
        text += " (see above)"
    return text


def _text_tree(nodes: dict[str, GraphNode], lines: list[TreeLine]) -> list[str]:
    if len(lines) <= 1:
        return ["  (none)"]
    out = []
    hidden = sum(1 for line in lines if len(line.lasts) > MAX_TEXT_DEPTH)
    for line in lines:
        if len(line.lasts) > MAX_TEXT_DEPTH:
            continue
        prefix = ""
        if line.lasts:
            prefix = "".join("    " if last else "│   " for last in line.lasts[:-1])
            prefix += "└── " if line.lasts[-1] else "├── "
        text = text_line(nodes[line.node_id], line).replace("\n", " ")
        out.append(f"  {prefix}{text}")
    if hidden:
        out.append(
            f"  ... {hidden} more node(s) deeper than {MAX_TEXT_DEPTH} levels: see "
            "--format json or html"
        )
    return out


def render_text(graph: LineageGraph) -> str:
    """A terminal report: where the focus came from, what reads it, and how its step last ran."""
    return "\n".join(text_lines(graph)) + "\n"


def text_lines(graph: LineageGraph) -> list[str]:
    """`render_text` as its lines (each line one line, whatever the data holds: the CLI's
    writer escapes a newline in a value)."""
    nodes = all_nodes(graph)
    edges = merged_edges(graph)
    out: list[str] = []
    if graph.snapshot is not None:
        out += [f"Lineage from snapshot {graph.snapshot}", ""]
    out.append("Upstream")
    out += _text_tree(nodes, walk(graph, edges, upstream=True))
    out += ["", "Downstream"]
    out += _text_tree(nodes, walk(graph, edges, upstream=False))
    out += ["", "Last run"]
    if graph.last_run is None:
        out.append("  (never run)")
    else:
        for name, value in last_run_rows(graph.last_run):
            # An error's lines (a traceback) are shown as lines; any other value is one line
            # (a newline in a step's name is the writer's to escape).
            value_lines = value.rstrip("\n").split("\n") if name == "error" else [value]
            out.append(f"  {name + ':':<10}{value_lines[0]}")
            out += [f"  {'':<10}{more}" for more in value_lines[1:]]
    return out


def _flat(lines: list[TreeLine]) -> list[dict[str, Any]]:
    """The pre-order walk as a list of `{"id", "depth"}` entries: a tree any depth deep that
    JSON encoders (which limit nesting) can always write."""
    flat = []
    for line in lines:
        entry: dict[str, Any] = {"id": line.node_id, "depth": len(line.lasts)}
        if line.stale:
            entry["stale"] = True
        if line.repeated:
            entry["repeated"] = True
        flat.append(entry)
    return flat


def render_json(graph: LineageGraph) -> dict[str, Any]:
    """Everything the other renderers show, as plain data for tools (sorted, so diffable)."""
    nodes = all_nodes(graph)
    edges = merged_edges(graph)
    return {
        "focus": graph.focus,
        "snapshot": graph.snapshot,
        "nodes": [asdict(node) for node in nodes.values()],
        "edges": [{"source": e.source, "target": e.target, "stale": e.stale} for e in edges],
        "last_run": asdict(graph.last_run) if graph.last_run is not None else None,
        "upstream": _flat(walk(graph, edges, upstream=True)),
        "downstream": _flat(walk(graph, edges, upstream=False)),
        # The newest replay of the snapshot (`--snapshot`), as `replay --format json` printed
        # it: each verdict names its ref and recorded version, so a tool matches it to nodes.
        "replay": graph.replay,
    }
