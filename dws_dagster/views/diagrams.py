"""Drawings of the lineage graph: Graphviz DOT (`render_dot`), a Mermaid flowchart
(`render_mermaid`) and the offline HTML page (`render_html`, laid out in the browser by
`lineage_page`). Every box shows the same label and status colour.

Pure (graph in, string out), importing only the stdlib and workspace modules free of Dagster
and Spark; the page module is imported only when a page is rendered.
"""

from __future__ import annotations

from dws_dagster.views.focus import all_nodes, merged_edges
from dws_dagster.views.graph_model import GraphNode, LineageGraph
from dws_dagster.workspace.versions import short

__all__ = ["render_dot", "render_html", "render_mermaid"]

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


def _version_label(node: GraphNode) -> str:
    return f"@{short(node.version)}" if node.version is not None else "(no version)"


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


def _dot_quote(text: str) -> str:
    """A DOT double-quoted string: backslash and quote escaped, newlines as `\\n` line breaks."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{text}"'


def render_dot(graph: LineageGraph) -> str:
    """Graphviz source, for `dot -Tsvg` or any tool that reads DOT."""
    nodes = all_nodes(graph)
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
    for edge in merged_edges(graph):
        style = f' [style=dashed, color="{_STALE_COLOUR}"]' if edge.stale else ""
        out.append(f"  {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{style};")
    out.append("}")
    return "\n".join(out) + "\n"


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
    nodes = all_nodes(graph)
    ids = {node_id: f"n{index}" for index, node_id in enumerate(nodes)}
    out = ["flowchart LR"]
    for node_id, node in nodes.items():
        label = "<br/>".join(_mermaid_escape(line) for line in _label_lines(node))
        out.append(f'  {ids[node_id]}["{label}"]')
    for edge in merged_edges(graph):
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


def render_html(graph: LineageGraph) -> str:
    """One self-contained page (data, script and styles inline, nothing fetched) to open or
    attach offline; laid out in the browser. See `lineage_page`."""
    from dws_dagster.views.page.document import (
        render_page,  # only the HTML format pays for its imports
    )

    return render_page(graph)
