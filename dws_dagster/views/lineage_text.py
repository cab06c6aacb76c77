"""`dws-dagster lineage` as text with partitions grouped: the refs one step wrote (or one
folder of source data holds) on one line, with their count, labels, statuses and versions.

`render_report.render_text` is the same report with every node on its own line (`--expand`);
JSON, DOT, Mermaid and HTML always show every node.
"""

from __future__ import annotations

from dws_dagster.views.focus import (
    MAX_TEXT_DEPTH,
    TreeLine,
    all_nodes,
    last_run_rows,
    merged_edges,
    refs_overlap,
)
from dws_dagster.views.graph_model import GraphNode, LineageGraph
from dws_dagster.views.grouping import RefGroup, count_summary, group_refs
from dws_dagster.views.report import text_line

__all__ = ["grouped_text_lines", "render_grouped_text"]

GroupKey = tuple[str | None, ...]


class _Grouped:
    """The graph with each group of two refs or more as one vertex."""

    def __init__(self, graph: LineageGraph) -> None:
        self.nodes = all_nodes(graph)
        self.focus = graph.focus
        others = [node for node_id, node in self.nodes.items() if node_id != graph.focus]
        by_pair = group_refs((node.ref, node.step) for node in others)
        self.key: dict[str, GroupKey] = {graph.focus: ("node", graph.focus)}
        self.groups: dict[GroupKey, RefGroup] = {}
        self.members: dict[GroupKey, list[GraphNode]] = {
            ("node", graph.focus): [self.nodes[graph.focus]]
        }
        for node in others:
            group = by_pair[(node.ref, node.step)]
            key = group.key if len(group) > 1 else ("node", node.id)
            if len(group) > 1:
                self.groups[key] = group
            self.key[node.id] = key
            self.members.setdefault(key, []).append(node)
        edges = merged_edges(graph)
        self.up: dict[GroupKey, dict[GroupKey, bool]] = {}
        self.down: dict[GroupKey, dict[GroupKey, bool]] = {}
        for edge in edges:
            source, target = self.key[edge.source], self.key[edge.target]
            if source != target:
                self._link(self.up, target, source, edge.stale)
                self._link(self.down, source, target, edge.stale)
        # Readers of another version of the focus ref, or of a ref nested in or around it,
        # are downstream too (as `render_text` lists them).
        focus_ref = self.nodes[graph.focus].ref
        for edge in edges:
            node = self.nodes[edge.source]
            if (
                edge.source != graph.focus
                and refs_overlap(node.ref, focus_ref)
                and self.key[edge.target] != self.key[graph.focus]
            ):
                self._link(self.down, self.key[graph.focus], self.key[edge.target], edge.stale)

    @staticmethod
    def _link(
        table: dict[GroupKey, dict[GroupKey, bool]], here: GroupKey, there: GroupKey, stale: bool
    ) -> None:
        found = table.setdefault(here, {})
        found[there] = found.get(there, False) or stale

    def order(self, key: GroupKey) -> tuple[str, str]:
        group = self.groups.get(key)
        if group is not None:
            return group.root, group.refs[0]
        node = self.members[key][0]
        return node.ref, node.id

    def walk(self, upstream: bool) -> list[tuple[GroupKey, tuple[bool, ...], bool, bool]]:
        """Pre-order from the focus: (group, lasts, stale, repeated); a group met again is
        listed as repeated, not expanded."""
        table = self.up if upstream else self.down
        lines = []
        seen: set[GroupKey] = set()
        start = self.key[self.focus]
        stack: list[tuple[GroupKey, tuple[bool, ...], bool]] = [(start, (), False)]
        while stack:
            key, lasts, stale = stack.pop()
            repeated = key in seen
            lines.append((key, lasts, stale, repeated))
            if repeated:
                continue
            seen.add(key)
            children = sorted(table.get(key, {}).items(), key=lambda item: self.order(item[0]))
            for index in range(len(children) - 1, -1, -1):
                child, child_stale = children[index]
                stack.append((child, (*lasts, index == len(children) - 1), child_stale))
        return lines

    def line(self, key: GroupKey, lasts: tuple[bool, ...], stale: bool, repeated: bool) -> str:
        members = self.members[key]
        group = self.groups.get(key)
        if group is None:
            return text_line(members[0], TreeLine(members[0].id, lasts, stale, repeated))
        return group_line(group, members, stale=stale, repeated=repeated)


def group_line(
    group: RefGroup, members: list[GraphNode], *, stale: bool = False, repeated: bool = False
) -> str:
    """`root (N partitions first … last)  <- step  [all ok]`, with what is unusual about
    their versions: several of one ref, not current, none."""
    parts = [group.title()]
    if group.step is not None:
        parts.append(f"<- {group.step}")
    notes = [count_summary(node.status for node in members)]
    if len(members) > len(group):
        notes.append(f"{len(members)} versions")
    old = sum(1 for node in members if not node.current)
    if old:
        notes.append(f"{old} not current")
    unversioned = sum(1 for node in members if node.version is None)
    if unversioned:
        notes.append(f"{unversioned} without a version")
    parts.append(f"[{', '.join(notes)}]")
    text = "  ".join(parts)
    if stale:
        text += " (stale)"
    if repeated:
        text += " (see above)"
    return text


def _tree(grouped: _Grouped, upstream: bool) -> list[str]:
    lines = grouped.walk(upstream)
    if len(lines) <= 1:
        return ["  (none)"]
    out = []
    hidden = 0
    for key, lasts, stale, repeated in lines:
        if len(lasts) > MAX_TEXT_DEPTH:
            hidden += 1
            continue
        prefix = ""
        if lasts:
            prefix = "".join("    " if last else "│   " for last in lasts[:-1])
            prefix += "└── " if lasts[-1] else "├── "
        text = grouped.line(key, lasts, stale, repeated).replace("\n", " ")
        out.append(f"  {prefix}{text}")
    if hidden:
        out.append(
            f"  ... {hidden} more line(s) deeper than {MAX_TEXT_DEPTH} levels: see "
            "--expand, --format json or html"
        )
    return out


def render_grouped_text(graph: LineageGraph) -> str:
    """`render_report.render_text` with the refs one step wrote (or one folder holds) on one
    line."""
    return "\n".join(grouped_text_lines(graph)) + "\n"


def grouped_text_lines(graph: LineageGraph) -> list[str]:
    """`render_grouped_text` as its lines (each one line, whatever the data holds)."""
    grouped = _Grouped(graph)
    out: list[str] = []
    if graph.snapshot is not None:
        out += [f"Lineage from snapshot {graph.snapshot}", ""]
    out.append("Upstream")
    out += _tree(grouped, upstream=True)
    out += ["", "Downstream"]
    out += _tree(grouped, upstream=False)
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
    if grouped.groups:
        out += [
            "",
            "Partitions and files of one step or folder are on one line: --expand lists each.",
        ]
    return out
