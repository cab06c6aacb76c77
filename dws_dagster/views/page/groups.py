"""The lineage page's nodes: the graph's ref@version nodes grouped as a person reads them,
one node per asset or step with its partitions (or versions), and each member's display status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dws_dagster.views.graph_model import GraphNode, LineageGraph

#: Display statuses of a partition or version, in the order the status bar draws them.
STATUSES = ("ok", "failed", "unknown", "stale", "source", "missing", "other")
STATUS_INDEX = {name: index for index, name in enumerate(STATUSES)}

_NO_STEP: Mapping[str, Any] = {}


@dataclass
class Member:
    """One node of the graph inside a group: a partition, a version, or a file."""

    node: GraphNode
    record: dict[str, Any] | None
    key: str
    status: str


@dataclass
class Group:
    """One node of the page: an asset's partitions, a step's outputs, a source asset or a
    folder of source files, with the graph nodes it stands for."""

    key: tuple[str, ...]
    kind: str
    name: str
    step: str | None
    members: list[Member] = field(default_factory=list)
    index: int = -1
    ref: str = ""


def step_of(record: Mapping[str, Any] | None) -> Mapping[str, Any]:
    step = record.get("step") if record is not None else None
    return step if type(step) is dict else _NO_STEP


def parent_ref(ref: str) -> str | None:
    head, sep, _ = ref.rpartition("/")
    return head if sep else None


def _common_ref(refs: Iterable[str]) -> str:
    """The longest common prefix of `refs`, by path segments."""
    parts: list[str] | None = None
    for ref in refs:
        segments = ref.split("/")
        if parts is None:
            parts = segments
            continue
        size = 0
        for mine, theirs in zip(parts, segments, strict=False):
            if mine != theirs:
                break
            size += 1
        parts = parts[:size]
    return "/".join(parts or [])


def _display_status(node: GraphNode, attempts: Mapping[str, Any]) -> str:
    if not node.current:
        return "stale"
    if node.status == "ok" and node.ref in attempts:
        return "failed"  # its last good version stands; the latest run of it failed
    return node.status if node.status in STATUS_INDEX else "other"


def group_nodes(graph: LineageGraph, nodes: dict[str, GraphNode]) -> list[Group]:
    """One group per asset (its partitions), per script step output, per source asset, and
    per folder of source files read by the same nodes; every version of a ref in the group
    of that ref."""
    groups: dict[tuple[str, ...], Group] = {}
    by_ref: dict[str, tuple[str, ...]] = {}
    assigned: dict[str, tuple[str, ...]] = {}
    pending: list[GraphNode] = []

    def join(key: tuple[str, ...], kind: str, name: str, step: str | None, node: GraphNode) -> None:
        if key not in groups:
            groups[key] = Group(key=key, kind=kind, name=name, step=step)
        assigned[node.id] = key
        by_ref.setdefault(node.ref, key)

    for node_id in sorted(nodes):
        node = nodes[node_id]
        record = graph.records.get(node_id)
        step = step_of(record)
        kind, name = step.get("kind"), step.get("name")
        extra = (record or {}).get("extra")
        source_asset = extra.get("asset") if isinstance(extra, Mapping) else None
        if isinstance(name, str) and kind not in (None, "observation"):
            if kind == "dagster-asset":
                join(("asset", name), "asset", name, name, node)
            else:
                join(("step", name, node.ref), "step", node.ref, name, node)
        elif isinstance(source_asset, str) and source_asset:
            join(("asset", source_asset), "source", source_asset, None, node)
        elif node.step is not None:  # a graph built without records
            join(("step", node.step, node.ref), "step", node.ref, node.step, node)
        else:
            pending.append(node)

    # Nodes without a step of their own join the group of their ref if it has one; else
    # the files of one folder that the same groups read are one group (a day's weather file
    # per partition, say), every version of a ref with it.
    readers: dict[str, set[str]] = {}
    for edge in graph.edges:
        readers.setdefault(edge.source, set()).add(edge.target)
    loose: dict[str, list[GraphNode]] = {}
    for node in pending:
        if node.ref in by_ref:
            assigned[node.id] = by_ref[node.ref]
        else:
            loose.setdefault(node.ref, []).append(node)
    clusters: dict[tuple[str, ...], list[str]] = {}
    for ref, versions in loose.items():
        parent = parent_ref(ref)
        if parent is None or any(node.id == graph.focus for node in versions):
            clusters[("ref", ref)] = [ref]
            continue
        read_by = sorted(
            {
                "/".join(assigned.get(target, ("node", target)))
                for node in versions
                for target in readers.get(node.id, ())
            }
        )
        clusters.setdefault(("files", parent, *read_by), []).append(ref)
    for key, refs in clusters.items():
        if len(refs) == 1:
            key = ("ref", refs[0])
        kind = "files" if key[0] == "files" else "ref"
        if key not in groups:
            groups[key] = Group(
                key=key, kind=kind, name=key[1] + "/" if kind == "files" else key[1], step=None
            )
        for ref in refs:
            for node in loose[ref]:
                assigned[node.id] = key

    for node_id in sorted(nodes):
        node = nodes[node_id]
        record = graph.records.get(node_id)
        groups[assigned[node_id]].members.append(
            Member(node=node, record=record, key="", status=_display_status(node, graph.attempts))
        )
    ordered = sorted(groups.values(), key=lambda g: g.key)
    for index, group in enumerate(ordered):
        group.index = index
        refs = sorted({m.node.ref for m in group.members})
        group.ref = refs[0] if len(refs) == 1 else _common_ref(refs)
        for member in group.members:
            partition = step_of(member.record).get("partition")
            if isinstance(partition, str) and partition:
                member.key = partition
            elif len(refs) > 1:
                member.key = member.node.ref[len(group.ref) :].lstrip("/") or member.node.ref
            else:
                member.key = member.node.version or "(no version)"
        group.members.sort(key=lambda m: (m.key, not m.node.current, m.node.id))
    return ordered
