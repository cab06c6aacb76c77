"""The lineage store on its database: idempotence, rules, damaged rows, many writers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import Workspace
from dws_dagster.errors import (
    DwsError,
    LineageConflictError,
    LineageConsistencyError,
    UnknownRefStateError,
    WorkspaceConfigError,
)
from dws_dagster.store import gc_pause
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.records import LineageRecord, StepInfo
from tests.conftest import ROOT, run_python
from tests.support.store_db import (
    STORES,
    damage,
    db_dump,
    db_file,
    on_store,
    operations,
    record_count,
    sql,
    sqlite_only,
)


def record(
    ref: str, version: str, step: str = "s", inputs: tuple = (), provenance: dict | None = None
) -> LineageRecord:
    return LineageRecord(
        ref=ref,
        version=version,
        step=StepInfo(name=step),
        inputs=inputs,
        provenance=provenance or dict(inputs),
        start_time="2026-01-01T00:00:00",
        end_time="2026-01-01T00:00:01",
    )


@pytest.fixture(params=STORES)
def ws(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    """This suite runs on both stores: SQLite (the default) and PostgreSQL."""
    yield from on_store(request, tmp_path, monkeypatch)


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
    assert record_count(ws) == 1
    assert operations(ws) == [("record", "inter/a", operations(ws)[0][2])]
    assert ws.store.apply(rec) is False  # the sensor replaying it: nothing new
    assert record_count(ws) == 1 and len(operations(ws)) == 1


def _store_named(message: str, ws: Workspace) -> None:
    """A store error names the store (for SQLite: its file) and says what to do."""
    assert f"workspace store {ws.store.shown}" in message
    password = ws.store.settings.password
    assert not password or password not in message  # PostgreSQL: named, never its password
    if ws.store.settings.dialect == "sqlite":
        assert str(ws.meta_dir) in message
    assert "restore the store from a backup" in message


def test_a_record_that_is_not_json_is_named_and_nothing_changes(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1"), record("inter/b", "v2", "other")])
    damage(ws, "UPDATE dws_records SET body = '{not json' WHERE ref = 'inter/a'")
    before = db_dump(ws)
    for read in (
        lambda s: s.items(),
        lambda s: s.get("inter/a"),
        lambda s: list(s.history()),
        lambda s: s.find_record("inter/a", "v1"),
        lambda s: s.find_records([("inter/b", "v2"), ("inter/a", "v1")]),
    ):
        with pytest.raises(WorkspaceConfigError) as info:
            read(Workspace.open(ws.root).store)
        message = str(info.value)
        _store_named(message, ws)
        assert "ref inter/a" in message and "is not a JSON record" in message
    with pytest.raises(WorkspaceConfigError, match="inter/a .* is not a JSON record"):
        ws.store.commit([record("inter/a", "v3")])
    with pytest.raises(WorkspaceConfigError, match="inter/a .* is not a JSON record"):
        ws.store.check_inputs("reader", [("inter/a", "v1")])
    assert db_dump(ws) == before
    assert ws.store.get("inter/b").version == "v2"  # the other refs still read


def test_a_record_of_the_wrong_shape_or_of_another_ref_is_named(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1"), record("inter/b", "v2", "other")])
    ((body_b,),) = sql(ws, "SELECT body FROM dws_records WHERE ref = 'inter/b'")
    damage(ws, "UPDATE dws_records SET body = :body WHERE ref = 'inter/a'", body=body_b)
    with pytest.raises(
        WorkspaceConfigError, match="inter/a .* is the record of another ref \\('inter/b'\\)"
    ) as info:
        Workspace.open(ws.root).store.items()
    _store_named(str(info.value), ws)
    for body in (
        '{"ref": "inter/a", "version": 7}',
        "[1, 2]",
        '"inter/a"',
        "null",
        '{"ref": "inter/a", "version": "v1", "step": {"name": ["x"]}}',
    ):
        damage(ws, "UPDATE dws_records SET body = :body WHERE ref = 'inter/a'", body=body)
        with pytest.raises(WorkspaceConfigError, match="inter/a") as info:
            Workspace.open(ws.root).store.get("inter/a")
        _store_named(str(info.value), ws)


def test_an_owner_that_is_not_text_is_named(ws: Workspace) -> None:
    sqlite_only(ws)
    ws.store.commit([record("inter/a", "v1", "make_a")])
    damage(ws, "UPDATE dws_refs SET owner = x'00ff' WHERE ref = 'inter/a'")
    before = db_dump(ws)
    with pytest.raises(WorkspaceConfigError, match="ref inter/a: owner .* is not a step name"):
        ws.store.items()
    with pytest.raises(WorkspaceConfigError, match="inter/a"):
        ws.store.claim("intruder", ["inter/a/x"])
    assert db_dump(ws) == before


def test_a_damaged_history_entry_is_named(ws: Workspace) -> None:
    ws.store.claim("make_a", ["inter/a"])
    ws.store.commit([record("inter/a", "v1", "make_a")])
    damage(ws, "UPDATE dws_operations SET detail = '[1' WHERE op = 'claim'")
    with pytest.raises(WorkspaceConfigError, match="history entry .*claim of inter/a.* corrupt"):
        list(ws.store.history())
    assert ws.store.get("inter/a").version == "v1"  # the current lineage does not need it


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = (
    "ref",
    "version",
    "step",
    "inputs",
    "provenance",
    "parameters",
    "metrics",
    "status",
    "start_time",
    "end_time",
    "error",
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(field=st.sampled_from(FIELDS), value=JSON, whole=st.booleans())
def test_any_damaged_record_body_is_a_named_error_or_read(
    ws: Workspace, field: str, value: object, whole: bool
) -> None:
    """Whatever a record's body holds, reading it gives a good record of its ref or a
    WorkspaceConfigError naming the store and the ref, never another exception."""
    store = ws.store
    if store.get("inter/a") is None:
        store.commit([record("inter/a", "v1", inputs=(("src/s", "s1"),))])
    ((body,),) = sql(ws, "SELECT body FROM dws_records WHERE ref = 'inter/a'")
    good = orjson.loads(body)
    damaged = value if whole else {**good, field: value}
    sql(ws, "UPDATE dws_records SET body = :body WHERE ref = 'inter/a'", body=json.dumps(damaged))
    try:
        for read in (
            store.items,
            lambda: store.get("inter/a"),
            lambda: store.check_inputs("s", [("inter/a", "v1")]),
        ):
            try:
                read()
            except WorkspaceConfigError as exc:
                message = str(exc)
            except LineageConsistencyError:
                message = "mixed"
            else:
                continue
            if message == "mixed":
                assert not whole and field in ("provenance", "inputs")
            else:
                _store_named(message, ws)
                assert "inter/a" in message
    finally:
        sql(ws, "UPDATE dws_records SET body = :body WHERE ref = 'inter/a'", body=body)


def test_a_store_file_that_is_not_a_database_is_named_and_kept(tmp_path) -> None:
    workspace = Workspace.init(tmp_path / "ws")
    workspace.add_resource("inter", "intermediate-data", path="data/inter")
    workspace.store.commit([record("inter/a", "v1")])
    forget_databases()  # the next open is a new process's
    for path in workspace.meta_dir.glob("store.db-*"):
        path.unlink()
    db_file(workspace).write_bytes(b"this is not an SQLite database, just bytes" * 100)
    kept = db_file(workspace).read_bytes()
    with pytest.raises(DwsError) as info:
        Workspace.open(workspace.root).store.items()
    message = str(info.value)
    assert f"workspace store {workspace.store.shown}" in message
    assert "not a database" in message and "restore it from a backup" in message
    assert db_file(workspace).read_bytes() == kept
    forget_databases()


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
    check = ws.store.check_inputs(
        "upsert", [("inter/t", "t1"), ("src/s", "s1")], outputs=["inter/t"]
    )
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
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(w)], cwd=ws.root, env=env)
        for w in range(4)
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    fresh = Workspace.open(ws.root).store
    refs = {ref for ref, _ in fresh.items()}
    assert refs == {f"inter/w{w}/r{i}" for w in range(4) for i in range(40)}
    ops = operations(ws)
    assert len(ops) == 160 and {op for op, _ref, _id in ops} == {"record"}
    assert sorted(ref for _op, ref, _id in ops) == sorted(refs)
    assert record_count(ws) == 160


def test_store_readers_in_other_processes_see_writes(ws: Workspace) -> None:
    ws.store.commit([record("inter/a", "v1")])
    result = run_python(
        "from dws_dagster import Workspace; "
        "print(Workspace.open('.').store.get('inter/a').version)",
        ws.root,
    )
    assert result.stdout.strip() == "v1", result.stderr


def test_claims_survive_reload_in_another_process(ws: Workspace) -> None:
    """A claimed-but-unwritten output stays claimed (not reloaded as something else)."""
    ws.store.claim("writer", ["inter/pending"])
    result = run_python(
        """
from dws_dagster import Workspace
from dws_dagster.errors import LineageConflictError
store = Workspace.open('.').store
state = store.get('inter/pending')
print(state.owner, state.status, state.record)
try:
    store.claim('intruder', ['inter/pending/x'])
except LineageConflictError:
    print('refused')
""",
        ws.root,
    )
    assert result.stdout.split() == ["writer", "pending", "None", "refused"], result.stderr


# ------------------------------------------------- opening a big store: bulk replay


def test_long_tail_replayed_in_bulk_keeps_refs_sorted(ws: Workspace) -> None:
    refs = [f"inter/g{n % 7}/r{n:03d}" for n in range(300)]  # written out of name order
    writer = ws.store
    for start in range(0, len(refs), 50):
        writer.commit(
            [record(ref, "v1", f"step{n}") for n, ref in enumerate(refs[start : start + 50], start)]
        )
    reader = Workspace.open(ws.root).store  # replays 300 operations at once
    assert [ref for ref, _ in reader.items()] == sorted(refs)
    assert reader.overlapping(ws.check_ref("inter/g3")) == sorted(
        ref for ref in refs if ref.startswith("inter/g3/")
    )
    # later single operations keep the order without re-sorting
    writer.commit([record("inter/g3/a-first", "v1", "late")])
    writer.forget("inter/g0/r000")
    expected = sorted({*refs, "inter/g3/a-first"} - {"inter/g0/r000"})
    assert [ref for ref, _ in reader.items()] == expected
    assert [ref for ref, _ in writer.items()] == expected


def test_gc_paused_restores_the_collector_and_leaves_frozen_objects_frozen() -> None:
    import gc

    assert gc.isenabled()
    with gc_pause.gc_paused():
        assert not gc.isenabled()
        with gc_pause.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        built = [{"n": [n]} for n in range(1000)]
    assert gc.isenabled()
    assert all(gc.is_tracked(item) for item in built)
    gc.disable()
    try:
        with gc_pause.gc_paused():
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
        with gc_pause.gc_paused():
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
    with gc_pause.GcSparesOlderObjects() as spares:
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
        with gc_pause.GcSparesOlderObjects() as spares:
            made = [["made inside"]]
            spares.spare_survivors()
            assert _in_generations(made)  # not its freeze: it does not extend it
        assert not _in_generations(sentinel)  # and does not undo it
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with gc_pause.GcSparesOlderObjects() as spares:
            made = [["made with the collector off"]]
            spares.spare_survivors()
            assert _in_generations(made)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_records_of_past_versions_are_found_from_any_writer(ws: Workspace) -> None:
    """`find_record` answers for any good version ever recorded, by this or another writer,
    the latest record of that version when there are several; failed attempts are not
    productions of a version."""
    store = ws.store
    for i in range(30):
        store.commit([record("inter/a", f"a{i}", inputs=(("src/raw", f"r{i}"),))])
    assert store.find_record("inter/a", "a3")["provenance"] == {"src/raw": "r3"}
    assert store.find_record("inter/a", "nope") is None
    assert store.find_record("inter/b", "a3") is None
    other = Workspace.open(ws.root).store
    run_python(
        """
from dws_dagster import Workspace
from dws_dagster.workspace.records import LineageRecord, StepInfo
Workspace.open('.').store.commit([LineageRecord(
    ref='inter/a', version='a-other', step=StepInfo(name='s'), inputs=(('src/raw', 'x'),),
    provenance={'src/raw': 'x'})])
""",
        ws.root,
    ).check_returncode()
    store.commit([record("inter/a", "a-last")])
    assert other.find_record("inter/a", "a-other")["provenance"] == {"src/raw": "x"}
    assert store.find_record("inter/a", "a12")["provenance"] == {"src/raw": "r12"}
    store.commit([record("inter/a", "a3", inputs=(("src/raw", "again"),))])
    assert store.find_record("inter/a", "a3")["provenance"] == {"src/raw": "again"}
    store.fail([record("inter/a", "a-failed").with_status("failed", "boom")])
    assert store.find_record("inter/a", "a-failed") is None
    # Many at once (a snapshot's lineage.json files) answer as one by one, over several chunks.
    store.commit(
        [record(f"inter/many/p{i}", f"m{i}", inputs=(("src/raw", "m"),)) for i in range(1200)]
    )
    asked = (
        [("inter/a", f"a{i}") for i in range(30)]
        + [("inter/a", v) for v in ("a-other", "a-failed", "nope", "a3", "a-last")]
        + [("inter/b", "a3"), ("inter/a", "m5")]
        + [(f"inter/many/p{i}", f"m{i}") for i in range(1200)]
        + [("inter/many/p1", "m2")]
    )
    one_by_one = {pair: found for pair in asked if (found := store.find_record(*pair)) is not None}
    assert len(one_by_one) == 30 + 2 + 1200
    assert store.find_records(asked) == one_by_one
    assert store.find_records([]) == {}


def test_a_step_run_again_may_ask_for_the_lock_with_nothing_to_write(ws: Workspace) -> None:
    """A writer about to write data takes the lock (`lock=True`) even when its claims are on
    record already: nothing is written, the checks still run."""
    ws.store.begin_step("make_a", claims=["inter/a"], observe=[("src/s", "s1")])
    before = db_dump(ws)
    check = ws.store.begin_step(
        "make_a", claims=["inter/a"], observe=[("src/s", "s1")], inputs=[("src/s", "s1")], lock=True
    )
    assert check.provenance == {"src/s": "s1"}
    assert db_dump(ws) == before
    with pytest.raises(LineageConflictError):
        ws.store.begin_step("other", claims=["inter/a/x"], lock=True)


def test_the_partitions_of_a_range_are_checked_each_with_its_inputs_and_claimed_all_or_none(
    ws: Workspace,
) -> None:
    """`begin_steps`: each partition's claim with its own inputs' provenance, as one step per
    partition would get; one partition refused (another step writes it), none is claimed."""
    ws.store.commit([record("inter/up/1", "u1", "up"), record("inter/up/2", "u2", "up")])
    checks = ws.store.begin_steps(
        "range", [("inter/r/1", [("inter/up/1", "u1")]), ("inter/r/2", [("inter/up/2", "u2")])]
    )
    assert [c.provenance for c in checks] == [{"inter/up/1": "u1"}, {"inter/up/2": "u2"}]
    assert ws.store.get("inter/r/1").owner == ws.store.get("inter/r/2").owner == "range"
    ws.store.claim("other", ["inter/r/4"])
    before = db_dump(ws)
    with pytest.raises(LineageConflictError):
        ws.store.begin_steps("range", [("inter/r/3", []), ("inter/r/4", [])])
    assert db_dump(ws) == before and ws.store.get("inter/r/3") is None


def test_an_unreachable_store_is_named_without_its_password(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL store nobody listens for (a closed port on this machine): a DwsError that
    names the store and what to check, never its password, and nothing is written."""
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(
        "DWS_STORE_URL", f"postgresql+psycopg2://dws:s3cret-pw-77@127.0.0.1:{port}/dws"
    )
    workspace = Workspace.init(tmp_path / "ws")
    workspace.add_resource("inter", "intermediate-data", path="data/inter")
    for action in (
        lambda: workspace.store.items(),
        lambda: workspace.store.claim("s", ["inter/a"]),
    ):
        with pytest.raises(DwsError) as info:
            action()
        message = str(info.value)
        assert "s3cret-pw-77" not in message
        assert f"postgresql+psycopg2://dws@127.0.0.1:{port}/dws" in message
        assert "reachable" in message
    assert not list(workspace.meta_dir.glob("store.db*"))
    forget_databases()


def test_a_store_at_an_unknown_revision_is_named(ws: Workspace) -> None:
    ws.store.claim("s", ["inter/a"])
    forget_databases()
    damage(ws, "UPDATE dws_alembic_version SET version_num = '9999'")
    forget_databases()
    with pytest.raises(DwsError, match=re.escape(f"workspace store {ws.store.shown}")):
        Workspace.open(ws.root).store.items()


def test_a_bare_postgresql_url_opens_or_is_named(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DWS_STORE_URL", "postgresql://dws@127.0.0.1:1/dws")
    workspace = Workspace.init(tmp_path / "ws")
    try:
        with pytest.raises(DwsError, match="workspace store postgresql"):
            workspace.store.items()
    finally:
        forget_databases()


@pytest.mark.parametrize(
    "ref", [b"inter/a", "inter/../x", "nosuch resource/x"], ids=["blob", "dotdot", "space"]
)
def test_a_stored_ref_that_is_not_a_ref_is_named_wherever_it_is_read(
    ws: Workspace, ref: object
) -> None:
    if isinstance(ref, bytes):
        sqlite_only(ws)
    ws.store.commit([record("inter/a", "v1", "make_a")])
    damage(ws, "UPDATE dws_refs SET ref = :ref WHERE ref = 'inter/a'", ref=ref)
    before = db_dump(ws)
    actions = [lambda s: s.items(), lambda s: s.refs()]
    if isinstance(ref, str) and ref.startswith("inter/"):  # what rule (a) reads for 'inter'
        actions += [
            lambda s: s.claim("other", ["inter"]),
            lambda s: s.overlapping(ws.check_ref("inter")),
        ]
    for action in actions:
        with pytest.raises(WorkspaceConfigError) as info:
            action(Workspace.open(ws.root).store)
        _store_named(str(info.value), ws)
    assert db_dump(ws) == before


def test_prefetched_states_and_records_answer_as_the_database_does(ws: Workspace) -> None:
    """What a batch prefetches (the sensor's) is what the store would read, and stays so while
    the batch writes: a record written for a version is then that version's record."""
    store = ws.store
    store.commit(
        [record("inter/a", "a1", inputs=(("src/raw", "r1"),)), record("inter/b", "b1", "other")]
    )
    asked = [("inter/a", "a1"), ("inter/a", "nope"), ("inter/b", "b1"), ("inter/c", "c1")]
    expected = {pair: store.find_record(*pair) for pair in asked}
    states = {ref: store.get(ref) for ref in ("inter/a", "inter/b", "inter/c")}
    with store.locked():
        store.prefetch(["inter/a", "inter/b", "inter/c"], asked)
        with no_queries(ws):
            assert {pair: store.find_record(*pair) for pair in asked} == expected
            assert {ref: store.get(ref) for ref in states} == states
        store.commit([record("inter/a", "a1", inputs=(("src/raw", "again"),))])
        assert store.find_record("inter/a", "a1")["provenance"] == {"src/raw": "again"}
        assert store.get("inter/a").record["provenance"] == {"src/raw": "again"}
    assert store.find_record("inter/a", "a1")["provenance"] == {"src/raw": "again"}
    store.prefetch(["inter/a"], [("inter/a", "a1")])  # outside a transaction: reads nothing


@contextmanager
def no_queries(ws: Workspace) -> Iterator[None]:
    """Fail on any statement sent to the workspace's database inside the block."""
    from sqlalchemy import event

    sent: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        sent.append(statement)

    engine = ws.store.db.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert sent == []
