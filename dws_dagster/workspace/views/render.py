"""Render a `LineageGraph` as text, JSON, Graphviz DOT, Mermaid or one offline HTML page.

Every function here is pure (graph in, string or dict out) so the CLI, the Dagster UI
integration and tests can share them without importing Dagster or Spark.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dws_dagster.workspace.views.graph_model import GraphEdge, GraphNode, LastRun, LineageGraph

__all__ = [
    "render_dot",
    "render_html",
    "render_json",
    "render_mermaid",
    "render_text",
]

#: Characters of a version shown wherever space is short; enough to tell versions apart.
SHORT_VERSION = 12

#: (fill, stroke) per node status; anything else falls back to `_OTHER_COLOURS`.
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    "ok": ("#e3f4e6", "#2e7d32"),
    "failed": ("#fbe3e4", "#c62828"),
    "unknown": ("#fff4d6", "#b7791f"),
    "source": ("#e1ecf8", "#1f5f99"),
    "missing": ("#eeeeee", "#757575"),
}
_OTHER_COLOURS = ("#f1e8f7", "#6a4c93")
_STALE_COLOUR = "#b26a00"
_EDGE_COLOUR = "#555555"
_FOCUS_COLOUR = "#111111"


# --------------------------------------------------------------------------- shared helpers


def _all_nodes(graph: LineageGraph) -> dict[str, GraphNode]:
    """The graph's nodes plus placeholders for the focus or edge ends it lacks, sorted by id."""
    nodes = graph.with_placeholders()
    return {node_id: nodes[node_id] for node_id in sorted(nodes)}


def _edges(graph: LineageGraph) -> list[GraphEdge]:
    """Edges once per (source, target), stale if any duplicate is, sorted for stable output."""
    merged: dict[tuple[str, str], bool] = {}
    for edge in graph.edges:
        key = (edge.source, edge.target)
        merged[key] = merged.get(key, False) or edge.stale
    return [GraphEdge(source, target, stale) for (source, target), stale in sorted(merged.items())]


def _short(version: str | None) -> str:
    """The leading characters of a version, as people quote commit hashes."""
    return version[:SHORT_VERSION] if version is not None else ""


def _version_label(node: GraphNode) -> str:
    return f"@{_short(node.version)}" if node.version is not None else "(no version)"


def _status_line(node: GraphNode) -> str:
    return node.status if node.current else f"{node.status} (not current)"


def _label_lines(node: GraphNode) -> list[str]:
    """Ref, short version, step and status: what every box in every drawing shows."""
    lines = [node.ref, _version_label(node)]
    if node.step is not None:
        lines.append(node.step)
    lines.append(_status_line(node))
    return lines


def _colours(status: str) -> tuple[str, str]:
    return STATUS_COLOURS.get(status, _OTHER_COLOURS)


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


def _last_run_rows(last_run: LastRun) -> list[tuple[str, str]]:
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


# --------------------------------------------------------------------------- trees


@dataclass(frozen=True)
class _TreeLine:
    """One line of a pre-order walk; `lasts[i]` says whether the ancestor at depth i+1 (or
    this node, for the final entry) is the last of its siblings, which draws the guides."""

    node_id: str
    lasts: tuple[bool, ...]
    stale: bool
    repeated: bool


#: Text trees stop here; JSON and HTML show the whole graph.
MAX_TEXT_DEPTH = 40


def _refs_overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _walk(graph: LineageGraph, edges: list[GraphEdge], upstream: bool) -> list[_TreeLine]:
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
            if node_id != graph.focus and _refs_overlap(node.ref, focus_ref):
                neighbours.setdefault(graph.focus, []).extend(neighbours.get(node_id, []))
    lines: list[_TreeLine] = []
    seen: set[str] = set()
    stack: list[tuple[str, tuple[bool, ...], bool]] = [(graph.focus, (), False)]
    while stack:
        node_id, lasts, stale = stack.pop()
        repeated = node_id in seen
        lines.append(_TreeLine(node_id, lasts, stale, repeated))
        if repeated:
            continue
        seen.add(node_id)
        children = neighbours.get(node_id, [])
        for index in range(len(children) - 1, -1, -1):
            child, child_stale = children[index]
            stack.append((child, (*lasts, index == len(children) - 1), child_stale))
    return lines


def _flat(lines: list[_TreeLine]) -> list[dict[str, Any]]:
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


# --------------------------------------------------------------------------- text


def _text_line(node: GraphNode, line: _TreeLine) -> str:
    version = f"@{_short(node.version)}" if node.version is not None else " (no version)"
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


def _text_tree(nodes: dict[str, GraphNode], lines: list[_TreeLine]) -> list[str]:
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
        text = _text_line(nodes[line.node_id], line).replace("\n", " ")
        out.append(f"  {prefix}{text}")
    if hidden:
        out.append(
            f"  ... {hidden} more node(s) deeper than {MAX_TEXT_DEPTH} levels: see "
            "--format json or html"
        )
    return out


def render_text(graph: LineageGraph) -> str:
    """A terminal report: where the focus came from, what reads it, and how its step last ran."""
    nodes = _all_nodes(graph)
    edges = _edges(graph)
    out: list[str] = []
    if graph.snapshot is not None:
        out += [f"Lineage from snapshot {graph.snapshot}", ""]
    out.append("Upstream")
    out += _text_tree(nodes, _walk(graph, edges, upstream=True))
    out += ["", "Downstream"]
    out += _text_tree(nodes, _walk(graph, edges, upstream=False))
    out += ["", "Last run"]
    if graph.last_run is None:
        out.append("  (never run)")
    else:
        for name, value in _last_run_rows(graph.last_run):
            value_lines = value.splitlines() or [""]
            out.append(f"  {name + ':':<10}{value_lines[0]}")
            out += [f"  {'':<10}{more}" for more in value_lines[1:]]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- JSON


def render_json(graph: LineageGraph) -> dict[str, Any]:
    """Everything the other renderers show, as plain data for tools (sorted, so diffable)."""
    nodes = _all_nodes(graph)
    edges = _edges(graph)
    return {
        "focus": graph.focus,
        "snapshot": graph.snapshot,
        "nodes": [asdict(node) for node in nodes.values()],
        "edges": [{"source": e.source, "target": e.target, "stale": e.stale} for e in edges],
        "last_run": asdict(graph.last_run) if graph.last_run is not None else None,
        "upstream": _flat(_walk(graph, edges, upstream=True)),
        "downstream": _flat(_walk(graph, edges, upstream=False)),
    }


# --------------------------------------------------------------------------- DOT


def _dot_quote(text: str) -> str:
    """A DOT double-quoted string: backslash and quote escaped, newlines as `\\n` line breaks."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{text}"'


def render_dot(graph: LineageGraph) -> str:
    """Graphviz source, for `dot -Tsvg` or any tool that reads DOT."""
    nodes = _all_nodes(graph)
    out = [
        "digraph lineage {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        f'  edge [color="{_EDGE_COLOUR}"];',
    ]
    if graph.snapshot is not None:
        out.append(f"  label={_dot_quote('snapshot ' + graph.snapshot)};")
        out.append("  labelloc=t;")
    for node_id, node in nodes.items():
        fill, stroke = _colours(node.status)
        attrs = [f"label={_dot_quote(chr(10).join(_label_lines(node)))}", f'fillcolor="{fill}"']
        if node_id == graph.focus:
            attrs += [f'color="{_FOCUS_COLOUR}"', "penwidth=3", 'style="rounded,filled,bold"']
        else:
            attrs.append(f'color="{stroke}"')
        out.append(f"  {_dot_quote(node_id)} [{', '.join(attrs)}];")
    for edge in _edges(graph):
        style = f' [style=dashed, color="{_STALE_COLOUR}"]' if edge.stale else ""
        out.append(f"  {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{style};")
    out.append("}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- Mermaid


def _mermaid_escape(text: str) -> str:
    """Text safe inside a Mermaid `"..."` label: entity codes for `#`, quotes and markup."""
    text = text.replace("#", "#35;")
    for raw, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("&", "#amp;"), ("`", "#96;")):
        text = text.replace(raw, code)
    return text.replace("\r", " ").replace("\n", " ")


def _mermaid_class(status: str) -> str:
    return f"st_{status}" if status in STATUS_COLOURS else "st_other"


def render_mermaid(graph: LineageGraph) -> str:
    """A Mermaid flowchart, for Markdown renderers (GitHub, GitLab, docs sites)."""
    nodes = _all_nodes(graph)
    ids = {node_id: f"n{index}" for index, node_id in enumerate(nodes)}
    out = ["flowchart LR"]
    for node_id, node in nodes.items():
        label = "<br/>".join(_mermaid_escape(line) for line in _label_lines(node))
        out.append(f'  {ids[node_id]}["{label}"]')
    for edge in _edges(graph):
        arrow = "-.->" if edge.stale else "-->"
        out.append(f"  {ids[edge.source]} {arrow} {ids[edge.target]}")
    by_class: dict[str, list[str]] = {}
    for node_id, node in nodes.items():
        by_class.setdefault(_mermaid_class(node.status), []).append(ids[node_id])
    for status, (fill, stroke) in [*STATUS_COLOURS.items(), ("", _OTHER_COLOURS)]:
        name = _mermaid_class(status)
        if name in by_class:
            out.append(f"  classDef {name} fill:{fill},stroke:{stroke},color:#111111")
            out.append(f"  class {','.join(by_class[name])} {name}")
    out.append(f"  classDef focus stroke:{_FOCUS_COLOUR},stroke-width:4px,font-weight:bold")
    out.append(f"  class {ids[graph.focus]} focus")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- HTML


def render_html(graph: LineageGraph) -> str:
    """One self-contained page (data, script and styles inline, nothing fetched) to open or
    attach offline; laid out in the browser. See `lineage_page`."""
    from dws_dagster.workspace.views.lineage_page import (
        render_page,  # only the HTML format pays for its imports
    )

    return render_page(graph)
