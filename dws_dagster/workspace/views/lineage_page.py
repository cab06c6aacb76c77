"""The HTML lineage page: one self-contained file (`dws-dagster lineage REF --format html`,
the demo's `lineage.html`) that lays the graph out in the browser.

`page_data(graph)` turns a `LineageGraph` (one node per ref@version) into what a person
reads: one node per asset or step, its partitions (or versions) grouped with a count, the
range of their keys and their statuses; edges between those nodes with how many inputs each
stands for; every node's details (version, parameters, metrics, code version, last run,
history); and column-level lineage from the records' `extra.column_lineage` (the shape of
the IO manager's `dws/column_lineage` metadata). `render_page(graph)` embeds that as JSON in
a `<script type="application/json">` element, escaped so no value can close it, with the
page's script and styles (`page_assets/`) and the vendored dagre layout library
(`_vendor/dagre.min.js`, MIT) inlined: nothing is fetched when the page is viewed.

Pure functions of the graph, like the other renderers: no Dagster, no Spark.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import html
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import orjson

from dws_dagster.errors import DwsError
from dws_dagster.workspace.records import COLUMN_LINEAGE_KEY
from dws_dagster.workspace.redaction import redact_text
from dws_dagster.workspace.views.graph_model import GraphNode, LineageGraph

__all__ = ["COLUMN_LINEAGE_KEY", "PAGE_FORMAT", "page_data", "render_page"]

#: Version of the embedded JSON's layout, for tools that read it out of a page.
PAGE_FORMAT = 1
#: Display statuses of a partition or version, in the order the status bar draws them.
STATUSES = ("ok", "failed", "unknown", "stale", "source", "missing", "other")
_STATUS_INDEX = {name: index for index, name in enumerate(STATUSES)}
#: Worst first: the status a node with members of several statuses is drawn with.
_SEVERITY = ("failed", "unknown", "missing", "stale", "other", "ok", "source")
#: Older records listed per node (a ref's own history; partitioned nodes list their runs).
HISTORY_PER_NODE = 20
#: Refs whose history is read from the store for one page (the rest show what the graph has).
HISTORY_REFS = 500
#: Runs listed in the history of a partitioned node.
HISTORY_RUNS = 30
#: Distinct values listed for what varies across a node's members (code versions, commits).
DISTINCT_SHOWN = 8
#: Column sources outside the graph (files no step wrote, refs not drawn) listed per node.
EXTERNAL_SHOWN = 200

_NO_STEP: Mapping[str, Any] = {}
_ASSETS = "page_assets"
_VENDOR = "_vendor"


class PageAssetError(DwsError):
    """A file the page inlines is missing from the installation, or could end the element
    it is inlined in (a packaging fault)."""


# --------------------------------------------------------------------------- grouping


@dataclass
class _Member:
    """One node of the graph inside a group: a partition, a version, or a file."""

    node: GraphNode
    record: dict[str, Any] | None
    key: str
    status: str


@dataclass
class _Group:
    key: tuple[str, ...]
    kind: str
    name: str
    step: str | None
    members: list[_Member] = field(default_factory=list)
    index: int = -1
    ref: str = ""


def _step(record: Mapping[str, Any] | None) -> Mapping[str, Any]:
    step = record.get("step") if record is not None else None
    return step if type(step) is dict else _NO_STEP


def _parent(ref: str) -> str | None:
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
    return node.status if node.status in _STATUS_INDEX else "other"


def _group_nodes(graph: LineageGraph, nodes: dict[str, GraphNode]) -> list[_Group]:
    """One group per asset (its partitions), per script step output, per source asset, and
    per folder of source files read by the same nodes; every version of a ref in the group
    of that ref."""
    groups: dict[tuple[str, ...], _Group] = {}
    by_ref: dict[str, tuple[str, ...]] = {}
    assigned: dict[str, tuple[str, ...]] = {}
    pending: list[GraphNode] = []

    def join(key: tuple[str, ...], kind: str, name: str, step: str | None, node: GraphNode) -> None:
        if key not in groups:
            groups[key] = _Group(key=key, kind=kind, name=name, step=step)
        assigned[node.id] = key
        by_ref.setdefault(node.ref, key)

    for node_id in sorted(nodes):
        node = nodes[node_id]
        record = graph.records.get(node_id)
        step = _step(record)
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
        parent = _parent(ref)
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
            groups[key] = _Group(
                key=key, kind=kind, name=key[1] + "/" if kind == "files" else key[1], step=None
            )
        for ref in refs:
            for node in loose[ref]:
                assigned[node.id] = key

    for node_id in sorted(nodes):
        node = nodes[node_id]
        record = graph.records.get(node_id)
        groups[assigned[node_id]].members.append(
            _Member(node=node, record=record, key="", status=_display_status(node, graph.attempts))
        )
    ordered = sorted(groups.values(), key=lambda g: g.key)
    for index, group in enumerate(ordered):
        group.index = index
        refs = sorted({m.node.ref for m in group.members})
        group.ref = refs[0] if len(refs) == 1 else _common_ref(refs)
        for member in group.members:
            partition = _step(member.record).get("partition")
            if isinstance(partition, str) and partition:
                member.key = partition
            elif len(refs) > 1:
                member.key = member.node.ref[len(group.ref) :].lstrip("/") or member.node.ref
            else:
                member.key = member.node.version or "(no version)"
        group.members.sort(key=lambda m: (m.key, not m.node.current, m.node.id))
    return ordered


# --------------------------------------------------------------------------- details


def _duration(record: Mapping[str, Any]) -> float | None:
    start, end = record.get("start_time"), record.get("end_time")
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    try:
        return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return None


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _run_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the page shows of one run of a node: a record, good or failed."""
    step = _step(record)
    error = record.get("error")
    return {
        "version": record.get("version"),
        "status": record.get("status", "ok"),
        "step": step.get("name") if step.get("kind") != "observation" else None,
        "run_id": step.get("run_id"),
        "partition": step.get("partition"),
        "code_version": step.get("code_version"),
        "git_commit": step.get("git_commit"),
        "start_time": record.get("start_time"),
        "end_time": record.get("end_time"),
        "duration_seconds": _duration(record),
        "parameters": _mapping(record.get("parameters")),
        "metrics": record.get("metrics") if isinstance(record.get("metrics"), Mapping) else None,
        # Records stored before errors were redacted may still hold a secret.
        "error": redact_text(str(error)) if error else None,
    }


def _when(record: Mapping[str, Any]) -> str:
    value = record.get("end_time") or record.get("start_time")
    return value if isinstance(value, str) else ""


def _details(group: _Group, graph: LineageGraph, focus: bool) -> dict[str, Any]:
    """Version, step, code, parameters, metrics and data figures of a group, from the record
    of its focus member (on the focus node) or else its most recent current member."""
    current = [m for m in group.members if m.node.current] or group.members
    main = next((m for m in group.members if m.node.id == graph.focus), None) if focus else None
    if main is None:
        main = max(current, key=lambda m: (_when(m.record or {}), m.key))
    record = main.record or {}
    step = _step(record)
    details: dict[str, Any] = {
        "member": group.members.index(main),
        "version": main.node.version,
        "status": main.status,
        "step": group.step or main.node.step,
        "role": main.node.role,
        "run_id": step.get("run_id") or main.node.run_id,
        "start_time": record.get("start_time") or main.node.start_time,
        "end_time": record.get("end_time") or main.node.end_time,
        "metrics": record.get("metrics") if isinstance(record.get("metrics"), Mapping) else None,
    }
    records = [m.record for m in current if m.record is not None]
    extras = [e for e in (r.get("extra") for r in records) if isinstance(e, Mapping)]
    formats = Counter(str(e["format"]) for e in extras if e.get("format"))
    if formats:
        details["format"] = ", ".join(sorted(formats))
    rows = [e["rows"] for e in extras if isinstance(e.get("rows"), int)]
    if rows:
        details["rows"] = sum(rows)
        details["rows_of"] = len(rows)
    for name, key in (("code_versions", "code_version"), ("git_commits", "git_commit")):
        seen = Counter(str(_step(r)[key]) for r in records if _step(r).get(key))
        if seen:
            details[name] = dict(seen.most_common(DISTINCT_SHOWN))
            details[name + "_more"] = max(0, len(seen) - DISTINCT_SHOWN)
    # Parameters every member shares are shown once; the names of the others are listed.
    common: dict[str, Any] | None = None
    varying: set[str] = set()
    for rec in records:
        params = _mapping(rec.get("parameters"))
        if common is None:
            common = params
            continue
        for name in set(common) | set(params):
            if name in varying:
                continue
            if name not in common or name not in params or common[name] != params[name]:
                varying.add(name)
        common = {k: v for k, v in common.items() if k not in varying}
    details["parameters"] = common or {}
    details["varying"] = sorted(varying)
    return details


def _last_run(group: _Group, graph: LineageGraph, focus: bool) -> dict[str, Any] | None:
    """The most recent run of any member (a failed attempt included), with its parameters
    and metrics; on the focus node, the run `graph.last_run` describes."""
    candidates: list[Mapping[str, Any]] = [
        m.record for m in group.members if m.record is not None and m.node.current
    ]
    refs = {m.node.ref for m in group.members}
    candidates += [graph.attempts[ref] for ref in sorted(refs) if ref in graph.attempts]
    if not candidates:
        candidates = [m.record for m in group.members if m.record is not None]
    if not candidates and not (focus and graph.last_run is not None):
        return None
    entry = _run_entry(max(candidates, key=_when) if candidates else {})
    entry["runs"] = len(candidates)
    if focus and graph.last_run is not None:
        last = graph.last_run
        entry.update(
            step=last.step,
            status=last.status,
            run_id=last.run_id,
            start_time=last.start_time,
            end_time=last.end_time,
            duration_seconds=last.duration_seconds,
            error=redact_text(last.error) if last.error else None,
        )
    return entry


def _history(
    group: _Group, graph: LineageGraph, stored: Mapping[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Earlier runs: a ref's own records (the store's, else the versions in the graph), or
    for a node of many partitions or files, the runs that made them."""
    refs = sorted({m.node.ref for m in group.members})
    if len(refs) == 1:
        records = list(stored.get(refs[0], ()))
        if not records:
            records = [m.record for m in group.members if m.record is not None]
            if refs[0] in graph.attempts:
                records.append(graph.attempts[refs[0]])
            records.sort(key=_when, reverse=True)
        current = {m.node.version for m in group.members if m.node.current}
        seen: set[tuple[Any, ...]] = set()
        out = []
        for record in records:
            step = _step(record)
            key = (record.get("version"), step.get("run_id"), record.get("status"))
            if key in seen:
                continue  # the same run recorded again (enriched with its metrics)
            seen.add(key)
            entry = _run_entry(record)
            entry["current"] = (
                record.get("version") in current and record.get("status", "ok") == "ok"
            )
            out.append(entry)
        return out[:HISTORY_PER_NODE]
    runs: dict[str, dict[str, Any]] = {}
    made: list[tuple[str, dict[str, Any]]] = [
        (m.key, m.record) for m in group.members if m.record is not None
    ]
    made += [
        (str(_step(a).get("partition") or ref), a)
        for ref, a in sorted(graph.attempts.items())
        if ref in set(refs)
    ]
    for where, made_by in made:
        step = _step(made_by)
        run_key = str(step.get("run_id") or "")
        status = str(made_by.get("status", "ok"))
        run = runs.setdefault(
            run_key + "\0" + status,
            {
                "run_id": step.get("run_id"),
                "status": status,
                "count": 0,
                "first": where,
                "last": where,
                "end_time": _when(made_by),
                "start_time": made_by.get("start_time"),
            },
        )
        run["count"] += 1
        run["first"] = min(run["first"], where)
        run["last"] = max(run["last"], where)
        run["end_time"] = max(run["end_time"], _when(made_by))
    return sorted(runs.values(), key=lambda e: e["end_time"], reverse=True)[:HISTORY_RUNS]


# --------------------------------------------------------------------------- column lineage


class _RefIndex:
    """Which group a ref named by column lineage belongs to: the group of that ref, else of
    the refs inside it (a step that read a whole partitioned folder) when they are all in
    one group, else of the nearest ref around it."""

    def __init__(self, groups: list[_Group]) -> None:
        self._exact: dict[str, int] = {}
        for group in groups:
            for member in group.members:
                self._exact.setdefault(member.node.ref, group.index)
        self._sorted = sorted(self._exact)
        self._memo: dict[str, int | None] = {}

    def find(self, ref: str) -> int | None:
        if ref in self._memo:
            return self._memo[ref]
        found = self._exact.get(ref)
        if found is None:
            start = bisect.bisect_left(self._sorted, ref + "/")
            end = bisect.bisect_left(self._sorted, ref + "0")  # "0" sorts right after "/"
            inside = {self._exact[other] for other in self._sorted[start:end]}
            if len(inside) == 1:
                found = inside.pop()
            parent = _parent(ref)
            while found is None and not inside and parent is not None:
                found = self._exact.get(parent)
                parent = _parent(parent)
        self._memo[ref] = found
        return found


def _column_lineage(
    groups: list[_Group],
) -> tuple[list[list[Any]], dict[int, list[str]], dict[int, list[Any]]]:
    """Edges (source group, column, target group, column or None for the whole table, kind,
    subtype), every group's columns (sorted: stored records keep no schema order), and
    sources no group holds.

    Records are untrusted: anything not shaped like the IO manager's description is skipped.
    The partitions of an asset repeat the same lineage, so the sources are first collected
    as they are written (a set per node, cheap type checks only), then each distinct one is
    resolved to its node once."""
    index = _RefIndex(groups)
    edges: dict[tuple[Any, ...], None] = {}
    columns: dict[int, dict[str, None]] = {}
    external: dict[int, dict[tuple[Any, ...], None]] = {}
    for group in groups:
        own = columns.setdefault(group.index, {})
        raw: set[tuple[Any, ...]] = set()
        for member in group.members:
            extra = member.record.get("extra") if member.record is not None else None
            lineage = extra.get(COLUMN_LINEAGE_KEY) if type(extra) is dict else None
            if type(lineage) is not dict:
                continue
            by_column = lineage.get("columns")
            if type(by_column) is dict:
                for column, sources in by_column.items():
                    own[column] = None
                    if type(sources) is list:
                        for src in sources:
                            if type(src) is dict:
                                raw.add(
                                    (
                                        src.get("ref"),
                                        src.get("location"),
                                        src.get("column"),
                                        column,
                                        src.get("kind"),
                                        src.get("subtype"),
                                    )
                                )
            dataset = lineage.get("dataset")
            if type(dataset) is list:
                for src in dataset:
                    if type(src) is dict:
                        raw.add(
                            (
                                src.get("ref"),
                                src.get("location"),
                                src.get("column"),
                                None,
                                src.get("kind"),
                                src.get("subtype"),
                            )
                        )
        for ref, location, name, column, kind, subtype in raw:
            if type(name) is not str or not isinstance(column, str | None):
                continue
            kind = str(kind or "direct").lower()
            subtype = str(subtype).lower() if subtype else None
            where = index.find(ref) if type(ref) is str else None
            if where is None:
                shown = ref if type(ref) is str else location
                if type(shown) is str:
                    external.setdefault(group.index, {})[
                        (redact_text(shown), name, column, kind, subtype)
                    ] = None
                continue
            columns.setdefault(where, {})[name] = None
            if where != group.index or name != column:
                edges[(where, name, group.index, column, kind, subtype)] = None
    ordered = sorted(edges, key=lambda e: (e[2], str(e[3]), e[0], e[1], e[4], str(e[5])))
    return (
        [list(edge) for edge in ordered],
        {g: sorted(names) for g, names in columns.items() if names},
        {
            g: sorted((list(item) for item in items), key=lambda i: [str(x) for x in i])[
                :EXTERNAL_SHOWN
            ]
            for g, items in external.items()
        },
    )


# --------------------------------------------------------------------------- page data


def _parts(group: _Group, runs: dict[str, int]) -> dict[str, Any]:
    """The members as columns (keys, versions, statuses, end times, runs): compact for
    thousands of partitions, expanded by the page only when a person lists them."""
    keys, versions, ends, run_ids, refs = [], [], [], [], []
    statuses = []
    show_refs = False
    for member in group.members:
        record = member.record or {}
        keys.append(member.key)
        versions.append(member.node.version)
        statuses.append(str(_STATUS_INDEX[member.status]))
        end = record.get("end_time") or member.node.end_time
        ends.append(end if isinstance(end, str) else None)
        run_id = _step(record).get("run_id") or member.node.run_id
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
    groups = _group_nodes(graph, nodes)
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

    column_edges, columns, external = _column_lineage(groups)
    runs: dict[str, int] = {}
    out_groups = []
    for group in groups:
        counts = Counter(m.status for m in group.members)
        keys = sorted({m.key for m in group.members})
        focus = group.index == focus_group
        partitioned = (
            any(_step(m.record).get("partition") for m in group.members)
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
                "details": _details(group, graph, focus),
                "last_run": _last_run(group, graph, focus),
                "history": _history(group, graph, stored),
                "columns": columns.get(group.index, []),
                "external_columns": external.get(group.index, []),
                "self_reads": self_reads[group.index],
                "parts": _parts(group, runs),
            }
        )
    focus_member = next(
        i for i, m in enumerate(groups[focus_group].members) if m.node.id == graph.focus
    )
    focus_node = nodes[graph.focus]
    return {
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


# --------------------------------------------------------------------------- HTML


def script_json(data: Any) -> str:
    """`data` as JSON that is safe inside a `<script>` element: `<`, `>` and `&` are written
    as `\\u003c`, `\\u003e` and `\\u0026` (JSON syntax itself has none of them, so only
    string contents change and `JSON.parse` reads them back exactly), so no value can end
    the element (`</script>`) or open a comment (`<!--`). U+2028 and U+2029 are escaped too,
    for readers that take the text as JavaScript."""
    text = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS).decode()
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


@functools.cache
def _asset(folder: str, name: str, element: str) -> str:
    """A packaged file inlined into `element`, refused if it could close that element."""
    try:
        text = (resources.files(__package__) / folder / name).read_text(encoding="utf-8")
    except OSError as exc:
        raise PageAssetError(
            f"the lineage page's {folder}/{name} is missing from the installed dws_dagster "
            f"({exc}); reinstall the package (pip install --force-reinstall dws_dagster)"
        ) from None
    lowered = text.lower()
    if f"</{element}" in lowered or "<!--" in lowered:
        raise PageAssetError(
            f"the lineage page's {folder}/{name} contains '</{element}' or '<!--' and cannot "
            "be inlined; this is a packaging fault: report it"
        )
    return text


def render_page(graph: LineageGraph) -> str:
    """One self-contained page: the data, script, styles and layout library inline."""
    data = page_data(graph)
    title = html.escape(data["title"], quote=True)
    focus = html.escape(data["focus"]["id"], quote=True)
    snapshot = (
        ""
        if graph.snapshot is None
        else (
            f'<span class="snapshot">from snapshot {html.escape(graph.snapshot, quote=True)}</span>'
        )
    )
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                # Nothing may be fetched: every resource of the page is inline.
                '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">",
                f"<title>{title}</title>",
                f"<style>{_asset(_ASSETS, 'lineage_page.css', 'style')}</style>",
                "</head>",
                "<body>",
                '<header class="top">',
                f'<h1 title="{focus}">{title}</h1>{snapshot}',
                '<div class="search"><input id="search" type="search" autocomplete="off" '
                'placeholder="Find an asset, column or partition" '
                'aria-label="Find an asset, column or partition">'
                '<ol id="results" class="results" role="listbox" hidden></ol></div>',
                '<div class="tools"><button id="to-focus" type="button" title="Centre the focus">'
                'Focus</button><button id="fit" type="button" title="Show the whole graph">'
                "Fit</button>"
                '<button id="zoom-out" type="button" title="Zoom out" aria-label="Zoom out">'
                "−</button>"
                '<button id="zoom-in" type="button" title="Zoom in" aria-label="Zoom in">'
                "+</button>"
                "</div>",
                '<div id="legend" class="legend"></div>',
                "</header>",
                '<main class="main">',
                '<div id="viewport" class="viewport" tabindex="0" aria-label="Lineage graph">'
                '<div id="canvas" class="canvas"><svg id="edges" class="edges" aria-hidden="true">'
                '</svg><div id="nodes"></div></div>'
                f'<noscript><p class="noscript">This page draws {title} with JavaScript, which is '
                "off. The same lineage is in <code>dws-dagster lineage REF --format json</code> or "
                "<code>--format text</code>.</p></noscript></div>",
                '<aside id="panel" class="panel" aria-label="Details"></aside>',
                "</main>",
                f'<script type="application/json" id="lineage-data">{script_json(data)}</script>',
                f"<script>{_asset(_VENDOR, 'dagre.min.js', 'script')}</script>",
                f"<script>{_asset(_ASSETS, 'lineage_page.js', 'script')}</script>",
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )
