"""What the lineage page's details panel shows for a node: its version, parameters, metrics,
code versions and commits, how its step last ran, and its history of earlier records.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping
from typing import Any

from dws_dagster.views.graph_model import LineageGraph
from dws_dagster.views.page.groups import Group, step_of
from dws_dagster.workspace.redaction import redact_text

#: Older records listed per node (a ref's own history; partitioned nodes list their runs).
HISTORY_PER_NODE = 20
#: Runs listed in the history of a partitioned node.
HISTORY_RUNS = 30
#: Distinct values listed for what varies across a node's members (code versions, commits).
DISTINCT_SHOWN = 8


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
    step = step_of(record)
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


def node_details(group: Group, graph: LineageGraph, focus: bool) -> dict[str, Any]:
    """Version, step, code, parameters, metrics and data figures of a group, from the record
    of its focus member (on the focus node) or else its most recent current member."""
    current = [m for m in group.members if m.node.current] or group.members
    main = next((m for m in group.members if m.node.id == graph.focus), None) if focus else None
    if main is None:
        main = max(current, key=lambda m: (_when(m.record or {}), m.key))
    record = main.record or {}
    step = step_of(record)
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
        seen = Counter(str(step_of(r)[key]) for r in records if step_of(r).get(key))
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


def last_run_of(group: Group, graph: LineageGraph, focus: bool) -> dict[str, Any] | None:
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


def history_of(
    group: Group, graph: LineageGraph, stored: Mapping[str, list[dict[str, Any]]]
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
            step = step_of(record)
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
        (str(step_of(a).get("partition") or ref), a)
        for ref, a in sorted(graph.attempts.items())
        if ref in set(refs)
    ]
    for where, made_by in made:
        step = step_of(made_by)
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
