"""What the lineage page shows of a snapshot's replay: a summary for the page's banner and, on
each node, the verdicts of its members (`graph.replay`, a checked `replay_record` document).

A verdict is drawn on a member only when the member is the very version the replay judged
(same ref, recorded version == the node's version): a page showing a ref at another version
must not claim that version reproduced. Verdicts that land on no member are listed in the
summary instead, so the page never hides part of what the replay found.

Pure functions of the graph, like the other renderers: no Dagster, no Spark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dws_dagster.views.page.groups import Group
from dws_dagster.workspace.redaction import redact_text

__all__ = ["VERDICTS", "group_replay", "match_verdicts", "replay_summary"]

#: The verdicts a replay gives a ref (`formats.ReplayVerdictJson`), in the order the page
#: lists them; a member's verdict is written as its index in the compact `marks` string.
VERDICTS = ("reproduced", "differs", "non-deterministic", "failed", "not replayable")
_INDEX = {name: index for index, name in enumerate(VERDICTS)}
#: Worst first: the verdict a node whose members got several is summed up by.
_SEVERITY = ("failed", "differs", "non-deterministic", "not replayable", "reproduced")
#: `marks` character of a member the replay did not judge.
NOT_JUDGED = "-"
#: A node of up to this many judged members lists every verdict in full; above, only those a
#: person needs spelled out (anything but a plain "reproduced"), the rest read from `marks`.
ALL_ENTRIES_UP_TO = 100
#: Verdicts listed in full per node, and refs listed outside the graph (the rest counted).
ENTRIES_SHOWN = 1000
OUTSIDE_SHOWN = 200


def _entry(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """One verdict as the page shows it; its detail may be a step's error, which could hold a
    credential (errors are redacted everywhere the page shows them)."""
    detail = verdict.get("detail")
    columns = verdict.get("columns")
    return {
        "verdict": verdict["verdict"],
        "step": verdict.get("step"),
        "recorded": verdict.get("recorded"),
        "reproduced": verdict.get("reproduced"),
        "detail": redact_text(detail) if isinstance(detail, str) and detail else None,
        "columns": list(columns) if isinstance(columns, list) else None,
    }


def _plain(entry: Mapping[str, Any]) -> bool:
    """Whether `marks` says all there is: reproduced, the same version, nothing to add."""
    return (
        entry["verdict"] == "reproduced"
        and entry["reproduced"] == entry["recorded"]
        and not entry["detail"]
        and not entry["columns"]
    )


def match_verdicts(
    groups: Sequence[Group], replay: Mapping[str, Any]
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Each graph node the replay judged (node id -> its verdict) and the verdicts that match
    no node: a ref outside the graph, or in it at another version (marked `in_graph`)."""
    by_version: dict[tuple[str, str], str] = {}
    refs: set[str] = set()
    for group in groups:
        for member in group.members:
            refs.add(member.node.ref)
            if member.node.version is not None:
                by_version.setdefault((member.node.ref, member.node.version), member.node.id)
    matched: dict[str, dict[str, Any]] = {}
    outside: list[dict[str, Any]] = []
    for verdict in replay.get("refs", ()):
        recorded = verdict.get("recorded")
        node_id = by_version.get((verdict["ref"], recorded)) if recorded is not None else None
        if node_id is not None and node_id not in matched:
            matched[node_id] = _entry(verdict)
        else:
            outside.append({"ref": verdict["ref"], "in_graph": verdict["ref"] in refs})
            outside[-1].update(_entry(verdict))
    return matched, outside


def group_replay(group: Group, matched: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The verdicts of a node's members: counts per verdict, the worst, one `marks` character
    per member (the index of its verdict in `VERDICTS`, `-` if not judged, in the order of
    the node's `parts`) and the verdicts spelled out (`entries`, each naming its `member`).
    None when the replay judged none of them."""
    marks: list[str] = []
    judged: list[tuple[int, Mapping[str, Any]]] = []
    for index, member in enumerate(group.members):
        entry = matched.get(member.node.id)
        if entry is None:
            marks.append(NOT_JUDGED)
            continue
        marks.append(str(_INDEX.get(entry["verdict"], _INDEX["failed"])))
        judged.append((index, entry))
    if not judged:
        return None
    counts = Counter(entry["verdict"] for _, entry in judged)
    full = len(judged) <= ALL_ENTRIES_UP_TO
    listed = [(i, e) for i, e in judged if full or not _plain(e)]
    return {
        "verdict": next((v for v in _SEVERITY if counts[v]), "failed"),
        "counts": {v: counts[v] for v in VERDICTS if counts[v]},
        "judged": len(judged),
        "marks": "".join(marks),
        "entries": [{"member": i, **e} for i, e in listed[:ENTRIES_SHOWN]],
        "entries_more": max(0, len(listed) - ENTRIES_SHOWN),
    }


def replay_summary(
    replay: Mapping[str, Any], outside: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The page banner's replay: which snapshot, when, where, and what it found overall
    (`counts` over every ref it judged, drawn or not); the verdicts no node shows are listed
    in `outside` (the first `OUTSIDE_SHOWN`, worst first) and counted in `outside_counts`."""
    refs = replay.get("refs", ())
    tags = replay.get("tags")  # not in the checked schema: kept only if it is a list of names
    counts = Counter(v["verdict"] for v in refs)
    rank = {v: i for i, v in enumerate(_SEVERITY)}
    ordered = sorted(outside, key=lambda e: (rank.get(e["verdict"], 0), e["ref"]))
    outside_counts = Counter(e["verdict"] for e in outside)
    return {
        "snapshot": replay.get("snapshot"),
        "snapshot_name": replay.get("snapshot_name"),
        "tags": [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
        "replayed_at": replay.get("replayed_at"),
        "into": replay.get("into"),
        "in_place": bool(replay.get("in_place", False)),
        "reproduced": bool(replay.get("reproduced")),
        "verdicts": list(VERDICTS),
        "refs": len(refs),
        "counts": {v: counts[v] for v in VERDICTS if counts[v]},
        "drawn": len(refs) - len(outside),
        "outside": ordered[:OUTSIDE_SHOWN],
        "outside_count": len(outside),
        "outside_counts": {v: outside_counts[v] for v in VERDICTS if outside_counts[v]},
    }
