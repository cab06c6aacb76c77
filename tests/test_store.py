"""The lineage store: journal, compaction, idempotence, crash safety, many writers."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from dws_dagster import Workspace
from dws_dagster.errors import (
    LineageConflictError,
    LineageConsistencyError,
    UnknownRefStateError,
    WorkspaceConfigError,
)
from dws_dagster.workspace import store as store_module
from dws_dagster.workspace.records import LineageRecord, StepInfo

from .conftest import ROOT, run_python


def record(ref: str, version: str, step: str = "s", inputs: tuple = (),
           provenance: dict | None = None) -> LineageRecord:
    return LineageRecord(ref=ref, version=version, step=StepInfo(name=step), inputs=inputs,
                         provenance=provenance or dict(inputs), start_time="2026-01-01T00:00:00",
                         end_time="2026-01-01T00:00:01")


def journal_lines(ws: Workspace) -> list[bytes]:
    lines = []
    for path in sorted((ws.meta_dir / "lineage/journal").glob("*.jsonl")):
        lines += [line for line in path.read_bytes().splitlines() if line.strip()]
    return lines


def test_commit_and_reload(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1", "make_a")])
    reopened = Workspace.open(ws.root).store
    state = reopened.get("inter/a")
    assert state is not None and state.version == "v1" and state.owner == "make_a"
    assert state.status == "ok"


def test_same_record_twice_is_written_once(ws: Workspace) -> None:
    rec = record("inter/a", "v1")
    ws.store.commit([rec])
    ws.store.commit([rec])
    Workspace.open(ws.root).store.commit([rec])  # another process's view, same event
    assert len(journal_lines(ws)) == 1


def test_torn_last_line_is_ignored_then_repaired(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1")])
    segment = sorted((ws.meta_dir / "lineage/journal").glob("*.jsonl"))[-1]
    with open(segment, "ab") as handle:  # a writer died mid-append
        handle.write(b'{"op":"record","record":{"ref":"inter/b","vers')
    reader = Workspace.open(ws.root).store
    assert reader.get("inter/b") is None and reader.get("inter/a").version == "v1"
    reader.commit([record("inter/c", "v3")])
    lines = journal_lines(ws)
    assert all(orjson.loads(line) for line in lines)
    fresh = Workspace.open(ws.root).store
    assert {ref for ref, _ in fresh.items()} == {"inter/a", "inter/c"}


def test_corrupt_complete_line_is_reported(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1")])
    segment = sorted((ws.meta_dir / "lineage/journal").glob("*.jsonl"))[-1]
    segment.write_bytes(b"{not json}\n" + segment.read_bytes())
    with pytest.raises(WorkspaceConfigError, match="journal .* is corrupt"):
        Workspace.open(ws.root).store.items()


def test_corrupt_current_json_is_reported(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1")])
    ws.store.compact()
    (ws.meta_dir / "lineage/current.json").write_text("{oops")
    with pytest.raises(WorkspaceConfigError, match="current lineage .* not valid JSON"):
        Workspace.open(ws.root).store.items()


def test_compaction_keeps_state_and_history(ws: Workspace,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "COMPACT_MIN_OPS", 5)
    for i in range(12):
        ws.store.commit([record(f"inter/r{i}", f"v{i}")])
    assert (ws.meta_dir / "lineage/current.json").exists()
    segments = sorted((ws.meta_dir / "lineage/journal").glob("*.jsonl"))
    assert len(segments) >= 2, "compaction starts a new segment"
    fresh = Workspace.open(ws.root).store
    assert {ref: s.version for ref, s in fresh.items()} == {f"inter/r{i}": f"v{i}"
                                                           for i in range(12)}
    recorded = [op["record"]["ref"] for op in fresh.history() if op["op"] == "record"]
    assert recorded == [f"inter/r{i}" for i in range(12)]


def test_write_cost_does_not_depend_on_ref_count(ws: Workspace) -> None:
    """One more record appends one journal line; nothing proportional to the refs is rewritten."""
    ws.store.commit([record(f"inter/r{i:05d}", "v") for i in range(10_000)])
    ws.store.compact()
    current = ws.meta_dir / "lineage/current.json"
    stamp = (current.stat().st_ino, current.stat().st_mtime_ns, current.stat().st_size)
    segment = sorted((ws.meta_dir / "lineage/journal").glob("*.jsonl"))[-1]
    size_before = segment.stat().st_size
    ws.store.commit([record("inter/one_more", "v2")])
    grown = segment.stat().st_size - size_before
    assert 0 < grown < 1000
    assert (current.stat().st_ino, current.stat().st_mtime_ns, current.stat().st_size) == stamp


def test_claims_enforce_rule_a(ws: Workspace) -> None:
    ws.store.claim("writer", ["inter/data"])
    ws.store.claim("writer", ["inter/data", "inter/data/part=1"])  # its own refs: fine
    for other in ("inter/data", "inter", "inter/data/x"):
        with pytest.raises(LineageConflictError, match="'writer' writes inter/data"):
            ws.store.claim("intruder", [other])
    ws.store.claim("intruder", ["inter/data2"])
    with pytest.raises(LineageConflictError):
        ws.store.commit([record("inter/data", "v9", "intruder")])


def test_check_inputs_refuses_unknown_and_mixed_versions(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "a1", "make_a", inputs=(("src/s", "s1"),))])
    ws.store.commit([record("inter/b", "b1", "make_b", inputs=(("src/s", "s2"),))])
    with pytest.raises(LineageConsistencyError) as info:
        ws.store.check_inputs("join", [("inter/a", "a1"), ("inter/b", "b1")])
    message = str(info.value)
    assert "src/s" in message and "s1" in message and "s2" in message and "'join'" in message
    ok = ws.store.check_inputs("solo", [("inter/a", "a1")])
    assert ok.provenance == {"inter/a": "a1", "src/s": "s1"}

    failed = record("inter/a", "half", "make_a").with_status("failed", "boom")
    ws.store.fail([failed], unknown=["inter/a"])
    with pytest.raises(UnknownRefStateError, match="'make_a' failed"):
        ws.store.check_inputs("solo", [("inter/a", "a1")])


def test_outputs_excluded_from_their_own_provenance(ws: Workspace) -> None:
    ws.store.commit([record("inter/t", "t1", "upsert", inputs=(("src/s", "s1"),))])
    # A step re-reading its own output must not conflict with the version it is replacing.
    check = ws.store.check_inputs("upsert", [("inter/t", "t1"), ("src/s", "s1")],
                                  outputs=["inter/t"])
    assert "inter/t" not in check.provenance


def test_concurrent_writers_lose_nothing(ws: Workspace) -> None:
    code = """
import sys
from dws_dagster import Workspace
from dws_dagster.workspace.records import LineageRecord, StepInfo
worker = sys.argv[1]
store = Workspace.open('.').store
for i in range(40):
    store.commit([LineageRecord(ref=f'inter/w{worker}/r{i}', version=f'v{i}',
                                step=StepInfo(name=f'writer{worker}'))])
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w)], cwd=ws.root, env=env)
             for w in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    fresh = Workspace.open(ws.root).store
    refs = {ref for ref, _ in fresh.items()}
    assert refs == {f"inter/w{w}/r{i}" for w in range(4) for i in range(40)}
    assert len(journal_lines(ws)) == 160
    assert all(orjson.loads(line)["op"] == "record" for line in journal_lines(ws))


def test_store_readers_in_other_processes_see_writes(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1")])
    result = run_python("from dws_dagster import Workspace; "
                        "print(Workspace.open('.').store.get('inter/a').version)", ws.root)
    assert result.stdout.strip() == "v1", result.stderr


def test_claims_survive_reload_in_another_process(ws: Workspace) -> None:
    """A claimed-but-unwritten output stays claimed (not reloaded as something else)."""
    ws.store.claim("writer", ["inter/pending"])
    result = run_python("""
from dws_dagster import Workspace
from dws_dagster.errors import LineageConflictError
store = Workspace.open('.').store
state = store.get('inter/pending')
print(state.owner, state.status, state.record)
try:
    store.claim('intruder', ['inter/pending/x'])
except LineageConflictError:
    print('refused')
""", ws.root)
    assert result.stdout.split() == ["writer", "pending", "None", "refused"], result.stderr


# ------------------------------------------------- opening a big store: bulk replay

def test_long_tail_replayed_in_bulk_keeps_refs_sorted(ws: Workspace) -> None:
    refs = [f"inter/g{n % 7}/r{n:03d}" for n in range(300)]  # written out of name order
    writer = ws.store
    for start in range(0, len(refs), 50):
        writer.commit([record(ref, "v1", f"step{n}") for n, ref in
                       enumerate(refs[start:start + 50], start)])
    reader = Workspace.open(ws.root).store  # replays 300 operations at once
    assert [ref for ref, _ in reader.items()] == sorted(refs)
    assert reader.overlapping(ws.check_ref("inter/g3")) == sorted(
        ref for ref in refs if ref.startswith("inter/g3/"))
    # later single operations keep the order without re-sorting
    writer.commit([record("inter/g3/a-first", "v1", "late")])
    writer.forget("inter/g0/r000")
    expected = sorted({*refs, "inter/g3/a-first"} - {"inter/g0/r000"})
    assert [ref for ref, _ in reader.items()] == expected
    assert [ref for ref, _ in writer.items()] == expected


def test_corrupt_line_in_a_long_tail_is_named(ws: Workspace) -> None:
    ws.store.commit([record(f"inter/r{n:03d}", "v1", f"s{n}") for n in range(100)])
    segment = sorted((ws.meta_dir / "lineage/journal").glob("*.jsonl"))[-1]
    lines = segment.read_bytes().splitlines(keepends=True)
    lines[41] = b'{"op": "record", "record": {"ref": \n'
    segment.write_bytes(b"".join(lines))
    with pytest.raises(WorkspaceConfigError, match=r"is corrupt at byte \d+ \(line 42 of"):
        Workspace.open(ws.root).store.items()
    lines[41] = b"[1, 2]\n"  # valid JSON, but no operation
    segment.write_bytes(b"".join(lines))
    with pytest.raises(WorkspaceConfigError, match=r"line 42 of"):
        Workspace.open(ws.root).store.items()
    with pytest.raises(WorkspaceConfigError, match="is corrupt"):
        list(Workspace.open(ws.root).store.history())


def test_blank_and_crlf_lines_are_read(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1"), record("inter/b", "v2")])
    segment = sorted((ws.meta_dir / "lineage/journal").glob("*.jsonl"))[-1]
    first, second = segment.read_bytes().splitlines()
    segment.write_bytes(first + b"\r\n\n   \n" + second + b"\n")
    reader = Workspace.open(ws.root).store
    assert {ref: state.version for ref, state in reader.items()} == {"inter/a": "v1",
                                                                     "inter/b": "v2"}
    assert len(list(reader.history())) == 2


def test_gc_paused_restores_the_collector_and_leaves_frozen_objects_frozen() -> None:
    import gc

    assert gc.isenabled()
    with store_module.gc_paused():
        assert not gc.isenabled()
        with store_module.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        built = [{"n": [n]} for n in range(1000)]
    assert gc.isenabled()
    assert all(gc.is_tracked(item) for item in built)
    gc.disable()
    try:
        with store_module.gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: stays off
    finally:
        gc.enable()
    sentinel = [["frozen by someone else"]]
    gc.freeze()
    try:
        # Counting frozen objects is racy (other threads free frozen objects), so the test
        # asks whether one known frozen object stayed out of the generations unfreeze fills.
        assert not any(item is sentinel for item in gc.get_objects(generation=2))
        with store_module.gc_paused():
            pass
        assert gc.get_freeze_count() > 0
        assert not any(item is sentinel for item in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()
    assert any(item is sentinel for item in gc.get_objects(generation=2))


def _in_generations(item: object) -> bool:
    import gc

    return any(any(found is item for found in gc.get_objects(generation=g)) for g in range(3))


def test_gc_spares_older_objects_freezes_them_until_exit() -> None:
    """Objects that exist on entry, and those alive at `spare_survivors()`, are kept out of the
    collector's generations (frozen) until exit, when they return; a freeze someone else made
    is left alone, and so is a disabled collector."""
    import gc

    before = [["made before"]]
    with store_module.GcSparesOlderObjects() as spares:
        assert gc.isenabled()  # young collections still run
        assert not _in_generations(before)
        during = [["made during the pass"]]
        assert _in_generations(during)
        spares.spare_survivors()
        assert not _in_generations(during)
    assert _in_generations(before) and _in_generations(during)
    sentinel = [["frozen by someone else"]]
    gc.freeze()
    try:
        with store_module.GcSparesOlderObjects() as spares:
            made = [["made inside"]]
            spares.spare_survivors()
            assert _in_generations(made)  # not its freeze: it does not extend it
        assert not _in_generations(sentinel)  # and does not undo it
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with store_module.GcSparesOlderObjects() as spares:
            made = [["made with the collector off"]]
            spares.spare_survivors()
            assert _in_generations(made)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_deferred_sync_applies_a_batch_with_one_fsync(ws: Workspace,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The sensor's batches: every append visible at once to other processes' readers, one
    fsync of the journal at the end instead of one per record (counted at the OS call)."""
    from dws_dagster.workspace import files

    store = ws.store
    store.commit([record("inter/first", "v0")])  # the journal segment exists: no folder sync
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    with store.deferred_sync():
        for i in range(20):
            assert store.apply(record(f"inter/r{i}", f"v{i}", step=f"s{i}"))
            with store.deferred_sync():  # nested blocks leave the sync to the outer one
                assert store.apply(record(f"inter/n{i}", f"v{i}", step=f"n{i}"))
        assert synced == []
        reader = Workspace.open(ws.root).store  # another reader sees the lines before the sync
        assert reader.get("inter/r19").version == "v19"
    assert len(synced) == 1
    assert len(journal_lines(ws)) == 41
    assert store.apply(record("inter/after", "v")) and len(synced) == 2  # back to one per append


def test_records_of_past_versions_are_found_in_the_journal_not_kept_in_memory(
        ws: Workspace) -> None:
    """`find_record` answers for any version ever recorded, across compactions and appends
    by this and other processes, while the store keeps only each record's journal position;
    a journal replaced under it (restored from a backup) gives the replacement's records."""
    store = ws.store
    for i in range(30):
        store.commit([record("inter/a", f"a{i}", inputs=(("src/raw", f"r{i}"),))])
        if i % 10 == 9:
            store.compact()
    assert store.find_record("inter/a", "a3")["provenance"] == {"src/raw": "r3"}
    assert store.find_record("inter/a", "nope") is None
    assert all(isinstance(key, int) and isinstance(where, int)  # digests and positions only
               for key, where in store._by_version.items())
    other = Workspace.open(ws.root).store  # another writer: found after a refresh
    other.commit([record("inter/a", "a-other", inputs=(("src/raw", "x"),))])
    store.commit([record("inter/a", "a-last")])
    assert store.find_record("inter/a", "a-other")["provenance"] == {"src/raw": "x"}
    assert store.find_record("inter/a", "a12")["provenance"] == {"src/raw": "r12"}
    # The journal replaced meanwhile: positions no longer match, the index is rebuilt.
    journal = ws.meta_dir / "lineage" / "journal"
    for path in sorted(journal.glob("*.jsonl")):
        lines = [line for line in path.read_bytes().splitlines(keepends=True)
                 if b'"a12"' not in line]
        path.write_bytes(b"\n" + b"".join(lines))  # every position shifted by one byte
    assert store.find_record("inter/a", "a13")["provenance"] == {"src/raw": "r13"}
    assert store.find_record("inter/a", "a12") is None


def test_index_digests_keep_keys_apart() -> None:
    """The digests standing for (ref, version) and (runId, eventType) in the in-memory indexes
    never merge two different keys: None, "null" and shifted boundaries all differ."""
    from dws_dagster.workspace.digests import key_digest, pack_position, unpack_position

    keys = [("a", None), ("a", "null"), ("a", ""), ("ab", "c"), ("a", "bc"), ("a",), ("a", "b")]
    assert len({key_digest(*key) for key in keys}) == len(keys)
    assert key_digest("inter/a", "v1") == key_digest("inter/a", "v1")
    assert unpack_position(pack_position(7, 2**40 + 3)) == (7, 2**40 + 3)
