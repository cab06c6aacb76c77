"""Checks of the Dagster run's own OpenLineage events (the parent of its assets' runs) against
the events of its children, in the order a catalog receives them.

Import `check_parents` from any test that has a sequence of events (the outbox's spool order,
a file transport's lines, what a receiver got): it fails on a child whose parent has no START
before it, a parent that ends before one of its children, a parent that never ends while its
children did, two STARTs or two ends of one parent, and parent and child facets that disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

TERMINAL = frozenset({"COMPLETE", "FAIL", "ABORT"})


def parent_of(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return (event.get("run", {}).get("facets") or {}).get("parent")


def is_parent_event(event: Mapping[str, Any]) -> bool:
    """A Dagster run's own event: its job is of type JOB and it names no parent."""
    job_type = (event["job"].get("facets") or {}).get("jobType") or {}
    return job_type.get("jobType") == "JOB" and parent_of(event) is None


def parent_events(events: Iterable[Mapping[str, Any]], run_id: str) -> list[Mapping[str, Any]]:
    return [e for e in events if is_parent_event(e) and e["run"]["runId"] == run_id]


def children_of(events: Iterable[Mapping[str, Any]], run_id: str) -> list[Mapping[str, Any]]:
    return [e for e in events if (parent_of(e) or {}).get("run", {}).get("runId") == run_id]


def first_occurrences(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each (runId, eventType) once, where it first came: at-least-once delivery may repeat
    an event, and a catalog keeps the first."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for event in events:
        key = (event["run"]["runId"], event["eventType"])
        if key not in seen:
            seen.add(key)
            kept.append(event)
    return kept


def check_parents(events: list[Mapping[str, Any]], *, ended: bool = True) -> set[str]:
    """Assert the parent rules over `events` in order; returns the parent run ids seen.
    `ended`: every parent whose children all ended must have ended too."""
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    jobs: dict[str, tuple[str, str]] = {}
    for position, event in enumerate(events):
        if not is_parent_event(event):
            continue
        run_id, kind = event["run"]["runId"], event["eventType"]
        assert event.get("inputs", []) == [] and event.get("outputs", []) == []
        job_type = event["job"]["facets"]["jobType"]
        assert (job_type["integration"], job_type["processingType"]) == ("DAGSTER", "BATCH")
        jobs.setdefault(run_id, (event["job"]["namespace"], event["job"]["name"]))
        assert jobs[run_id] == (event["job"]["namespace"], event["job"]["name"])
        if kind == "START":
            assert run_id not in starts, f"two STARTs of Dagster run {run_id}"
            starts[run_id] = position
        else:
            assert kind in TERMINAL and run_id not in ends, f"two ends of Dagster run {run_id}"
            assert run_id in starts, f"Dagster run {run_id} ends before it starts"
            ends[run_id] = position
    child_ends: dict[str, list[int]] = {}
    for position, event in enumerate(events):
        parent = parent_of(event)
        if parent is None:
            continue
        run_id = parent["run"]["runId"]
        assert run_id in starts and starts[run_id] < position, (
            f"{event['job']['name']} {event['eventType']} before its Dagster run's START"
        )
        assert (parent["job"]["namespace"], parent["job"]["name"]) == jobs[run_id]
        # The Dagster run is the root: it names no parent, and its children name it as root.
        assert parent["root"]["run"]["runId"] == run_id
        assert (parent["root"]["job"]["namespace"], parent["root"]["job"]["name"]) == jobs[run_id]
        if event["eventType"] in TERMINAL:
            child_ends.setdefault(run_id, []).append(position)
            if run_id in ends:
                assert position < ends[run_id], (
                    f"{event['job']['name']} ends after its Dagster run {run_id} ended"
                )
    if ended:
        for run_id in child_ends:
            assert run_id in ends, f"Dagster run {run_id} never ends"
    return set(starts)
