"""Build the versioned lineage graph of a ref from current or snapshot lineage."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from dws_dagster.errors import NoLineageError
from dws_dagster.store.gc_pause import gc_paused
from dws_dagster.store.lineage_store import LineageStore
from dws_dagster.store.ref_state import RefState
from dws_dagster.store.upstream import LineageView
from dws_dagster.views.graph_model import GraphEdge, GraphNode, LastRun, LineageGraph
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.redaction import redact_text
from dws_dagster.workspace.refs import ResourceRef, as_ref


class SnapshotView:
    """The lineage as a snapshot manifest saved it; older versions come from the store."""

    def __init__(self, manifest: Mapping[str, Any], store: LineageStore | None = None) -> None:
        self.hash = str(manifest["hash"])
        self._refs = {ref: RefState.from_json(data) for ref, data in manifest["refs"].items()}
        self._store = store
        self._readers: dict[str, list[tuple[str, RefState, dict[str, str]]]] | None = None
        self._read_refs: list[str] = []

    def get(self, ref: ResourceRef | str) -> RefState | None:
        return self._refs.get(str(ref))

    def items(self) -> list[tuple[str, RefState]]:
        return sorted(self._refs.items())

    def find_record(self, ref: ResourceRef | str, version: str) -> dict[str, Any] | None:
        state = self._refs.get(str(ref))
        if state is not None and state.record is not None and state.version == version:
            return state.record
        return self._store.find_record(ref, version) if self._store is not None else None

    def readers(self, ref: str) -> list[tuple[str, RefState, dict[str, str]]]:
        if self._readers is None:
            self._readers = {}
            for other_ref, other_state in self._refs.items():
                for item in (other_state.record or {}).get("inputs", ()):
                    self._readers.setdefault(item["ref"], []).append((other_ref, other_state, item))
            self._read_refs = sorted(self._readers)
        return [
            reader
            for read_ref in _overlapping(ref, self._readers, self._read_refs)
            for reader in self._readers[read_ref]
        ]

    def ref_history(self, refs: Sequence[str], most: int) -> dict[str, list[dict[str, Any]]]:
        """The store's records of `refs` up to the ones the snapshot holds (by end time)."""
        found: dict[str, list[dict[str, Any]]] = {}
        if self._store is None:
            for ref in refs:
                state = self._refs.get(ref)
                found[ref] = (
                    [r for r in (state.attempt, state.record) if r is not None]
                    if state is not None
                    else []
                )
            return found
        later = 4 * most  # records after the snapshot are skipped: read enough to fill `most`
        for ref, records in self._store.ref_history(refs, most + later).items():
            state = self._refs.get(ref)
            newest = (state.latest or {}).get("end_time") if state is not None else None
            found[ref] = [
                r for r in records if newest is None or (r.get("end_time") or "") <= newest
            ][:most]
        return found


def _node(
    ref: str,
    version: str | None,
    record: dict[str, Any] | None,
    state: RefState | None,
    role: str | None,
    *,
    status: str | None = None,
) -> GraphNode:
    step = (record or {}).get("step") or {}
    kind = step.get("kind")
    if status is None:
        if record is None:
            status = "missing" if state is not None and state.owner is not None else "source"
        elif kind == "observation":
            status = "source"
        else:
            status = record.get("status", "ok")
    if state is not None and state.unknown and state.version == version:
        status = "unknown"
    return GraphNode(
        id=f"{ref}@{version}",
        ref=ref,
        version=version,
        step=None if kind in (None, "observation") else step.get("name"),
        status=status,
        current=state is None or state.version == version,
        role=role,
        run_id=step.get("run_id"),
        start_time=(record or {}).get("start_time"),
        end_time=(record or {}).get("end_time"),
    )


def build_graph(
    view: LineageView,
    ref: ResourceRef | str,
    roles: Mapping[str, str] | None = None,
    *,
    snapshot: str | None = None,
    max_nodes: int = 5000,
) -> LineageGraph:
    """Upstream and downstream lineage of `ref` in `view`, every node a ref@version."""
    with gc_paused():  # the readers index holds an entry per input of every ref
        return _build_graph(view, ref, roles or {}, snapshot, max_nodes)


def _build_graph(
    view: LineageView,
    ref: ResourceRef | str,
    roles: Mapping[str, str],
    snapshot: str | None,
    max_nodes: int,
) -> LineageGraph:
    key = str(as_ref(ref))
    state = view.get(key)
    role_of = lambda r: roles.get(r.split("/", 1)[0])  # noqa: E731
    if state is None or state.latest is None:
        # Source data steps read as found (never observed) has no lineage of its own: the
        # version the newest of its readers read, and what read it.
        readers = view.readers(key)
        read = [
            (reader_state.record or {}, item)
            for _, reader_state, item in readers
            if item["ref"] == key
        ]
        if not read:
            where = f" in snapshot {snapshot}" if snapshot else ""
            inside = sorted(
                {item["ref"] for _, _, item in readers if item["ref"].startswith(key + "/")}
            )
            if inside:
                raise NoLineageError(
                    f"ref {key} has no lineage of its own{where}: steps read {len(inside)} "
                    f"ref(s) inside it ({inside[0]}{', …' if len(inside) > 1 else ''}); "
                    "pass one of them (see 'dws-dagster status')"
                )
            raise NoLineageError(
                f"ref {key} has no lineage{where}: no step has written or read it; check the "
                "name with 'dws-dagster status'"
            )
        version = max(read, key=lambda pair: pair[0].get("end_time") or "")[1]["version"]
        focus_record: dict[str, Any] = {}
        focus = GraphNode(
            id=f"{key}@{version}", ref=key, version=version, status="source", role=role_of(key)
        )
    else:
        focus_record = state.record if state.record is not None else state.latest
        focus = _node(
            key,
            focus_record.get("version"),
            focus_record,
            state,
            role_of(key),
            status=state.status if state.status != "pending" else None,
        )
    graph = LineageGraph(
        focus=focus.id,
        nodes={focus.id: focus},
        snapshot=snapshot,
        records={focus.id: focus_record},
        load_history=view.ref_history,
    )
    if state is not None:
        _note_attempt(graph, key, state)
    edges: set[GraphEdge] = set()

    # Upstream: follow each record's inputs to the record that produced that version.
    pending = [(focus.id, focus_record)]
    while pending and len(graph.nodes) < max_nodes:
        node_id, record = pending.pop()
        for item in record.get("inputs", ()):
            in_ref, in_version = item["ref"], item["version"]
            in_state = view.get(in_ref)
            in_record = view.find_record(in_ref, in_version)
            in_node = _node(in_ref, in_version, in_record, in_state, role_of(in_ref))
            edges.add(GraphEdge(in_node.id, node_id, stale=not in_node.current))
            if in_node.id not in graph.nodes:
                graph.nodes[in_node.id] = in_node
                _note_attempt(graph, in_ref, in_state)
                if in_record is not None:
                    graph.records[in_node.id] = in_record
                    pending.append((in_node.id, in_record))

    # Downstream: current records that read this ref (or a ref overlapping it), recursively.
    frontier = [key]
    seen_refs = {key}
    while frontier and len(graph.nodes) < max_nodes:
        current_ref = frontier.pop()
        for out_ref, out_state, item in view.readers(current_ref):
            out_record = out_state.record
            assert out_record is not None
            read_ref = item["ref"]
            out_node = _node(
                out_ref, out_record.get("version"), out_record, out_state, role_of(out_ref)
            )
            if out_node.id not in graph.nodes:
                graph.nodes[out_node.id] = out_node
                graph.records[out_node.id] = out_record
                _note_attempt(graph, out_ref, out_state)
            source_id = f"{read_ref}@{item['version']}"
            if source_id not in graph.nodes:
                read_record = view.find_record(read_ref, item["version"])
                read_state = view.get(read_ref)
                graph.nodes[source_id] = _node(
                    read_ref, item["version"], read_record, read_state, role_of(read_ref)
                )
                if read_record is not None:
                    graph.records[source_id] = read_record
                _note_attempt(graph, read_ref, read_state)
            edges.add(GraphEdge(source_id, out_node.id, stale=not graph.nodes[source_id].current))
            if out_ref not in seen_refs:
                seen_refs.add(out_ref)
                frontier.append(out_ref)
    graph.edges = sorted(edges, key=lambda e: (e.source, e.target))
    graph.truncated = bool(pending or frontier)  # stopped at max_nodes with more to follow
    if state is None or state.latest is None:
        return graph  # never run: no step writes it
    latest = state.latest
    last = LineageRecord.from_json(latest)
    graph.last_run = LastRun(
        step=last.step_name if not last.is_observation else None,
        status=state.status,
        run_id=last.step.run_id if last.step else None,
        start_time=last.start_time,
        end_time=last.end_time,
        duration_seconds=last.duration_seconds,
        # Records stored before errors were redacted may still hold one.
        error=redact_text(last.error) if last.error else None,
    )
    return graph


def _note_attempt(graph: LineageGraph, ref: str, state: RefState | None) -> None:
    """Keep a ref's failed attempt (made after its current version) for the HTML page."""
    if state is not None and state.attempt is not None:
        graph.attempts[ref] = state.attempt


def _overlapping(ref: str, index: Mapping[str, Any], ordered: list[str]) -> list[str]:
    """Keys of `index` equal to `ref`, containing it, or inside it (`ordered` = sorted keys)."""
    parts = ref.split("/")
    found = [
        prefix
        for prefix in ("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        if prefix in index
    ]
    start = bisect.bisect_left(ordered, ref + "/")
    for candidate in ordered[start:]:
        if not candidate.startswith(ref + "/"):
            break
        found.append(candidate)
    return found
