"""The versioned lineage graph around one ref, as the `lineage` command shows it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GraphNode:
    """One version of one ref: `id` is `ref@version`.

    `status` is `ok`, `failed`, `unknown` (data may be partial), `source` (no step wrote this
    version: data landed from outside or observed) or `missing` (a version some step read that
    no record describes any more). `current` is False for a version that is no longer the ref's
    current one (a stale input).
    """

    id: str
    ref: str
    version: str | None
    step: str | None = None
    status: str = "ok"
    current: bool = True
    role: str | None = None
    run_id: str | None = None
    start_time: str | None = None
    end_time: str | None = None


@dataclass(frozen=True)
class GraphEdge:
    """`source` (an input version) was read by the step that produced `target`."""

    source: str
    target: str
    #: True when the input version read is no longer the input ref's current version.
    stale: bool = False


@dataclass
class LastRun:
    step: str | None
    status: str
    run_id: str | None
    start_time: str | None
    end_time: str | None
    duration_seconds: float | None
    error: str | None = None


#: `LineageGraph.load_history`: (refs, most per ref) -> ref -> its records, newest first.
HistoryLoader = Callable[[Sequence[str], int], dict[str, list[dict[str, Any]]]]


@dataclass
class LineageGraph:
    """Nodes and edges upstream and downstream of `focus` (a node id).

    `records` (node id -> the lineage record that produced it), `attempts` (ref -> a failed
    attempt made after its current version) and `load_history` (older records of a ref, read
    when asked) are what the HTML page shows beyond the drawing: parameters, metrics, code
    versions, partitions, column lineage and history. The text, JSON, DOT and Mermaid
    renderers do not read them; a graph built by hand may leave them empty.
    """

    focus: str
    nodes: dict[str, GraphNode] = field(default_factory=dict)
    edges: list[GraphEdge] = field(default_factory=list)
    last_run: LastRun | None = None
    snapshot: str | None = None
    records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    attempts: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    load_history: HistoryLoader | None = field(default=None, repr=False, compare=False)
    #: True when the graph stopped growing at `build_graph`'s `max_nodes`.
    truncated: bool = False
    #: The newest replay of `snapshot` (a checked `replay_record` document), whose verdicts
    #: the page draws on the nodes of the refs it replayed; None when never replayed.
    replay: dict[str, Any] | None = field(default=None, repr=False)

    def with_placeholders(self) -> dict[str, GraphNode]:
        """The nodes, plus a placeholder (status "missing") for each id the focus or an edge
        names but no node describes, so no renderer drops one; in the graph's own order."""
        nodes = dict(self.nodes)
        for node_id in [self.focus, *(end for e in self.edges for end in (e.source, e.target))]:
            if node_id not in nodes:
                nodes[node_id] = _placeholder(node_id)
        return nodes


def _placeholder(node_id: str) -> GraphNode:
    ref, sep, version = node_id.rpartition("@")
    if not sep:
        ref, version = node_id, ""
    return GraphNode(
        id=node_id,
        ref=ref,
        version=version if version not in ("", "None") else None,
        status="missing",
    )
