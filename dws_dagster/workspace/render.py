"""Render a `LineageGraph` as text, JSON, Graphviz DOT, Mermaid or one offline HTML page.

Every function here is pure (graph in, string or dict out) so the CLI, the Dagster UI
integration and tests can share them without importing Dagster or Spark.
"""

from __future__ import annotations

import bisect
import html
from dataclasses import asdict, dataclass
from typing import Any

from .graph_model import GraphEdge, GraphNode, LastRun, LineageGraph

__all__ = [
    "layout_layers",
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


def _placeholder(node_id: str) -> GraphNode:
    """A node for an id the graph references but does not describe, so nothing is dropped."""
    ref, sep, version = node_id.rpartition("@")
    if not sep:
        ref, version = node_id, ""
    return GraphNode(id=node_id, ref=ref, version=version if version not in ("", "None") else None,
                     status="missing")


def _all_nodes(graph: LineageGraph) -> dict[str, GraphNode]:
    """The graph's nodes plus placeholders for the focus or edge ends it lacks, sorted by id."""
    nodes = dict(graph.nodes)
    ends = [end for edge in graph.edges for end in (edge.source, edge.target)]
    for node_id in [graph.focus, *ends]:
        if node_id not in nodes:
            nodes[node_id] = _placeholder(node_id)
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
        out.append(f"  ... {hidden} more node(s) deeper than {MAX_TEXT_DEPTH} levels: see "
                   "--format json or html")
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
        attrs = f' [style=dashed, color="{_STALE_COLOUR}"]' if edge.stale else ""
        out.append(f"  {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{attrs};")
    out.append("}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- Mermaid


def _mermaid_escape(text: str) -> str:
    """Text safe inside a Mermaid `"..."` label: entity codes for `#`, quotes and markup."""
    text = text.replace("#", "#35;")
    for raw, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("&", "#amp;"),
                      ("`", "#96;")):
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


# --------------------------------------------------------------------------- layout


def _back_edges(node_ids: list[str], edges: list[GraphEdge]) -> set[tuple[str, str]]:
    """Edges that close a cycle (DFS from sources first), so layering can ignore them."""
    succ: dict[str, list[str]] = {node_id: [] for node_id in node_ids}
    has_input: set[str] = set()
    for edge in edges:
        succ[edge.source].append(edge.target)
        has_input.add(edge.target)
    starts = [n for n in node_ids if n not in has_input] + [n for n in node_ids if n in has_input]
    state: dict[str, int] = {}  # 1 = on the DFS stack, 2 = finished
    back: set[tuple[str, str]] = set()
    for start in starts:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(succ[start]))]
        while stack:
            node_id, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node_id] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node_id, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(succ[child])))
    return back


@dataclass
class _Layout:
    """Layers of slots, top to bottom; an int slot is a waypoint of an edge spanning layers."""

    layer: dict[str, int]
    rows: list[list[str | int]]
    chains: dict[tuple[str, str], list[int]]
    back: set[tuple[str, str]]


def _crossings(rows: list[list[str | int]], links: list[tuple[str | int, str | int]]) -> int:
    """Edge crossings between neighbouring layers (every link joins adjacent layers)."""
    where = {slot: (number, index) for number, row in enumerate(rows)
             for index, slot in enumerate(row)}
    by_layer: dict[int, list[tuple[int, int]]] = {}
    for upper, lower in links:
        (number, up), (_, down) = where[upper], where[lower]
        by_layer.setdefault(number, []).append((up, down))
    total = 0
    for pairs in by_layer.values():
        seen: list[int] = []
        for _, down in sorted(pairs):
            total += len(seen) - bisect.bisect_right(seen, down)
            bisect.insort(seen, down)
    return total


def _layout(graph: LineageGraph) -> _Layout:
    """Longest-path layers, waypoints for long edges, then barycenter sweeps (best kept)."""
    node_ids = list(_all_nodes(graph))
    edges = [e for e in _edges(graph) if e.source != e.target]
    back = _back_edges(node_ids, edges)
    forward = [e for e in edges if (e.source, e.target) not in back]

    # Longest path from the sources over the acyclic edges, in Kahn order.
    succ: dict[str, list[str]] = {node_id: [] for node_id in node_ids}
    indegree = dict.fromkeys(node_ids, 0)
    for edge in forward:
        succ[edge.source].append(edge.target)
        indegree[edge.target] += 1
    layer = dict.fromkeys(node_ids, 0)
    ready = [node_id for node_id in node_ids if indegree[node_id] == 0]
    while ready:
        node_id = ready.pop()
        for child in succ[node_id]:
            layer[child] = max(layer[child], layer[node_id] + 1)
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)

    rows: list[list[str | int]] = [[] for _ in range(max(layer.values(), default=0) + 1)]
    for node_id in node_ids:  # sorted by id: a stable starting order
        rows[layer[node_id]].append(node_id)
    # A waypoint in every layer a long edge crosses, so ordering can keep it out of the way.
    slot_layer: dict[str | int, int] = dict(layer)
    chains: dict[tuple[str, str], list[int]] = {}
    links: list[tuple[str | int, str | int]] = []
    for edge in forward:
        previous: str | int = edge.source
        chain: list[int] = []
        for number in range(layer[edge.source] + 1, layer[edge.target]):
            waypoint = len(slot_layer)
            slot_layer[waypoint] = number
            rows[number].append(waypoint)
            chain.append(waypoint)
            links.append((previous, waypoint))
            previous = waypoint
        links.append((previous, edge.target))
        if chain:
            chains[(edge.source, edge.target)] = chain

    above: dict[str | int, list[str | int]] = {slot: [] for slot in slot_layer}
    below: dict[str | int, list[str | int]] = {slot: [] for slot in slot_layer}
    for upper, lower in links:
        below[upper].append(lower)
        above[lower].append(upper)

    # Slot positions centred on each layer's middle, so layers of different sizes line up.
    pos = {slot: index - (len(row) - 1) / 2 for row in rows for index, slot in enumerate(row)}

    def sweep(number: int, near: dict[str | int, list[str | int]]) -> None:
        def key(item: tuple[int, str | int]) -> tuple[float, int]:
            index, slot = item
            others = [pos[other] for other in near[slot]]
            return (sum(others) / len(others) if others else pos[slot], index)

        row = [slot for _, slot in sorted(enumerate(rows[number]), key=key)]
        rows[number] = row
        pos.update((slot, index - (len(row) - 1) / 2) for index, slot in enumerate(row))

    best, fewest = [list(row) for row in rows], _crossings(rows, links)
    for _ in range(4):
        for number in range(1, len(rows)):
            sweep(number, above)
        for number in range(len(rows) - 2, -1, -1):
            sweep(number, below)
        count = _crossings(rows, links)
        if count < fewest:
            best, fewest = [list(row) for row in rows], count
    return _Layout(layer, best, chains, back)


def layout_layers(graph: LineageGraph) -> dict[str, tuple[int, int]]:
    """`node id -> (layer, slot)` for a left-to-right drawing, as `render_html` draws it.

    The layer is the longest path from a node without inputs (edges closing a cycle are
    ignored), so every input sits left of what was made from it. The slot orders a layer top
    to bottom after barycenter sweeps that cut crossings; slots held by edges passing through
    a layer are left out, so a layer's slots can have gaps.
    """
    layout = _layout(graph)
    return {slot: (number, index) for number, row in enumerate(layout.rows)
            for index, slot in enumerate(row) if isinstance(slot, str)}


# --------------------------------------------------------------------------- HTML

_MARGIN = 24
_GAP_X = 90
_GAP_Y = 26
_LINE_HEIGHT = 16
_CHAR_WIDTH = 7.4  # 12px monospace, a little generous
_MAX_CHARS = 40
_BACK_LANE = 70  # room below the boxes for edges that close a cycle

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px;
       color: #1b1b1b; background: #ffffff; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.1em; margin-top: 1.6em; }
.snapshot { color: #555555; margin-top: 0; }
.drawing { overflow-x: auto; border: 1px solid #dddddd; border-radius: 6px; padding: 8px; }
svg text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
           font-size: 12px; fill: #1b1b1b; }
svg text .ref { font-weight: bold; }
.edge { fill: none; stroke: #555555; stroke-width: 1.4; }
.edge.stale { stroke: #b26a00; stroke-dasharray: 6 4; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #dddddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
td.version { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
tr.focus td { font-weight: bold; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid;
          border-radius: 3px; vertical-align: middle; margin: 0 4px 0 12px; }
dl { display: grid; grid-template-columns: max-content auto; gap: 4px 16px; }
dt { font-weight: bold; }
dd { margin: 0; white-space: pre-wrap; }
"""


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fit(text: str) -> str:
    text = text.replace("\r", " ").replace("\n", " ")
    return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 1] + "…"


def _tooltip(node: GraphNode) -> str:
    rows = [node.id, f"version: {node.version or '-'}", f"step: {node.step or '-'}",
            f"status: {node.status}" + ("" if node.current else " (not current)")]
    if node.run_id:
        rows.append(f"run: {node.run_id}")
    return "\n".join(rows)


@dataclass(frozen=True)
class _Box:
    x: float
    y: float
    width: float
    height: float


def _svg(graph: LineageGraph, nodes: dict[str, GraphNode]) -> str:
    """The drawing: boxes placed as `layout_layers` says, edges as Bézier paths with arrowheads."""
    layout = _layout(graph)
    edges = _edges(graph)
    labels = {node_id: [_fit(line) for line in _label_lines(node)]
              for node_id, node in nodes.items()}
    longest = max((len(line) for lines in labels.values() for line in lines), default=10)
    box_w = max(150.0, longest * _CHAR_WIDTH + 24)
    box_h = float(4 * _LINE_HEIGHT + 14)
    tallest = max((len(row) for row in layout.rows), default=1)
    slots: dict[str | int, _Box] = {}
    for number, row in enumerate(layout.rows):
        offset = (tallest - len(row)) * (box_h + _GAP_Y) / 2
        for index, slot in enumerate(row):
            slots[slot] = _Box(_MARGIN + number * (box_w + _GAP_X),
                               _MARGIN + offset + index * (box_h + _GAP_Y), box_w, box_h)
    layer_count = len(layout.rows)
    bottom = _MARGIN + tallest * (box_h + _GAP_Y) - _GAP_Y
    width = _MARGIN * 2 + layer_count * box_w + (layer_count - 1) * _GAP_X
    loops = layout.back or any(edge.source == edge.target for edge in edges)
    height = bottom + _MARGIN + (_BACK_LANE if loops else 0)

    out = [
        f'<svg class="lineage" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'aria-label="{_esc("Lineage graph of " + graph.focus)}">',
        "<defs>",
    ]
    for marker, colour in (("arrow", _EDGE_COLOUR), ("arrow-stale", _STALE_COLOUR)):
        out.append(f'<marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" '
                   f'markerWidth="8" markerHeight="8" orient="auto">'
                   f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>')
    out.append("</defs>")

    for edge in edges:
        src, dst = slots[edge.source], slots[edge.target]
        if edge.source == edge.target:
            x1, x2, y = src.x + src.width * 0.65, src.x + src.width * 0.35, src.y + src.height
            d = f"M{x1:.1f},{y:.1f} C{x1:.1f},{y + 40:.1f} {x2:.1f},{y + 40:.1f} {x2:.1f},{y:.1f}"
        elif (edge.source, edge.target) in layout.back:
            # Closes a cycle: run below every box and come back up into the target.
            x1, y1 = src.x + src.width / 2, src.y + src.height
            x2, y2 = dst.x + dst.width / 2, dst.y + dst.height
            lane = bottom + _BACK_LANE - 12
            d = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{lane:.1f} {x2:.1f},{lane:.1f} {x2:.1f},{y2:.1f}"
        else:
            # Left to right, through the gaps its waypoints hold in the layers it crosses.
            x, y = src.x + src.width, src.y + src.height / 2
            d = f"M{x:.1f},{y:.1f}"
            for waypoint in [*layout.chains.get((edge.source, edge.target), []), edge.target]:
                box = slots[waypoint]
                nx, ny = box.x, box.y + box.height / 2
                bend = (nx - x) / 2
                d += f" C{x + bend:.1f},{y:.1f} {nx - bend:.1f},{ny:.1f} {nx:.1f},{ny:.1f}"
                x, y = box.x + box.width, ny
                if waypoint != edge.target:
                    d += f" L{x:.1f},{y:.1f}"
        kind = "edge stale" if edge.stale else "edge"
        marker = "arrow-stale" if edge.stale else "arrow"
        title = f"{edge.source} -> {edge.target}" + (" (stale input)" if edge.stale else "")
        out.append(f'<path class="{kind}" d="{d}" marker-end="url(#{marker})">'
                   f"<title>{_esc(title)}</title></path>")

    for node_id, node in nodes.items():
        box = slots[node_id]
        fill, stroke = _colours(node.status)
        focus = node_id == graph.focus
        css = "node-box focus" if focus else "node-box"
        stroke_attrs = (f'stroke="{_FOCUS_COLOUR}" stroke-width="3.5"' if focus
                        else f'stroke="{stroke}" stroke-width="1.5"')
        out.append(f'<g class="node status-{_esc(node.status)}" data-id="{_esc(node_id)}">')
        out.append(f"<title>{_esc(_tooltip(node))}</title>")
        out.append(f'<rect class="{css}" x="{box.x:.1f}" y="{box.y:.1f}" '
                   f'width="{box.width:.1f}" height="{box.height:.1f}" rx="8" ry="8" '
                   f'fill="{fill}" {stroke_attrs}/>')
        first = box.y + 7 + _LINE_HEIGHT - 3
        for index, line in enumerate(labels[node_id]):
            css_class = ' class="ref"' if index == 0 else ""
            out.append(f'<text x="{box.x + 12:.1f}" y="{first + index * _LINE_HEIGHT:.1f}">'
                       f"<tspan{css_class}>{_esc(line)}</tspan></text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _table(graph: LineageGraph, nodes: dict[str, GraphNode]) -> str:
    head = ("Ref", "Version", "Step", "Status", "Current", "Run id", "Started", "Finished")
    out = ['<table class="nodes">', "<thead><tr>"]
    out += [f"<th>{_esc(name)}</th>" for name in head]
    out.append("</tr></thead><tbody>")
    for node_id, node in nodes.items():
        row = ' class="focus"' if node_id == graph.focus else ""
        cells = [
            f"<td>{_esc(node.ref)}</td>",
            f'<td class="version">{_esc(node.version or "-")}</td>',
            f"<td>{_esc(node.step or '-')}</td>",
            f"<td>{_esc(node.status)}</td>",
            f"<td>{'yes' if node.current else 'no'}</td>",
            f"<td>{_esc(node.run_id or '-')}</td>",
            f"<td>{_esc(node.start_time or '-')}</td>",
            f"<td>{_esc(node.end_time or '-')}</td>",
        ]
        out.append(f"<tr{row}>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _legend() -> str:
    items = [f'<span class="swatch" style="background:{fill};border-color:{stroke}"></span>'
             f"{_esc(status)}" for status, (fill, stroke) in STATUS_COLOURS.items()]
    items.append(f'<span class="swatch" style="background:#ffffff;border-color:{_FOCUS_COLOUR};'
                 'border-width:3px"></span>focus')
    items.append(f'<span style="color:{_STALE_COLOUR};margin-left:12px">- - -&gt;</span> '
                 "stale input")
    return f'<p class="legend">{"".join(items)}</p>'


def render_html(graph: LineageGraph) -> str:
    """One self-contained page (inline CSS and SVG, nothing fetched) to open or attach offline."""
    nodes = _all_nodes(graph)
    title = f"Lineage of {nodes[graph.focus].ref}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{_esc(title)}</h1>",
    ]
    if graph.snapshot is not None:
        out.append(f'<p class="snapshot">From snapshot {_esc(graph.snapshot)}</p>')
    out.append(f'<p class="snapshot">Focus: <code>{_esc(graph.focus)}</code></p>')
    out.append(_legend())
    out.append(f'<div class="drawing">\n{_svg(graph, nodes)}\n</div>')
    out.append("<h2>Versions</h2>")
    out.append(_table(graph, nodes))
    out.append("<h2>Last run</h2>")
    if graph.last_run is None:
        out.append("<p>(never run)</p>")
    else:
        out.append('<dl class="last-run">')
        out += [f"<dt>{_esc(name)}</dt><dd>{_esc(value)}</dd>"
                for name, value in _last_run_rows(graph.last_run)]
        out.append("</dl>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
