"""What two runs of the same pipeline must agree on, whatever ran them (a SQLite or Postgres
Dagster instance, local or cluster Spark): the workspace's lineage store, its history,
`results.json` and the OpenLineage events, with only what must differ between two runs taken
out — times, and run ids (numbered in order of appearance, so which events share a run still
counts), and the workspace's own folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dws_dagster import Workspace

#: Keys whose values are clock readings.
TIME_KEYS = frozenset({"at", "eventTime", "start_time", "end_time", "execution_time_seconds"})


def dagster_run_ids(instance: Any) -> list[str]:
    """The instance's run ids, oldest first."""
    return [run.run_id for run in reversed(instance.get_runs())]


def normalise(value: Any, *, root: Path, run_ids: list[str]) -> Any:
    """`value` with the workspace folder, Dagster run ids, OpenLineage run ids and times
    replaced by placeholders."""
    text = json.dumps(value, sort_keys=True)
    text = text.replace(str(Path(root).resolve()), "<workspace>").replace(str(root), "<workspace>")
    for number, run_id in enumerate(run_ids):
        text = text.replace(run_id, f"<dagster run {number}>")
    ids: dict[str, str] = {}

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            out = {}
            for key, inner in item.items():
                if key in TIME_KEYS:
                    out[key] = "<time>"
                elif key == "runId" and isinstance(inner, str):
                    out[key] = ids.setdefault(inner, f"<run {len(ids)}>")
                else:
                    out[key] = walk(inner)
            return out
        if isinstance(item, list):
            return [walk(inner) for inner in item]
        return item

    return walk(json.loads(text))


def openlineage_events(ws: Workspace) -> list[dict[str, Any]]:
    """The events the file transport wrote (no transport configured)."""
    path = ws.meta_dir / "openlineage" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def lineage_view(ws: Workspace, instance: Any) -> dict[str, Any]:
    """Everything the comparison looks at, normalised."""
    results = {
        str(path.relative_to(ws.root)): json.loads(path.read_text())
        for path in sorted(ws.root.rglob("results.json"))
    }
    view = {
        "refs": {ref: state.to_json() for ref, state in ws.store.items()},
        # The store's history (operations in order); the key keeps its old name for callers.
        "journal": list(ws.store.history()),
        "results": results,
        "openlineage": openlineage_events(ws),
    }
    return normalise(view, root=ws.root, run_ids=dagster_run_ids(instance))


def versions(view: dict[str, Any]) -> dict[str, str | None]:
    """ref -> current version, from a `lineage_view`."""
    return {ref: (state["record"] or {}).get("version") for ref, state in view["refs"].items()}
