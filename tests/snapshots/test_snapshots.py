"""Snapshots: take, restore, diff, resolve, delete. Real workspaces on disk, real processes.

The only injected failures are at explicit boundaries (`_save_index`, the last step of taking a
snapshot) and are marked as such where they happen.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import (
    DwsError,
    LineageBuilder,
    SnapshotError,
    SnapshotNotFoundError,
    SnapshotRestoreError,
    UnknownRefStateError,
    Workspace,
    WorkspaceConfigError,
)
from dws_dagster.snapshots import take as snapshots_module
from dws_dagster.snapshots.diff import RefChange, diff_lineage, diff_states, lineage_state
from dws_dagster.snapshots.garbage import collect_garbage
from dws_dagster.snapshots.index import delete_snapshot, resolve_snapshot
from dws_dagster.snapshots.restore import restore_snapshot
from dws_dagster.snapshots.snapshot_data import rows_of
from dws_dagster.snapshots.take import (
    current_data,
    list_snapshots,
    snapshot_hash,
    take_snapshot,
)
from dws_dagster.store.database import forget_databases
from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.files import atomic_write_bytes
from dws_dagster.workspace.records import LineageRecord, StepInfo
from dws_dagster.workspace.shapes import validate_tag
from dws_dagster.workspace.swap import (
    is_staging_name,
    keep_copy,
    old_name,
    staging_name,
    staging_path,
    swap_into_place,
)
from dws_dagster.workspace.trees import remove_tree
from dws_dagster.workspace.versions import content_version, short
from tests.conftest import ROOT, run_python, run_step, tree_state, write
from tests.support.store_db import (
    STORES,
    damage,
    db_bytes,
    lose_retained,
    on_store,
    sql,
    sqlite_only,
    workspace_state,
)

SRC = "src/trips.csv"
RESULTS = "results/exp"


# ---------------------------------------------------------------------------- helpers


def rewrite(path: Path, text: str) -> None:
    """Write `path` as a new file (new inode), the way Spark's overwrite mode replaces data."""
    if path.exists():
        path.unlink()
    write(path, text)


def fresh_step(
    ws: Workspace, name: str, inputs: list[str], outputs: dict[str, str], **kwargs: Any
) -> None:
    """`run_step` after removing its output folders, so no file is rewritten in place.

    (In-place rewrites are covered by their own tests below.)"""
    targets = [*outputs, *([kwargs["results_dir"]] if kwargs.get("results_dir") else [])]
    for ref in targets:
        shutil.rmtree(ws.local_path(ref), ignore_errors=True)
    run_step(ws, name, inputs, outputs, **kwargs)


def chain(ws: Workspace, source: str = "a,b\n1,2\n", mae: float = 1.5) -> None:
    """src/trips.csv -> prep (inter/prep) -> train (results/exp with results.json)."""
    rewrite(ws.root / "data/src/trips.csv", source)
    fresh_step(ws, "prep", [SRC], {"inter/prep": source.upper()}, parameters={"scale": 2})
    fresh_step(
        ws,
        "train",
        ["inter/prep"],
        {},
        parameters={"gamma": 0.1},
        results={"mae": mae},
        results_dir=RESULTS,
    )


def deterministic_chain(ws: Workspace) -> None:
    """Like `chain`, but the results data has no timestamps (no results.json), so two runs
    produce identical data and differ only in their records' times."""
    rewrite(ws.root / "data/src/trips.csv", "a,b\n1,2\n")
    fresh_step(ws, "prep", [SRC], {"inter/prep": "A,B\n1,2\n"}, parameters={"scale": 2})
    fresh_step(
        ws,
        "train",
        ["inter/prep"],
        {RESULTS: "pred\n0.5\n"},
        parameters={"gamma": 0.1},
        results_dir=RESULTS,
    )


def build(ws: Workspace, source: str, scale: int, mae: float, *, extra: bool = False) -> None:
    """src -> prep, feat (-> extra); lookup (no inputs); prep + feat -> train (results)."""
    rewrite(ws.root / "data/src/trips.csv", source)
    fresh_step(
        ws,
        "prep",
        [SRC],
        {"inter/prep": f"{source.upper()}scale={scale}\n"},
        parameters={"scale": scale},
    )
    fresh_step(ws, "feat", [SRC], {"inter/feat": source[::-1]})
    fresh_step(ws, "lookup", [], {"inter/lookup": "k,v\nx,1\n"})
    if extra:
        fresh_step(ws, "extra", [SRC], {"inter/extra": "extra\n"})
    fresh_step(
        ws,
        "train",
        ["inter/prep", "inter/feat"],
        {},
        parameters={"gamma": 0.1},
        results={"mae": mae},
        results_dir=RESULTS,
    )


@pytest.fixture(params=STORES)
def ws(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    """This suite runs on both stores: SQLite (the default) and PostgreSQL."""
    yield from on_store(request, tmp_path, monkeypatch)


def versions(states: dict[str, RefState]) -> dict[str, str | None]:
    return {ref: state.version for ref, state in states.items()}


def statuses(states: dict[str, RefState]) -> dict[str, str]:
    return {ref: state.status for ref, state in states.items()}


def read(ws: Workspace, ref: str, name: str = "part-0.csv") -> str:
    path = ws.local_path(ref)
    return (path if path.is_file() else path / name).read_text()


def index_json(ws: Workspace) -> dict[str, Any]:
    """The snapshot index as the store's tables hold it (read with SQL, not the code read)."""
    tags: dict[str, list[str]] = {}
    for digest, tag in sql(
        ws, "SELECT hash, tag FROM dws_snapshot_tags WHERE workspace_id = :ws ORDER BY position"
    ):
        tags.setdefault(digest, []).append(tag)
    rows = sql(
        ws,
        "SELECT hash, message, created, metrics, results, resources FROM "
        "dws_snapshots WHERE workspace_id = :ws ORDER BY position",
    )
    return {
        "snapshots": [
            {
                "hash": digest,
                "tags": tags.get(digest, []),
                "message": message,
                "created": created,
                "metrics": None if metrics is None else json.loads(metrics),
                "results": json.loads(results),
                **({} if resources is None else {"resources": json.loads(resources)}),
            }
            for digest, message, created, metrics, results, resources in rows
        ]
    }


def manifests(ws: Workspace) -> list[str]:
    """The hashes of the snapshots whose manifest (lineage rows) the store holds."""
    return [
        row[0]
        for row in sql(
            ws, "SELECT DISTINCT hash FROM dws_snapshot_refs WHERE workspace_id = :ws ORDER BY hash"
        )
    ]


def manifest_rows(ws: Workspace, digest: str) -> dict[str, dict[str, Any]]:
    """A snapshot's manifest as its rows hold it: each ref's owner, record and attempt."""
    rows = sql(
        ws,
        "SELECT s.ref, s.owner, r.body, a.body, s.unknown FROM dws_snapshot_refs s "
        "LEFT JOIN dws_records r ON r.id = s.record_id "
        "LEFT JOIN dws_records a ON a.id = s.attempt_id "
        "WHERE s.workspace_id = :ws AND s.hash = :hash",
        hash=digest,
    )
    found = {}
    for ref, owner, record, attempt, unknown in rows:
        state: dict[str, Any] = {
            "owner": owner,
            "record": None if record is None else json.loads(record),
        }
        if attempt is not None:
            state["attempt"] = json.loads(attempt)
        if unknown:
            state["unknown"] = True
        found[ref] = state
    return found


def leftovers(root: Path) -> list[str]:
    return [
        str(p)
        for p in root.rglob("*")
        if p.name.startswith((".dws-staging-", ".dws-old-"))
        or (p.name.startswith(".") and p.name.endswith(".tmp"))
    ]


# -------------------------------------------------------------------------- taking


def test_snapshot_records_index_manifest_and_results_copy_with_full_lineage(ws: Workspace) -> None:
    chain(ws)
    store = ws.store
    src, prep, res = store.get(SRC), store.get("inter/prep"), store.get(RESULTS)
    assert src is not None and prep is not None and res is not None
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)

    outcome = take_snapshot(ws, "v1", message="baseline model")

    after = dt.datetime.now(dt.UTC)
    assert outcome.created and not outcome.tag_added and outcome.warnings == []
    info = outcome.info
    assert info.hash == snapshot_hash(ws, store.state(), rows_of(ws, info.hash), info.resources)

    # Index entry: tags, message, created time, metrics of the results, where the copy is.
    [entry] = index_json(ws)["snapshots"]
    assert entry["hash"] == info.hash
    assert entry["tags"] == ["v1"]
    assert entry["message"] == "baseline model"
    created = dt.datetime.fromisoformat(entry["created"])
    assert created.tzinfo is not None and before <= created <= after
    assert entry["metrics"] == {"mae": 1.5}
    assert entry["results"] == [{"ref": RESULTS, "folder": "snapshots/v1"}]
    assert [i.to_json() for i in list_snapshots(ws)] == [entry]

    # Manifest: kept under the hash, holding every ref's state as the store has it.
    assert manifests(ws) == [info.hash]
    manifest = manifest_rows(ws, info.hash)
    assert manifest == {ref: state.to_json() for ref, state in store.state().items()}
    assert set(manifest) == {SRC, "inter/prep", RESULTS}
    # ... references to the records, not copies: each record is stored once.
    assert sql(ws, "SELECT count(*) FROM dws_records")[0][0] == len(
        sql(ws, "SELECT DISTINCT body FROM dws_records")
    )

    # Results copy: results.json byte-identical, lineage.json with the transitive lineage.
    original = ws.local_path(RESULTS)
    archived = ws.resource_root("results") / "snapshots" / "v1" / "exp"
    assert (archived / "results.json").read_bytes() == (original / "results.json").read_bytes()
    assert sorted(p.name for p in archived.iterdir()) == ["lineage.json", "results.json"]
    lineage = json.loads((archived / "lineage.json").read_text())
    assert lineage["snapshot"] == info.hash
    assert lineage["ref"] == RESULTS
    assert lineage["version"] == res.version == ws.version_of(RESULTS)
    records = lineage["records"]
    assert records[0] == res.record  # the results record itself first
    assert {(r["ref"], r["version"]) for r in records} == {
        (RESULTS, res.version),
        ("inter/prep", prep.version),
        (SRC, src.version),
    }
    by_ref = {r["ref"]: r for r in records}
    assert by_ref["inter/prep"] == prep.record
    assert by_ref[SRC] == src.record
    assert by_ref[SRC]["step"]["kind"] == "observation"
    assert by_ref["inter/prep"]["inputs"] == [{"ref": SRC, "version": src.version}]
    # The archived copy is not part of the live results' version.
    assert ws.version_of(RESULTS) == res.version
    assert leftovers(ws.root) == []


def test_untagged_snapshot_names_results_copy_by_hash_prefix(ws: Workspace) -> None:
    chain(ws)
    outcome = take_snapshot(ws)
    assert outcome.created and outcome.info.tags == []
    name = outcome.info.hash[:12]
    assert outcome.info.name == name
    folder = ws.resource_root("results") / "snapshots" / name / "exp"
    assert (folder / "results.json").is_file() and (folder / "lineage.json").is_file()
    assert index_json(ws)["snapshots"][0]["results"] == [
        {"ref": RESULTS, "folder": f"snapshots/{name}"}
    ]


def test_second_snapshot_of_unchanged_state_writes_nothing(ws: Workspace) -> None:
    chain(ws)
    first = take_snapshot(ws, "v1", message="first")
    before = workspace_state(ws)

    again = take_snapshot(ws)
    same_tag = take_snapshot(ws, "v1", message="ignored")

    assert not again.created and not again.tag_added
    assert not same_tag.created and not same_tag.tag_added
    assert again.info.hash == same_tag.info.hash == first.info.hash
    assert workspace_state(ws) == before


def test_snapshot_of_unchanged_state_with_new_tag_only_adds_the_tag(ws: Workspace) -> None:
    chain(ws)
    first = take_snapshot(ws, "v1", message="first")
    before = workspace_state(ws)

    outcome = take_snapshot(ws, "best", message="ignored")

    assert not outcome.created and outcome.tag_added
    assert outcome.info.hash == first.info.hash
    after = workspace_state(ws)
    assert after[0] == before[0]  # no file written
    changed = {t for t in before[1].keys() | after[1].keys() if before[1][t] != after[1][t]}
    assert changed == {"dws_snapshot_tags"}
    [entry] = index_json(ws)["snapshots"]
    assert entry["tags"] == ["v1", "best"]
    assert entry["message"] == "first"
    assert entry["created"] == first.info.created
    # No second copy of the results, and both tags resolve to the one snapshot.
    assert sorted(p.name for p in (ws.resource_root("results") / "snapshots").iterdir()) == ["v1"]
    assert resolve_snapshot(ws, "best").hash == resolve_snapshot(ws, "v1").hash == entry["hash"]


# -------------------------------------------------------------- determinism, portability


def test_hash_is_stable_over_time_and_reruns_with_identical_data(ws: Workspace) -> None:
    deterministic_chain(ws)
    first = take_snapshot(ws, "v1")
    record_before = ws.store.get("inter/prep").record
    time.sleep(1.1)
    assert snapshot_hash(ws, ws.store.state(), *current_data(ws)) == first.info.hash
    assert (
        snapshot_hash(
            Workspace.open(ws.root), Workspace.open(ws.root).store.state(), *current_data(ws)
        )
        == first.info.hash
    )

    deterministic_chain(ws)  # same data and parameters, new records with new times
    record_after = ws.store.get("inter/prep").record
    assert record_after["start_time"] != record_before["start_time"]
    assert snapshot_hash(ws, ws.store.state(), *current_data(ws)) == first.info.hash
    again = take_snapshot(ws)
    assert not again.created and again.info.hash == first.info.hash


def test_copied_workspace_has_same_hash_and_finds_its_snapshots(
    ws: Workspace, tmp_path: Path
) -> None:
    chain(ws)
    outcome = take_snapshot(ws, "v1")
    moved = tmp_path / "elsewhere" / "copy-of-ws"
    shutil.copytree(ws.root, moved)

    other = Workspace.open(moved)
    assert other.root == moved
    assert snapshot_hash(other, other.store.state(), *current_data(other)) == outcome.info.hash
    assert resolve_snapshot(other, "v1").hash == outcome.info.hash
    assert [i.to_json() for i in list_snapshots(other)] == [i.to_json() for i in list_snapshots(ws)]
    assert not take_snapshot(other).created
    # The copy's lineage is usable where it now lives: a restore finds nothing to do.
    report = restore_snapshot(other, "v1")
    assert report.not_restored == [] and report.data_restored == []
    assert sorted(report.data_unchanged) == sorted(["code", "src", SRC, "inter/prep", RESULTS])


def test_manifest_and_results_lineage_hold_no_absolute_paths_or_hostname(ws: Workspace) -> None:
    chain(ws)
    info = take_snapshot(ws, "v1").info
    texts = [
        json.dumps(manifest_rows(ws, info.hash)),
        json.dumps(index_json(ws)),
        (ws.resource_root("results") / "snapshots/v1/exp/lineage.json").read_text(),
        db_bytes(ws).decode("latin-1"),
    ]  # and nowhere else in the store's files
    host = socket.gethostname()
    for text in texts:
        assert str(ws.root) not in text
        assert os.path.realpath(ws.root) not in text
        if len(host) >= 4:
            assert host not in text


def test_hash_input_ignores_times_hosts_and_paths_but_not_lineage(ws: Workspace) -> None:
    chain(ws)
    states = ws.store.state()
    data = current_data(ws)
    base = snapshot_hash(ws, states, *data)

    moved = copy.deepcopy(states)
    for state in moved.values():
        record = state.record
        assert record is not None
        record["start_time"] = "1999-01-01T00:00:00+00:00"
        record["end_time"] = "1999-01-01T00:00:01+00:00"
        record["extra"] = {"host": "some-other-host", "cwd": "/elsewhere/entirely"}
        record.setdefault("step", {})["run_id"] = "another-run"
        record["step"]["command_line"] = ["/usr/bin/python3", "/elsewhere/train.py"]
    assert snapshot_hash(ws, moved, *data) == base

    # ... but what was made, and how, does change the hash (the check above is falsifiable).
    for mutate in (
        lambda r: r.update(version="0" * 32),
        lambda r: r.update(parameters={"scale": 3}),
        lambda r: r.update(inputs=[{"ref": SRC, "version": "1" * 32}]),
        lambda r: r["step"].update(name="prep2"),
    ):
        changed = copy.deepcopy(states)
        mutate(changed["inter/prep"].record)
        assert snapshot_hash(ws, changed, *data) != base
    unknown = copy.deepcopy(states)
    unknown["inter/prep"].unknown = True
    assert snapshot_hash(ws, unknown, *data) != base


def test_same_pipeline_in_two_fresh_workspaces_gives_same_hash(tmp_path: Path) -> None:
    hashes, times = [], []
    for name in ("first", "second-at-another-path"):
        other = Workspace.init(tmp_path / name / "ws")
        other.add_resource("src", "source-data", path="data/src")
        other.add_resource("inter", "intermediate-data", path="data/inter")
        other.add_resource("results", "results", path="results")
        other.add_resource("code", "code", path="code")
        deterministic_chain(other)
        hashes.append(take_snapshot(other, "v1").info.hash)
        times.append(other.store.get(RESULTS).record["end_time"])
        time.sleep(0.05)
    assert times[0] != times[1]
    assert hashes[0] == hashes[1]


# ---------------------------------------------------------------- change, restore


def _two_snapshots(ws: Workspace) -> dict[str, Any]:
    """v1 (source and prep kept with keep_copy, feat not), then v2 after changing everything."""
    build(ws, "a,b\n1,2\n", scale=1, mae=1.5)
    store = ws.store
    for ref in (SRC, "inter/prep"):
        parsed_root = ws.resource_root(ref.split("/")[0])
        keep_copy(parsed_root, ref.split("/", 1)[1], ws.version_of(ref), ws.local_path(ref))
    v1 = take_snapshot(ws, "v1", message="first").info
    snap1 = {
        "states": store.state(),
        "results_json": (ws.local_path(RESULTS) / "results.json").read_bytes(),
        "data": {ref: read(ws, ref) for ref in (SRC, "inter/prep", "inter/feat")},
    }
    build(ws, "a,b\n3,4\n5,6\n", scale=2, mae=1.2, extra=True)
    v2 = take_snapshot(ws, "v2", message="second").info
    snap2 = {
        "states": store.state(),
        "results_json": (ws.local_path(RESULTS) / "results.json").read_bytes(),
        "data": {ref: read(ws, ref) for ref in (SRC, "inter/prep", "inter/feat", "inter/extra")},
    }
    return {"v1": v1, "v2": v2, "s1": snap1, "s2": snap2}


def state_after_gc(ws: Workspace) -> tuple[dict[str, str], Any]:
    """The workspace's state once `gc` freed what nothing references: a snapshot that failed
    leaves only such garbage (files it retained before the failure)."""
    collect_garbage(ws)
    return workspace_state(ws)


def test_change_snapshot_restore_round_trip(ws: Workspace) -> None:
    snaps = _two_snapshots(ws)
    s1, s2 = snaps["s1"], snaps["s2"]
    assert versions(s1["states"])["inter/feat"] != versions(s2["states"])["inter/feat"]

    # Every ref's data was retained by the snapshot, whoever wrote it (inter/feat had no
    # kept copy): all of it comes back.
    report = restore_snapshot(ws, "v1")

    assert report.info.hash == snaps["v1"].hash
    assert report.data_restored == ["inter/feat", "inter/prep", RESULTS, "src", SRC]
    assert report.data_unchanged == ["code", "inter/lookup"]
    assert report.not_restored == []
    assert report.lineage_removed == ["inter/extra"]
    assert report.lineage_restored == sorted(s1["states"])

    def check_v1(workspace: Workspace) -> None:
        now = workspace.store.state()
        assert versions(now) == versions(s1["states"])
        assert statuses(now) == statuses(s1["states"])
        assert {ref: state.record for ref, state in now.items()} == {
            ref: state.record for ref, state in s1["states"].items()
        }
        for ref in (SRC, "inter/prep", "inter/feat"):
            assert read(workspace, ref) == s1["data"][ref]
        assert (workspace.local_path(RESULTS) / "results.json").read_bytes() == s1["results_json"]
        assert not (workspace.local_path(RESULTS) / "lineage.json").exists()
        for ref in (SRC, "inter/prep", RESULTS, "inter/lookup", "inter/feat"):
            assert workspace.version_of(ref) == s1["states"][ref].version

    check_v1(ws)
    check_v1(Workspace.open(ws.root))
    assert leftovers(ws.root) == []
    again = take_snapshot(ws)
    assert not again.created and again.info.hash == snaps["v1"].hash

    report2 = restore_snapshot(ws, "v2")

    assert report2.info.hash == snaps["v2"].hash
    assert report2.data_restored == ["inter/feat", "inter/prep", RESULTS, "src", SRC]
    assert report2.data_unchanged == ["code", "inter/extra", "inter/lookup"]
    assert report2.not_restored == []
    assert report2.lineage_removed == []
    for workspace in (ws, Workspace.open(ws.root)):
        now = workspace.store.state()
        assert versions(now) == versions(s2["states"])
        assert statuses(now) == statuses(s2["states"])
        for ref, text in s2["data"].items():
            assert read(workspace, ref) == text
        assert (workspace.local_path(RESULTS) / "results.json").read_bytes() == s2["results_json"]
    # The restored state is exactly v2 again: snapshotting it creates nothing new.
    again = take_snapshot(ws)
    assert not again.created and again.info.hash == snaps["v2"].hash
    assert leftovers(ws.root) == []


def test_restore_refuses_when_retained_data_was_lost_and_partial_marks_it_unknown(
    ws: Workspace,
) -> None:
    snaps = _two_snapshots(ws)
    s1, s2 = snaps["s1"], snaps["s2"]
    lose_retained(ws, "inter/feat", versions(s1["states"])["inter/feat"])

    before = workspace_state(ws)
    with pytest.raises(
        SnapshotRestoreError,
        match=r"inter/feat: version .* was not kept "
        r"\(its retained files are missing.*re-run its step.*nothing was "
        r"changed.*partial=True",
    ):
        restore_snapshot(ws, "v1")
    assert workspace_state(ws) == before

    report = restore_snapshot(ws, "v1", partial=True)
    assert report.data_restored == ["inter/prep", RESULTS, "src", SRC]
    [(ref, why)] = report.not_restored
    assert ref == "inter/feat" and "not kept" in why and "re-run" in why

    def check_v1(workspace: Workspace) -> None:
        now = workspace.store.state()
        assert versions(now) == versions(s1["states"])
        assert statuses(now) == {**statuses(s1["states"]), "inter/feat": "unknown"}
        # Data that could not be brought back stays as it was, and is marked unknown.
        assert read(workspace, "inter/feat") == s2["data"]["inter/feat"]
        assert read(workspace, SRC) == s1["data"][SRC]

    check_v1(ws)
    check_v1(Workspace.open(ws.root))
    assert leftovers(ws.root) == []
    # Unknown data may not be read by a step.
    with pytest.raises(UnknownRefStateError, match="inter/feat"):
        run_step(ws, "reader", ["inter/feat"], {"inter/reader": "x\n"})


def test_restore_by_hash_prefix_and_progress(ws: Workspace) -> None:
    snaps = _two_snapshots(ws)
    seen: list[str] = []
    report = restore_snapshot(ws, snaps["v1"].hash[:10], progress=seen.append, partial=True)
    assert report.info.hash == snaps["v1"].hash
    assert seen == sorted({*snaps["s1"]["states"], "code", "src"})


# ---------------------------------------------------------------------- atomicity


def test_failure_at_last_step_of_taking_leaves_no_trace(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain(ws)
    take_snapshot(ws, "v1")

    def boom(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("disk full (injected)")

    # Injected failure at a boundary: adding the index entry (or a tag to it) is the last
    # step of taking a snapshot, after its manifest rows and results copy were written.
    monkeypatch.setattr(snapshots_module, "_add_snapshot", boom)
    monkeypatch.setattr(snapshots_module, "_add_tag", boom)

    # Adding a tag to the existing snapshot of this unchanged state: nothing changes.
    before = workspace_state(ws)
    with pytest.raises(OSError, match="injected"):
        take_snapshot(ws, "also-v1")
    assert workspace_state(ws) == before

    # A new snapshot (manifest and results copy already written when the index fails).
    chain(ws, source="a,b\n7,8\n", mae=0.9)
    before = workspace_state(ws)
    with pytest.raises(OSError, match="injected"):
        take_snapshot(ws, "v2", message="doomed")

    assert state_after_gc(ws) == before
    assert not (ws.resource_root("results") / "snapshots" / "v2").exists()
    assert len(manifests(ws)) == 1
    assert leftovers(ws.root) == []
    assert [i.tags for i in list_snapshots(ws)] == [["v1"]]

    monkeypatch.undo()
    outcome = take_snapshot(ws, "v2")  # nothing left behind blocks a retry
    assert outcome.created
    assert [i.tags for i in list_snapshots(ws)] == [["v1"], ["v2"]]
    assert (ws.resource_root("results") / "snapshots" / "v2" / "exp" / "lineage.json").exists()


def test_failure_while_archiving_results_leaves_no_trace(ws: Workspace) -> None:
    chain(ws)
    squatter = ws.resource_root("results") / "snapshots" / "v1"
    write(squatter / "notes.txt", "someone else's folder\n")
    before = workspace_state(ws)

    with pytest.raises(SnapshotError) as caught:
        take_snapshot(ws, "v1")

    message = str(caught.value)
    assert str(squatter) in message and "already exists" in message
    assert "choose another tag" in message
    assert state_after_gc(ws) == before
    assert manifests(ws) == []
    assert index_json(ws) == {"snapshots": []}
    assert leftovers(ws.root) == []
    assert take_snapshot(ws, "v1-retry").created


def test_failure_in_second_results_resource_rolls_back_the_first(ws: Workspace) -> None:
    ws.add_resource("results2", "results", path="results2")
    chain(ws)
    fresh_step(ws, "report", ["inter/prep"], {}, results={"rows": 1}, results_dir="results2/rep")
    write(ws.resource_root("results2") / "snapshots" / "v1" / "keep.txt", "x\n")
    before = workspace_state(ws)
    with pytest.raises(SnapshotError):
        take_snapshot(ws, "v1")
    assert state_after_gc(ws) == before
    assert not (ws.resource_root("results") / "snapshots" / "v1").exists()
    assert leftovers(ws.root) == []


# ---------------------------------------------------------------------------- diff


def test_diff_names_refs_and_old_and_new_values(ws: Workspace) -> None:
    snaps = _two_snapshots(ws)
    s1, s2 = snaps["s1"]["states"], snaps["s2"]["states"]
    v = {
        ref: (
            short(s1[ref].version) if ref in s1 else None,
            short(s2[ref].version) if ref in s2 else None,
        )
        for ref in s1.keys() | s2.keys()
    }

    changes = {c.ref: c for c in diff_states(lineage_state(ws, "v1"), lineage_state(ws, "v2"))}

    assert set(changes) == {SRC, "inter/prep", "inter/feat", "inter/extra", RESULTS}
    assert "inter/lookup" not in changes  # re-run with same data: only its times changed
    assert changes[SRC] == RefChange(SRC, "changed", [f"version {v[SRC][0]} -> {v[SRC][1]}"])
    assert changes["inter/prep"].kind == "changed"
    assert changes["inter/prep"].changes == [
        f"version {v['inter/prep'][0]} -> {v['inter/prep'][1]}",
        "parameter scale: 1 -> 2",
        f"input {SRC} {v[SRC][0]} -> {v[SRC][1]}",
    ]
    assert changes["inter/feat"].changes == [
        f"version {v['inter/feat'][0]} -> {v['inter/feat'][1]}",
        f"input {SRC} {v[SRC][0]} -> {v[SRC][1]}",
    ]
    assert changes["inter/extra"] == RefChange(
        "inter/extra", "added", [f"version {v['inter/extra'][1]}"]
    )
    assert changes[RESULTS].changes == [
        f"version {v[RESULTS][0]} -> {v[RESULTS][1]}",
        f"input inter/feat {v['inter/feat'][0]} -> {v['inter/feat'][1]}",
        f"input inter/prep {v['inter/prep'][0]} -> {v['inter/prep'][1]}",
        "metrics changed",
    ]
    backwards = {c.ref: c for c in diff_states(lineage_state(ws, "v2"), lineage_state(ws, "v1"))}
    assert backwards["inter/extra"] == RefChange(
        "inter/extra", "removed", [f"version {v['inter/extra'][1]}"]
    )
    assert backwards["inter/prep"].changes[1] == "parameter scale: 2 -> 1"

    # `current` as the B side: right after v2 nothing differs; after restoring v1 only the
    # status of the ref whose data could not be brought back.
    assert diff_states(lineage_state(ws, "v2"), lineage_state(ws, "current")) == []
    lose_retained(ws, "inter/feat", s1["inter/feat"].version)
    restore_snapshot(ws, "v1", partial=True)
    assert diff_states(lineage_state(ws, "v1"), lineage_state(ws, "current")) == [
        RefChange("inter/feat", "changed", ["status ok -> unknown"])
    ]
    assert lineage_state(ws, snaps["v2"].hash[:8]).keys() == s2.keys()


# -------------------------------------------------------------------------- errors


def test_unknown_name_is_snapshot_not_found_and_changes_nothing(ws: Workspace) -> None:
    chain(ws)
    take_snapshot(ws, "v1")
    before = workspace_state(ws)
    for action in (
        lambda: resolve_snapshot(ws, "nope"),
        lambda: restore_snapshot(ws, "nope"),
        lambda: lineage_state(ws, "nope"),
        lambda: delete_snapshot(ws, "nope"),
    ):
        with pytest.raises(SnapshotNotFoundError) as caught:
            action()
        assert isinstance(caught.value, DwsError)
        message = str(caught.value)
        assert "'nope'" in message and "v1" in message and "history" in message
    assert workspace_state(ws) == before


def _many_snapshots(ws: Workspace, count: int) -> list[str]:
    """`count` real snapshots of distinct states (a source observed at made-up versions)."""
    hashes = []
    for i in range(count):
        ws.store.observe("src/feed.csv", f"{i:032x}")
        outcome = take_snapshot(ws)
        assert outcome.created
        hashes.append(outcome.info.hash)
    return hashes


def test_hash_prefix_resolution_rules(ws: Workspace) -> None:
    hashes = _many_snapshots(ws, 17)  # 17 hashes, 16 hex digits: two share a first character
    assert len(set(hashes)) == 17
    firsts = [h[0] for h in hashes]
    shared = next(c for c in firsts if firsts.count(c) > 1)
    before = workspace_state(ws)

    # Prefixes under 4 characters never match, even unique ones.
    with pytest.raises(SnapshotNotFoundError):
        resolve_snapshot(ws, shared)
    unique3 = next(h for h in hashes if sum(o.startswith(h[:3]) for o in hashes) == 1)
    with pytest.raises(SnapshotNotFoundError, match="no snapshot"):
        resolve_snapshot(ws, unique3[:3])
    for h in hashes:
        if sum(o.startswith(h[:4]) for o in hashes) == 1:
            assert resolve_snapshot(ws, h[:4]).hash == h
        assert resolve_snapshot(ws, h).hash == h
        assert resolve_snapshot(ws, h[:16]).hash == h
    assert workspace_state(ws) == before


def test_ambiguous_prefix_of_four_or_more_characters(ws: Workspace) -> None:
    [real] = _many_snapshots(ws, 1)
    # Construct the ambiguity: an index entry whose hash shares the first 6 characters.
    twin = real[:6] + ("f" if real[6] != "f" else "e") + real[7:]
    damage(
        ws,
        "INSERT INTO dws_snapshots (workspace_id, hash, position, message, created, "
        "metrics, results) SELECT workspace_id, :twin, position + 1, message, created, "
        "metrics, results FROM dws_snapshots WHERE hash = :real",
        twin=twin,
        real=real,
    )
    before = workspace_state(ws)

    for prefix in (real[:4], real[:6]):
        with pytest.raises(SnapshotNotFoundError) as caught:
            resolve_snapshot(ws, prefix)
        message = str(caught.value)
        assert "ambiguous" in message and repr(prefix) in message
        assert real[:16] in message and twin[:16] in message and "more characters" in message
        with pytest.raises(SnapshotNotFoundError, match="ambiguous"):
            restore_snapshot(ws, prefix)
    assert resolve_snapshot(ws, real[:7]).hash == real
    assert resolve_snapshot(ws, twin[:7]).hash == twin
    assert resolve_snapshot(ws, real).hash == real
    assert workspace_state(ws) == before


def test_duplicate_tag_on_a_different_state_is_refused(ws: Workspace) -> None:
    chain(ws)
    first = take_snapshot(ws, "v1").info
    chain(ws, source="x,y\n9,9\n", mae=3.0)
    before = workspace_state(ws)
    with pytest.raises(SnapshotError) as caught:
        take_snapshot(ws, "v1", message="again")
    message = str(caught.value)
    assert "'v1'" in message and first.hash[:12] in message and "another tag" in message
    assert isinstance(caught.value, DwsError)
    assert workspace_state(ws) == before
    assert [i.tags for i in list_snapshots(ws)] == [["v1"]]


@pytest.mark.parametrize(
    "tag",
    [
        "has space",
        "tab\there",
        "a/b",
        "a\\b",
        "current",
        "",
        ".",
        "..",
        "abcdef12",
        "0123456789abcdef",
        "x" * 129,
    ],
)
def test_invalid_tags_are_refused_before_anything_is_written(ws: Workspace, tag: str) -> None:
    chain(ws)
    before = workspace_state(ws)
    with pytest.raises(SnapshotError) as caught:
        validate_tag(tag)
    assert repr(tag) in str(caught.value)
    with pytest.raises(SnapshotError):
        take_snapshot(ws, tag)
    assert workspace_state(ws) == before
    assert index_json(ws) == {"snapshots": []} and manifests(ws) == []


@pytest.mark.parametrize(
    "tag", ["v1", "best-model", "run_2024.01", "ABCDEF12", "v-abcdef12", "x" * 128]
)
def test_valid_tags_are_accepted(tag: str) -> None:
    assert validate_tag(tag) == tag


def test_tag_that_is_a_usable_hash_prefix_is_refused(ws: Workspace) -> None:
    chain(ws)
    target = take_snapshot(ws).info.hash
    prefix = target[:4]
    assert resolve_snapshot(ws, prefix).hash == target
    chain(ws, source="q,r\n1,1\n", mae=2.0)
    try:
        take_snapshot(ws, prefix)  # should be refused like 'abcdef12' ...
    except SnapshotError:
        pass
    # ... because otherwise `restore <prefix>` now means a different snapshot.
    assert resolve_snapshot(ws, prefix).hash == target


def _bad_record(ws: Workspace, ref: str, body: str) -> int:
    """A record row holding `body` (as a restored backup of another version might)."""
    sql(
        ws,
        "INSERT INTO dws_records (workspace_id, ref, version, good, digest, identity, body) "
        "VALUES (:ws, :ref, 'v', TRUE, :digest, :digest, :body)",
        ref=ref,
        body=body,
        digest=f"damaged-{len(body)}-{abs(hash(body))}"[:32],
    )
    return sql(ws, "SELECT max(id) FROM dws_records")[0][0]


@pytest.mark.parametrize(
    "body", ['{"format": 1, "hash": "', "[]", '{"ref": "inter/prep", "version": 7}', "OTHER_REF"]
)
def test_corrupt_manifest_is_workspace_config_error_on_restore(ws: Workspace, body: str) -> None:
    snaps = _two_snapshots(ws)
    digest = snaps["v1"].hash
    if body == "OTHER_REF":  # a good record, of another ref
        body = sql(
            ws,
            "SELECT r.body FROM dws_snapshot_refs s JOIN dws_records r ON "
            "r.id = s.record_id WHERE s.hash = :hash AND s.ref = :ref",
            hash=digest,
            ref=SRC,
        )[0][0]
    damage(
        ws,
        "UPDATE dws_snapshot_refs SET record_id = :id WHERE hash = :hash AND ref = 'inter/prep'",
        id=_bad_record(ws, "inter/prep", body),
        hash=digest,
    )
    before = workspace_state(ws)
    for action in (
        lambda: restore_snapshot(ws, "v1"),
        lambda: lineage_state(ws, "v1"),
        lambda: diff_states(lineage_state(ws, "v1"), ws.store.state()),
        lambda: restore_snapshot(ws, "v1", partial=True),
    ):
        with pytest.raises(WorkspaceConfigError) as caught:
            action()
        message = str(caught.value)
        assert f"workspace store {ws.store.shown}" in message
        assert f"snapshot {digest[:12]}" in message and "inter/prep" in message
        assert "restore the store from a backup" in message
    assert workspace_state(ws) == before
    assert versions(ws.store.state()) == versions(snaps["s2"]["states"])
    assert restore_snapshot(ws, "v2").info.hash == snaps["v2"].hash  # the others still work


INDEX_DAMAGE = {
    "metrics not JSON": "UPDATE dws_snapshots SET metrics = '{not json'",
    "results not JSON": "UPDATE dws_snapshots SET results = '[{'",
    "results not a list": "UPDATE dws_snapshots SET results = '{}'",
    "results entry not an object": "UPDATE dws_snapshots SET results = '[7]'",
    "results entry without folder": (
        """UPDATE dws_snapshots SET results = '[{"ref": "results/exp"}]'"""
    ),
    "metrics not an object": "UPDATE dws_snapshots SET metrics = '[1, 2]'",
    "message not text": "UPDATE dws_snapshots SET message = x'00ff'",
    "created not text": "UPDATE dws_snapshots SET created = x'07'",
    "hash not a hash": "UPDATE dws_snapshots SET hash = 'not-a-hash'",
    "tag naming a missing snapshot": "UPDATE dws_snapshot_tags SET hash = :missing",
    "tag not a tag": "UPDATE dws_snapshot_tags SET tag = 'has space'",
    "tag not text": "UPDATE dws_snapshot_tags SET tag = x'01'",
}


@pytest.mark.parametrize("damaged", sorted(INDEX_DAMAGE))
def test_corrupt_index_is_workspace_config_error(ws: Workspace, damaged: str) -> None:
    if "x'" in INDEX_DAMAGE[damaged]:
        sqlite_only(ws)
    chain(ws)
    take_snapshot(ws, "v1")
    damage(ws, INDEX_DAMAGE[damaged] + " WHERE workspace_id = :ws", missing="0" * 32)
    before = workspace_state(ws)
    for action in (
        lambda: list_snapshots(ws),
        lambda: resolve_snapshot(ws, "v1"),
        lambda: take_snapshot(ws, "v2"),
        lambda: restore_snapshot(ws, "v1"),
        lambda: delete_snapshot(ws, "v1"),
    ):
        with pytest.raises(WorkspaceConfigError) as caught:
            action()
        message = str(caught.value)
        assert f"snapshot index of workspace store {ws.store.shown}" in message, message
        assert "restore the store from a backup" in message
    assert workspace_state(ws) == before


@pytest.mark.parametrize("table", ["dws_snapshots", "dws_snapshot_tags"])
def test_a_position_that_is_not_a_number_is_named_when_a_snapshot_is_added(
    ws: Workspace, table: str
) -> None:
    sqlite_only(ws)
    chain(ws)
    take_snapshot(ws, "v1")
    damage(ws, f"UPDATE {table} SET position = 'null'")
    chain(ws, source="x,y\n9,9\n", mae=3.0)
    before = workspace_state(ws)
    with pytest.raises(WorkspaceConfigError) as caught:
        take_snapshot(ws, "v2")
    message = str(caught.value)
    assert f"snapshot index of workspace store {ws.store.shown} is corrupt" in message
    assert "'null', not a number" in message and "restore the store from a backup" in message
    assert state_after_gc(ws) == before


# -------------------------------------------------------------------------- delete


def test_delete_removes_manifest_index_entry_and_results_when_asked(ws: Workspace) -> None:
    snaps = _two_snapshots(ws)
    results_root = ws.resource_root("results")
    assert snaps["v1"].hash in manifests(ws)

    deleted = delete_snapshot(ws, "v1")

    assert deleted.hash == snaps["v1"].hash
    assert manifests(ws) == [snaps["v2"].hash]
    assert [i.tags for i in list_snapshots(ws)] == [["v2"]]
    assert (results_root / "snapshots" / "v1" / "exp" / "results.json").exists()  # kept
    with pytest.raises(SnapshotNotFoundError):
        resolve_snapshot(ws, snaps["v1"].hash)

    deleted2 = delete_snapshot(ws, snaps["v2"].hash[:8], remove_results=True)
    assert deleted2.hash == snaps["v2"].hash
    assert list_snapshots(ws) == [] and manifests(ws) == []
    assert not (results_root / "snapshots" / "v2").exists()
    assert (results_root / "snapshots" / "v1").exists()
    # Deleting a snapshot never touches the live data or the current lineage.
    assert versions(ws.store.state()) == versions(snaps["s2"]["states"])
    assert read(ws, "inter/prep") == snaps["s2"]["data"]["inter/prep"]


def test_restore_of_another_snapshot_still_works_after_delete(ws: Workspace) -> None:
    snaps = _two_snapshots(ws)
    delete_snapshot(ws, "v2", remove_results=True)
    collect_garbage(ws)
    report = restore_snapshot(ws, "v1")
    assert report.data_restored == ["inter/feat", "inter/prep", RESULTS, "src", SRC]
    assert (ws.local_path(RESULTS) / "results.json").read_bytes() == snaps["s1"]["results_json"]
    assert versions(Workspace.open(ws.root).store.state()) == versions(snaps["s1"]["states"])


def test_deleting_the_last_restored_snapshot_keeps_the_store_readable(ws: Workspace) -> None:
    snaps = _two_snapshots(ws)
    lose_retained(ws, "inter/feat", snaps["s1"]["states"]["inter/feat"].version)
    restore_snapshot(ws, "v1", partial=True)
    expected = {ref: (s.version, s.status) for ref, s in ws.store.items()}

    delete_snapshot(ws, "v1", remove_results=True)

    fresh = Workspace.open(ws.root)
    assert {ref: (s.version, s.status) for ref, s in fresh.store.items()} == expected
    assert fresh.store.get("inter/feat").status == "unknown"
    # Another process reads it too, and new lineage can still be recorded on top of it.
    result = run_python(
        textwrap.dedent("""
        import json
        from dws_dagster import Workspace
        ws = Workspace.open('.')
        print(json.dumps({ref: s.version for ref, s in ws.store.items()}))
    """),
        ws.root,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {ref: v for ref, (v, _) in expected.items()}
    fresh_step(fresh, "feat", [SRC], {"inter/feat": "rebuilt\n"})
    assert Workspace.open(ws.root).store.get("inter/feat").status == "ok"
    assert (
        restore_snapshot(Workspace.open(ws.root), "v2", partial=True).info.hash == snaps["v2"].hash
    )


# --------------------------------------------------------------------- concurrency


RACE = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from dws_dagster import Workspace
    from dws_dagster.snapshots.take import take_snapshot
    tag, sync, others = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    ws = Workspace.open('.')
    ws.store.state()
    (sync / tag).touch()
    deadline = time.monotonic() + 60
    while not all((sync / o).exists() for o in others):
        if time.monotonic() > deadline:
            sys.exit('peer never started')
        time.sleep(0.001)
    out = take_snapshot(ws, tag, message='by ' + tag)
    print(json.dumps({'hash': out.info.hash, 'created': out.created,
                      'tag_added': out.tag_added}))
""")


def test_two_processes_snapshot_the_same_state_at_once(ws: Workspace, tmp_path: Path) -> None:
    chain(ws)
    expected = snapshot_hash(ws, ws.store.state(), *current_data(ws))
    sync = tmp_path / "sync"
    sync.mkdir()
    tags = ["alpha", "beta"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(
            pool.map(
                lambda tag: run_python(
                    RACE, ws.root, tag, str(sync), *[t for t in tags if t != tag]
                ),
                tags,
            )
        )
    for run in runs:
        assert run.returncode == 0, run.stderr
    outs = [json.loads(run.stdout) for run in runs]
    assert {o["hash"] for o in outs} == {expected}
    assert sorted(o["created"] for o in outs) == [False, True]
    assert sorted(o["tag_added"] for o in outs) == [False, True]

    [info] = list_snapshots(ws)
    assert info.hash == expected and sorted(info.tags) == tags
    assert manifests(ws) == [expected]
    archived = sorted(p.name for p in (ws.resource_root("results") / "snapshots").iterdir())
    assert archived == [info.tags[0]]
    assert leftovers(ws.root) == []


# ------------------------------------------------------------------- known bugs


def test_kept_copy_survives_an_in_place_rewrite(ws: Workspace) -> None:
    chain(ws)
    v1 = ws.version_of("inter/prep")
    kept = keep_copy(ws.resource_root("inter"), "prep", v1, ws.local_path("inter/prep"))
    take_snapshot(ws, "v1")
    write(ws.root / "data/src/trips.csv", "a,b\n5,5\n")
    # The plain helper writes part-0.csv in place, as most Python scripts do.
    run_step(ws, "prep", [SRC], {"inter/prep": "A,B\n5,5\n"}, parameters={"scale": 2})
    assert content_version(kept) == v1
    report = restore_snapshot(ws, "v1", partial=True)  # the source's old data was not kept
    assert "inter/prep" in report.data_restored


def test_archived_results_survive_an_in_place_rewrite_after_restore(ws: Workspace) -> None:
    rewrite(ws.root / "data/src/trips.csv", "a\n1\n")
    fresh_step(ws, "train", [SRC], {RESULTS: "pred-v1\n"}, results={"m": 1}, results_dir=RESULTS)
    take_snapshot(ws, "v1")
    archived = ws.resource_root("results") / "snapshots" / "v1" / "exp"
    archived_before = tree_state(archived)
    fresh_step(ws, "train", [SRC], {RESULTS: "pred-v2\n"}, results={"m": 2}, results_dir=RESULTS)
    take_snapshot(ws, "v2")
    assert RESULTS in restore_snapshot(ws, "v1").data_restored
    assert read(ws, RESULTS) == "pred-v1\n"
    # Re-run the results step writing its prediction file in place.
    run_step(ws, "train", [SRC], {RESULTS: "pred-v3\n"}, results={"m": 3}, results_dir=RESULTS)
    assert tree_state(archived) == archived_before


def test_restoring_results_at_resource_root_keeps_archived_copies(ws: Workspace) -> None:
    rewrite(ws.root / "data/src/trips.csv", "a\n1\n")
    fresh_step(ws, "train", [SRC], {}, results={"m": 1}, results_dir="results")
    take_snapshot(ws, "v1")
    run_step(ws, "train", [SRC], {}, results={"m": 2}, results_dir="results")
    take_snapshot(ws, "v2")
    folder = ws.resource_root("results") / "snapshots"
    archived_before = tree_state(folder)
    assert {p.split("/")[0] for p in archived_before} == {"v1", "v2"}

    report = restore_snapshot(ws, "v1")

    assert report.data_restored == ["results"]
    assert json.loads((ws.resource_root("results") / "results.json").read_text())["metrics"] == {
        "m": 1
    }
    assert tree_state(folder) == archived_before


def test_archived_results_copy_agrees_with_its_lineage_json(ws: Workspace) -> None:
    rewrite(ws.root / "data/src/trips.csv", "a\n1\n")
    fresh_step(ws, "train", [SRC], {}, results={"m": 1}, results_dir=RESULTS)
    builder = (
        LineageBuilder()
        .with_step_name("train")
        .with_parameters({})
        .with_workspace_directory(ws.root)
        .with_input_refs([SRC])
        .as_results_step(ws.local_path(RESULTS))
    )
    with pytest.raises(RuntimeError, match="crash"), builder.eval() as lineage:
        lineage.write_results({"m": 99})
        raise RuntimeError("crash after writing results")
    assert ws.store.get(RESULTS).status == "unknown"

    outcome = take_snapshot(ws, "v1")

    copy_dir = ws.resource_root("results") / "snapshots" / "v1" / "exp"
    if not copy_dir.exists():  # skipping it is fine, if the user is told
        assert any(RESULTS in w for w in outcome.warnings)
        return
    claimed = json.loads((copy_dir / "lineage.json").read_text())["version"]
    data = {p: h for p, h in tree_state(copy_dir).items() if p != "lineage.json"}
    live = tree_state(ws.local_path(RESULTS))
    assert data == live
    assert ws.version_of(RESULTS) == claimed or any(RESULTS in w for w in outcome.warnings)


# ------------------------------------------------------- the hash input, read from JSON

IDENTITY_CASES = [
    LineageRecord(ref="inter/a", version="v1"),
    LineageRecord(ref="inter/a", version=None, status="failed", error="boom"),
    LineageRecord(ref="src/a", version="v2", step=StepInfo(name="observation", kind="observation")),
    LineageRecord(
        ref="results/exp",
        version="v3",
        step=StepInfo(
            name="train",
            kind="dagster-asset",
            run_id="r-1",
            partition="2026-01",
            code_version="7",
            git_commit="abc",
            code=(("code/x", "c1"),),
            command_line=("train.py", "--gamma", "0.1"),
        ),
        parameters={"gamma": 0.1, "nested": {"a": [1, 2]}},
        inputs=(("inter/p", "v9"),),
        provenance={"inter/p": "v9", "src/a": "v2"},
        start_time="2026-01-01T00:00:00",
        end_time="2026-01-01T00:00:05",
        metrics={"mae": 1.5},
        extra={"checks": []},
    ),
]


@pytest.mark.parametrize("record", IDENTITY_CASES)
def test_record_identity_from_json_is_the_records_identity(record: LineageRecord) -> None:
    from dws_dagster.workspace.files import canonical_json

    data = json.loads(json.dumps(record.to_json()))
    assert canonical_json(snapshots_module.record_identity(data)) == canonical_json(
        record.identity()
    )
    # a record written without the optional keys reads the same way
    assert (
        snapshots_module.record_identity({"ref": "x", "step": {}})
        == LineageRecord.from_json({"ref": "x", "step": {}}).identity()
    )


def test_diff_sees_a_status_change_of_an_unchanged_record(ws: Workspace) -> None:
    rec = LineageRecord(ref="inter/a", version="v1", step=StepInfo(name="s")).to_json()
    before = {"inter/a": RefState(owner="s", record=rec)}
    after = {"inter/a": RefState(owner="s", record=copy.deepcopy(rec), unknown=True)}
    assert diff_states(before, after) == [RefChange("inter/a", "changed", ["status ok -> unknown"])]
    assert diff_states(before, {"inter/a": RefState(owner="s", record=copy.deepcopy(rec))}) == []


def test_diff_names_a_resource_added_between_snapshots_and_every_ref_after_it(ws) -> None:
    """A source-data resource on one side only is named as added; the refs that sort after it
    are compared as well (the diff once reused its own arguments' names for that row, so the
    next ref's lookup failed)."""
    write(ws.local_path("src") / "a.csv", "x\n1\n")
    write(ws.root / "code" / "m.py", "print(1)\n")
    take_snapshot(ws, "one")
    ws.add_resource("aaa", "source-data", path="data/aaa")
    write(ws.local_path("aaa") / "f.csv", "y\n2\n")
    rewrite(ws.local_path("src") / "a.csv", "x\n2\n")
    take_snapshot(ws, "two")
    changes = {change.ref: change for change in diff_lineage(ws, "one", "two")}
    assert changes["aaa"].kind == "added"
    assert changes["src"].kind == "changed"
    assert {change.ref: change.kind for change in diff_lineage(ws, "two", "one")}[
        "aaa"
    ] == "removed"


# ------------------------------------------- refusals leave .dataworkspace/ as it was


def _meta_tree(ws: Workspace) -> dict[str, tuple[str, int, int] | str]:
    """Every entry under `.dataworkspace/`: each file's bytes (hashed), size and modification
    time, each folder by name (a refusal that makes a folder changed something too)."""
    found: dict[str, tuple[str, int, int] | str] = {}
    for folder, dirs, files in os.walk(ws.meta_dir):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), ws.meta_dir)] = "folder"
        for name in files:
            path = os.path.join(folder, name)
            info = os.stat(path)
            with open(path, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            found[os.path.relpath(path, ws.meta_dir)] = (digest, info.st_size, info.st_mtime_ns)
    return found


def _settled(ws: Workspace) -> None:
    """Let SQLite fold its write-ahead log into the store file (the last connection to close
    does), as it stands after any command of a process that ended."""
    forget_databases()
    sqlite3.connect(ws.meta_dir / "store.db").close()


def _cli_process(ws: Workspace, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dws_dagster.cli", *argv],
        cwd=ws.root,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _refusal_ws(root: Path) -> Workspace:
    """A workspace with a snapshot `v1` of source data, an intermediate ref and a results
    ref, then changed (a new source file, new step outputs) so that any command that versions
    the data has hashes to learn: old enough (RACY_SECONDS) for the cache to keep them."""
    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    chain(ws)
    past = time.time() - 3600
    for path in ws.root.rglob("*"):
        if path.is_file() and ".dataworkspace" not in path.parts:
            os.utime(path, (past, past))
    assert _cli_process(ws, "snapshot", "v1").returncode == 0
    chain(ws, source="a,b\n3,4\n", mae=2.5)
    write(ws.root / "data/src/extra.csv", "x\n1\n")
    for path in ws.root.rglob("*"):
        if path.is_file() and ".dataworkspace" not in path.parts:
            os.utime(path, (past, past))
    return ws


def _lose_prep_objects(ws: Workspace) -> None:
    """v1's inter/prep version is retained no more: its files are gone from the objects."""
    digest = resolve_snapshot(ws, "v1").hash
    version = next(row.version for row in rows_of(ws, digest) if row.ref == "inter/prep")
    lose_retained(ws, "inter/prep", version)


def _prep_through_a_link_outside(ws: Workspace) -> None:
    """inter/prep is now a symlink to a folder outside the workspace: writing it (as restoring
    v1's data would) would lead outside its resource."""
    outside = ws.root.parent / "outside"
    shutil.copytree(ws.local_path("inter/prep"), outside)
    shutil.rmtree(ws.local_path("inter/prep"))
    ws.local_path("inter/prep").symlink_to(outside, target_is_directory=True)


def _damage_v1_record(ws: Workspace) -> None:
    digest = resolve_snapshot(ws, "v1").hash
    damage(
        ws,
        "UPDATE dws_snapshot_refs SET record_id = :id WHERE hash = :hash AND ref = 'inter/prep'",
        id=_bad_record(ws, "inter/prep", "[]"),
        hash=digest,
    )


#: Every way `snapshot` and `restore` refuse: (what makes the refusal, command line, what the
#: one-line error says).
REFUSALS: dict[str, tuple[Any, list[str], str]] = {
    "snapshot: a tag naming another snapshot": (None, ["snapshot", "v1"], "already names"),
    "snapshot: an invalid tag": (None, ["snapshot", "has space"], "invalid tag"),
    "snapshot: a tag like a hash": (None, ["snapshot", "abcdef12"], "looks like a snapshot hash"),
    **{
        f"snapshot: corrupt index, {kind}": (
            lambda ws, kind=kind: damage(
                ws, INDEX_DAMAGE[kind] + " WHERE workspace_id = :ws", missing="0" * 32
            ),
            ["snapshot", "v2"],
            "restore the store from a backup",
        )
        for kind in ("metrics not JSON", "results not a list", "tag naming a missing snapshot")
    },
    **{
        f"snapshot: corrupt {table} position": (
            lambda ws, table=table: damage(ws, f"UPDATE {table} SET position = 'null'"),
            ["snapshot", "v2"],
            "not a number",
        )
        for table in ("dws_snapshots", "dws_snapshot_tags")
    },
    "snapshot: a results folder in the way": (
        lambda ws: (ws.resource_root("results") / "snapshots/v2").mkdir(parents=True),
        ["snapshot", "v2"],
        "already exists",
    ),
    "snapshot: a damaged results record": (
        lambda ws: damage(
            ws,
            "UPDATE dws_records SET body = '[]' WHERE workspace_id = :ws AND ref = 'results/exp' "
            "AND id = (SELECT record_id FROM dws_refs WHERE ref = 'results/exp')",
        ),
        ["snapshot", "v2"],
        "results/exp",
    ),
    "restore: data not kept": (_lose_prep_objects, ["restore", "v1"], "was not kept"),
    "restore: a symlink leading outside": (
        _prep_through_a_link_outside,
        ["restore", "v1"],
        "symlink",
    ),
    "restore: an unknown snapshot": (None, ["restore", "v9"], "v9"),
    "restore: a damaged record": (_damage_v1_record, ["restore", "v1"], "inter/prep"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_snapshot_or_restore_changes_nothing_under_dataworkspace(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte for byte and time for time, every file under `.dataworkspace/` (the file-hash
    cache, the objects, the store) is what it was after a refused `snapshot` or `restore`
    (the real CLI, in a process of its own): they plan first and touch later."""
    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    ws = _refusal_ws(tmp_path / "ws")
    make, argv, said = REFUSALS[case]
    if make is not None:
        make(ws)
    data_before = workspace_state(ws)[0]
    _settled(ws)
    before = _meta_tree(ws)
    done = _cli_process(ws, *argv)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and said in done.stderr, done.stderr
    after = _meta_tree(ws)
    assert {k: v for k, v in after.items() if k not in before} == {}
    assert {k: v for k, v in before.items() if after.get(k) != v} == {}
    assert workspace_state(ws)[0] == data_before


# ------------------------------------------------- names near the 255-byte limit


def _name_of(size: int, wide: bool) -> str:
    """A file name of exactly `size` bytes in UTF-8 (with two-byte letters when `wide`)."""
    if not wide:
        return "n" * size
    return "é" * (size // 2) + "n" * (size % 2)


_SIZES = st.integers(min_value=1, max_value=255)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(size=st.one_of(st.just(255), st.just(210), _SIZES), wide=st.booleans())
def test_every_name_a_snapshot_accepts_restores(size: int, wide: bool) -> None:
    """A ref whose last component is any valid length (up to 255 bytes) snapshots and
    restores: every staging, set-aside and kept name beside it has a fixed length."""
    name = _name_of(size, wide)
    assert len(name.encode()) == size
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.init(Path(tmp) / "ws")
        ws.add_resource("src", "source-data", path="data/src")
        ws.add_resource("inter", "intermediate-data", path="data/inter")
        ws.add_resource("results", "results", path="results")
        ref, report = f"inter/{name}", f"results/{name}"
        write(ws.root / "data/src/trips.csv", "a\n1\n")

        def steps(n: int) -> None:
            fresh_step(ws, "prep", [SRC], {ref: f"A\n{n}\n"})
            builder = (  # a single-file result: archived with its lineage beside it
                LineageBuilder()
                .with_step_name("report")
                .with_parameters({})
                .with_workspace_directory(ws.root)
                .with_input_refs([ref])
            )
            with builder.eval() as lineage:
                lineage.add_output_ref(report)
                rewrite(ws.local_path(report), f"report {n}\n")

        steps(1)
        first = {r: ws.version_of(r) for r in (ref, report)}
        take_snapshot(ws, "v1")
        steps(2)
        assert take_snapshot(ws, "v2").info.results == [{"ref": report, "folder": "snapshots/v2"}]
        assert restore_snapshot(ws, "v1").data_restored == [ref, report]
        assert {r: ws.version_of(r) for r in (ref, report)} == first
        assert restore_snapshot(ws, "v2").data_restored == [ref, report]
        # A kept copy of the replaced version (not retained: a new one) goes beside it too.
        steps(3)
        assert restore_snapshot(ws, "v1").data_restored == [ref, report]
        forget_databases()


@settings(max_examples=40, deadline=None)
@given(size=_SIZES, wide=st.booleans())
def test_staging_and_temporary_names_fit_whatever_the_name(size: int, wide: bool) -> None:
    """Each name the code builds beside a target (staging, set aside in a swap, a kept copy's
    staging, an atomic write's temporary file) fits in a file name, and each is used for real
    on disk: a swap, a kept copy and an atomic write of a file named `size` bytes."""
    name = _name_of(size, wide)
    for built in (staging_name(name), old_name(name)):
        assert len(built.encode()) <= 255 and is_staging_name(staging_name(name), name)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / name
        write(target / "a.csv", "1\n")
        staged = staging_path(target)
        write(staged / "a.csv", "2\n")
        swap_into_place(staged, target, keep_old_as=Path(tmp) / "kept" / name)
        assert (target / "a.csv").read_text() == "2\n"
        assert (Path(tmp) / "kept" / name / "a.csv").read_text() == "1\n"
        kept = keep_copy(Path(tmp), name, "0" * 32, target)
        assert (kept / "a.csv").read_text() == "2\n"
        atomic_write_bytes(target / name, b"x")
        assert (target / name).read_bytes() == b"x"
        assert sorted(p.name for p in Path(tmp).iterdir()) == sorted(["kept", name, ".dws"])


# --------------------------------------- file names as bytes, folders of any depth

#: Names that are not UTF-8: Latin-1, a lone continuation byte, an overlong form, a cut
#: three-byte sequence; and ones that are (with a newline; with backslashes, an ordinary
#: character of a POSIX name, not a separator).
_BYTE_NAMES = st.lists(
    st.sampled_from(
        [b"caf\xe9.csv", b"\x80x", b"\xc0\xafy", b"\xe2\x82.csv", b"new\nline", b"a\\b.csv", b"\\"]
    ),
    min_size=1,
    max_size=3,
    unique=True,
)


def _put(folder: Path, name: bytes, data: bytes) -> None:
    path = os.path.join(os.fsencode(folder), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


def _byte_tree(folder: Path) -> dict[bytes, bytes]:
    """Every file under `folder` by its path's bytes (relative), with its bytes."""
    found = {}
    top = os.fsencode(folder)
    for where, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(where, name)
            if not os.path.isfile(path):
                continue  # a named pipe: not data (opening it would block)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, top)] = handle.read()
    return found


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(names=_BYTE_NAMES, nested=st.booleans())
def test_file_names_that_are_not_utf8_are_snapshotted_and_restored_as_bytes(
    names: list[bytes], nested: bool
) -> None:
    """File names are bytes on POSIX. Landed in source data (in a folder whose name is not
    UTF-8 either, when `nested`), they are retained and brought back byte for byte, and the
    snapshots after them are not blocked."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.init(Path(tmp) / "ws")
        ws.add_resource("src", "source-data", path="data/src")
        src = ws.resource_root("src")
        write(src / "trips.csv", "a\n1\n")
        for number, name in enumerate(names):
            _put(src, (b"d\xff/" if nested else b"") + name, b"row %d\n" % number)
        first = _byte_tree(src)
        assert take_snapshot(ws, "v1").created
        for name in names:
            _put(src, (b"d\xff/" if nested else b"") + name, b"changed\n")
        write(src / "more.csv", "b\n")
        assert take_snapshot(ws, "v2").created
        assert [change.ref for change in diff_lineage(ws, "v1", "v2")] == ["src"]
        assert restore_snapshot(ws, "v1").data_restored == ["src"]
        assert _byte_tree(src) == first
        assert not take_snapshot(ws).created  # the same state as v1: nothing new, no error
        forget_databases()


def test_the_cli_snapshots_restores_and_warns_about_names_that_are_not_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the real CLI, text and JSON: a landed file and a named pipe whose names are not
    UTF-8 (the pipe is skipped with a warning naming it, its byte escaped)."""
    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    ws = Workspace.init(tmp_path / "ws")
    ws.add_resource("src", "source-data", path="data/src")
    src = ws.resource_root("src")
    _put(src, b"caf\xe9.csv", b"a\n1\n")
    os.mkfifo(os.path.join(os.fsencode(src), b"pipe\xff"))
    first = _byte_tree(src)
    done = _cli_process(ws, "snapshot", "v1")
    assert done.returncode == 0, done.stderr
    assert "pipe\\xff (named pipe)" in done.stderr
    _put(src, b"caf\xe9.csv", b"a\n2\n")
    done = _cli_process(ws, "snapshot", "--format", "json", "v2")
    assert done.returncode == 0, done.stderr
    assert any("pipe\\xff" in w for w in json.loads(done.stdout)["warnings"])
    done = _cli_process(ws, "restore", "v1")
    assert done.returncode == 0, done.stderr
    assert _byte_tree(src) == first


def _deep(folder: Path, depth: int) -> Path:
    """`folder/d/d/…/d` (`depth` levels), made one level at a time (`os.makedirs` recurses)."""
    path = folder
    path.mkdir(parents=True, exist_ok=True)
    for _ in range(depth):
        path = path / "d"
        path.mkdir()
    return path


def test_data_nested_1200_folders_deep_is_versioned_snapshotted_and_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No walk recurses: `version`, `snapshot` (with its results copy), `restore` (from the
    retained files and from a kept copy), `delete-snapshot --remove-results` and `gc` over
    folders nested deeper than Python's recursion limit, through the real CLI."""
    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    try:
        _deep_round_trip(tmp_path / "ws")
    finally:  # pytest's own clean-up of old temporary folders recurses: leave it nothing deep
        remove_tree(tmp_path / "ws", ignore_errors=True)


def _deep_round_trip(root: Path) -> None:
    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("results", "results", path="results")
    write(_deep(ws.resource_root("src"), 1200) / "f.csv", "a\n1\n")
    fresh_step(ws, "report", ["src"], {"results/exp": "r\n1\n"})
    write(_deep(ws.local_path("results/exp"), 1200) / "g.csv", "deep\n")
    first = ws.version_of("src")
    done = _cli_process(ws, "version", "src")
    assert done.returncode == 0 and first[:12] in done.stdout, done.stderr
    done = _cli_process(ws, "snapshot", "v1")
    assert done.returncode == 0, done.stderr
    deepest = _deep(ws.resource_root("src"), 0)
    for _ in range(1200):
        deepest = deepest / "d"
    write(deepest / "f.csv", "a\n2\n")
    for argv in (["snapshot", "v2"], ["restore", "v1"], ["restore", "v2"], ["restore", "v1"]):
        done = _cli_process(ws, *argv)
        assert done.returncode == 0, (argv, done.stderr)
    assert Workspace.open(ws.root).version_of("src") == first
    keep_copy(ws.resource_root("src"), None, "0" * 32, ws.resource_root("src"))
    for argv in (["delete-snapshot", "--remove-results", "v1"], ["gc"]):
        done = _cli_process(ws, *argv)
        assert done.returncode == 0, (argv, done.stderr)
    assert not (ws.resource_root("results") / "snapshots/v1").exists()
