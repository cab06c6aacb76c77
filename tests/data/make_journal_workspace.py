"""Write the journal-format workspace the import tests read (tests/data/journal_workspace/) and
what the journal-format code reports about it (tests/data/journal_workspace.expected.json).

MUST RUN WITH dws_dagster AT COMMIT 60b9e85 (the last journal-format store), e.g.

    git worktree add /tmp/old60 60b9e85
    cd <repo root> && PYTHONPATH=/tmp/old60 python tests/data/make_journal_workspace.py

It refuses to run against the database store. The fixture is then committed as it is: the
tests compare what the importer puts in the database with the expected values the old code
computed here, so regenerating it changes both together.

The workspace holds, in order: steps through the script API (records, observations of
source data, a results step with metrics), a snapshot with two tags and a results copy, a
step whose ref is then forgotten, steps re-run on changed data, a failed step that leaves its
output unknown, a claim, a second snapshot, a partial restore of the first (a `reset` that
marks refs unknown, followed by compaction: `current.json` plus a journal tail), then more
operations in the tail (an observation, a re-run, a failure, a claim, a forget), and an
OpenLineage outbox in small segments where some events were delivered and the next delivery
failed (so some are pending, with a recorded error).

Lock files and the `.checked` sidecars (caches keyed by inode) are left out: they describe
this machine, not the workspace. No absolute path is written anywhere (checked at the end).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
TARGET = HERE / "journal_workspace"
EXPECTED = HERE / "journal_workspace.expected.json"
WORKSPACE_NAME = "journal-ws"


def _old_code() -> None:
    try:
        from dws_dagster.workspace.store.lineage_store import (  # noqa: F401  (the journal store's own)
            STORE_FORMAT,
            read_snapshot_manifest,
        )
    except ImportError:
        sys.exit(
            "this script must run with dws_dagster at commit 60b9e85 (the journal "
            "store) on PYTHONPATH; see its docstring"
        )


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def step(
    ws: Any,
    name: str,
    inputs: list[str],
    outputs: dict[str, str],
    *,
    parameters: dict[str, Any] | None = None,
    results: dict[str, Any] | None = None,
    results_dir: str | None = None,
    fail_after_writing: bool = False,
    run_id: str | None = None,
) -> None:
    """A script step through the lineage API: read `inputs`, write `outputs` (ref -> text)."""
    from dws_dagster import LineageBuilder

    builder = (
        LineageBuilder()
        .with_step_name(name)
        .with_parameters(parameters or {})
        .with_workspace_directory(ws.root)
    )
    builder = builder.with_input_refs(inputs) if inputs else builder.with_no_inputs()
    if run_id is not None:
        builder = builder.with_run_id(run_id)
    if results_dir is not None:
        builder = builder.as_results_step(ws.root / results_dir)
    try:
        with builder.eval() as lineage:
            for ref, content in outputs.items():
                lineage.add_output_ref(ref)
                write(ws.local_path(ref) / "part-0.csv", content)
            if results is not None:
                lineage.write_results(results)
            if fail_after_writing:
                raise RuntimeError("the step failed half-way (fixture)")
    except RuntimeError as exc:
        if not fail_after_writing or "fixture" not in str(exc):
            raise


class FlakyTransport:
    """A transport that accepts `accept` events, then refuses (a catalog gone down)."""

    kind = "http"

    def __init__(self, accept: int) -> None:
        self.accept = accept
        self.sent: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        if len(self.sent) >= self.accept:
            raise ConnectionError("catalog unreachable (fixture)")
        self.sent.append(event)


def ol_event(run_id: str, event_type: str, time: str, job: str) -> dict[str, Any]:
    return {
        "eventType": event_type,
        "eventTime": time,
        "producer": "https://github.com/dws-dagster/fixture",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id, "facets": {}},
        "job": {"namespace": "dws-fixture", "name": job, "facets": {}},
        "inputs": [],
        "outputs": [{"namespace": "dws-fixture", "name": job}],
    }


def build(root: Path) -> None:
    from dws_dagster import Workspace
    from dws_dagster.ol.outbox.outbox import Outbox
    from dws_dagster.workspace.snapshots.restore import restore_snapshot
    from dws_dagster.workspace.snapshots.snapshots import take_snapshot

    ws = Workspace.init(root, name=WORKSPACE_NAME)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    store = ws.store

    # Segment 1 of the journal: everything up to the restore.
    write(root / "data/src/trips.csv", "a\n1\n")
    step(
        ws,
        "prep",
        ["src/trips.csv"],
        {"inter/prep": "A\n1\n"},
        parameters={"scale": 2},
        run_id="run-prep-1",
    )
    step(ws, "feat", ["inter/prep"], {"inter/feat": "F\n1\n"}, run_id="run-feat-1")
    step(
        ws,
        "train",
        ["inter/feat"],
        {},
        parameters={"gamma": 0.1},
        results={"mae": 1.5},
        results_dir="results/exp",
        run_id="run-train-1",
    )
    take_snapshot(ws, "v1", "first model")
    take_snapshot(ws, "baseline")  # the same lineage: a second tag of the same snapshot
    step(ws, "old", ["src/trips.csv"], {"inter/old": "O\n"}, run_id="run-old-1")
    store.forget("inter/old")
    write(root / "data/src/trips.csv", "a\n2\n")
    step(
        ws,
        "prep",
        ["src/trips.csv"],
        {"inter/prep": "A\n2\n"},
        parameters={"scale": 3},
        run_id="run-prep-2",
    )
    step(
        ws,
        "feat",
        ["inter/prep"],
        {"inter/feat": "F\n2\n"},
        run_id="run-feat-2",
        fail_after_writing=True,
    )  # a failure that leaves inter/feat unknown
    store.claim("later", ["inter/later"])
    take_snapshot(ws, None, "before the restore")
    # Nothing of v1 but the results was kept: a partial restore marks the rest unknown, and
    # compacts (current.json, then segment 2).
    restore_snapshot(ws, "v1", partial=True)

    # Segment 2, the tail after current.json.
    store.observe_source("src/trips.csv")
    step(
        ws,
        "prep",
        ["src/trips.csv"],
        {"inter/prep": "A\n2\n"},
        parameters={"scale": 3},
        run_id="run-prep-3",
    )
    step(
        ws,
        "feat",
        ["inter/prep"],
        {"inter/feat": "F\n3\n"},
        run_id="run-feat-3",
        fail_after_writing=True,
    )
    store.claim("tail", ["inter/tail"])
    step(ws, "gone", ["src/trips.csv"], {"inter/gone": "G\n"}, run_id="run-gone-1")
    store.forget("inter/gone")

    # The outbox: small segments, three events delivered, then the catalog went down.
    outbox = Outbox(ws, segment_bytes=700)
    events = [
        ol_event(
            f"00000000-0000-4000-8000-00000000000{n}",
            kind,
            f"2026-05-0{n}T10:00:00+00:00",
            f"job{n}",
        )
        for n in range(1, 5)
        for kind in ("START", "COMPLETE")
    ]
    outbox.spool(events[:5])
    report = outbox.deliver(FlakyTransport(accept=3))
    assert report.sent == 3 and report.failed == 1, report
    outbox.spool(events[5:])
    assert outbox.spool(events[:2]) == 0  # keys already spooled: nothing added


def expected(root: Path) -> dict[str, Any]:
    """What the journal-format code reports about the workspace at `root`."""
    from dws_dagster import Workspace
    from dws_dagster.ol.outbox.outbox import Outbox
    from dws_dagster.workspace.snapshots.history import list_snapshots
    from dws_dagster.workspace.store.lineage_store import read_snapshot_manifest

    ws = Workspace.open(root)
    store = ws.store
    history = list(store.history())
    good = sorted(
        {(op["record"]["ref"], op["record"]["version"]) for op in history if op["op"] == "record"}
    )
    outbox = Outbox(ws)
    state = outbox._read_state()
    status = outbox.status().to_json()
    for name in ("spool_bytes", "segments"):  # how the journal stored them: not kept
        status.pop(name)
    return {
        "name": ws.name,
        "state": {ref: value.to_json() for ref, value in store.items()},
        "statuses": {ref: value.status for ref, value in store.items()},
        "history": history,
        "find_record": [[ref, version, store.find_record(ref, version)] for ref, version in good],
        "snapshots": [info.to_json() for info in list_snapshots(ws)],
        "manifests": {
            info.hash: read_snapshot_manifest(ws, info.hash)["refs"] for info in list_snapshots(ws)
        },
        "outbox": {
            "events": list(outbox.events()),
            "pending": [event for event, *_ in outbox._pending_events(state)],
            "status": status,
        },
    }


def main() -> None:
    _old_code()
    if TARGET.exists():
        shutil.rmtree(TARGET)
    build(TARGET)
    for path in sorted(TARGET.rglob("*")):
        if path.is_file() and (path.name.endswith("lock") or path.suffix == ".checked"):
            path.unlink()
    data = expected(TARGET)
    for path in sorted(TARGET.rglob("*")):  # reading takes locks again
        if path.is_file() and path.name.endswith("lock"):
            path.unlink()
    EXPECTED.write_bytes(
        orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )
    leaked = [
        str(path.relative_to(TARGET))
        for path in [EXPECTED, *TARGET.rglob("*")]
        if path.is_file() and str(HERE).encode() in path.read_bytes()
    ]
    if leaked:
        sys.exit(f"absolute paths were written into {leaked}; fix the fixture")
    print(f"wrote {TARGET} and {EXPECTED}")


if __name__ == "__main__":
    main()
