"""Every file under `.dataworkspace/` and every column of the workspace store's tables damaged
in turn: bytes flipped, truncated, replaced by other JSON (wrong types, missing keys, extra or
deep nesting), a column given a value of another type or a row id that leads nowhere. Each
command then either works or refuses with `WorkspaceConfigError` (a store that cannot be read
at all: `StoreUnavailableError`; the CLI: exit 1, one line, no traceback) — never another
exception — nothing outside the workspace changes, and once the damage is repaired every record
written before is still there.

The workspace is real and built once (script steps, a forget, snapshots with a results copy, a
restore from kept versions, an OpenLineage outbox with a delivery state); each example runs on a
fresh copy of it, store included (a restored backup). The store's rows are damaged with a plain
sqlite3 connection, foreign keys unchecked, as a hand edit would. No Spark, so the whole module
takes about a minute.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import DwsError, LineageBuilder, Workspace, WorkspaceConfigError
from dws_dagster.cli.main import main as cli_main
from dws_dagster.errors import StoreUnavailableError
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.transport.factory import make_transport
from dws_dagster.snapshots.index import delete_snapshot, list_snapshots
from dws_dagster.snapshots.restore import restore_snapshot
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.swap import keep_copy
from tests.bad_inputs.json_damage import ABSOLUTE, mutated_json
from tests.bad_inputs.store_damage import STORE, Repair, query, row_damage
from tests.conftest import run_step, tree_state, write

RESULTS = "results/exp"


def ol_event(run: int, kind: str) -> dict[str, Any]:
    return {
        "eventType": kind,
        "eventTime": f"2026-01-01T00:{run % 60:02d}:00+00:00",
        "run": {"runId": f"00000000-0000-4000-8000-{run:012d}"},
        "job": {"namespace": "fuzz", "name": "job"},
        "inputs": [],
        "outputs": [],
        "producer": "https://example.com/fuzz",
        "schemaURL": "https://example.com/s",
    }


def build(root: Path) -> Workspace:
    """A workspace holding every kind of file `.dataworkspace/` can hold."""
    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"}, {"scale": 2})
    run_step(
        ws, "train", ["inter/prep"], {}, {"gamma": 0.1}, results={"mae": 1.5}, results_dir=RESULTS
    )
    run_step(ws, "lookup", [], {"inter/lookup": "k\n"})
    ws.store.forget("inter/lookup")
    take_snapshot(ws, "v1", "first")
    take_snapshot(ws, "v1b")  # a second tag of the same snapshot
    # Rewrite prep, keeping its old data as a kept version (what keep_versions does).
    old = ws.version_of("inter/prep")
    keep_copy(ws.resource_root("inter"), "prep", old, ws.local_path("inter/prep"))
    shutil.rmtree(ws.local_path("inter/prep"))
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "B\n2\n"}, {"scale": 3})
    run_step(
        ws, "train", ["inter/prep"], {}, {"gamma": 0.2}, results={"mae": 1.2}, results_dir=RESULTS
    )
    take_snapshot(ws, "v2", "second")
    restore_snapshot(ws, "v1")  # a reset in the history, kept versions made on the way
    run_step(ws, "other", ["src/trips.csv"], {"inter/other": "o\n"})
    with (
        contextlib.suppress(RuntimeError),
        LineageBuilder()
        .with_step_name("broken")
        .with_parameters({})
        .with_workspace_directory(ws.root)
        .with_no_inputs()
        .eval() as lineage,
    ):
        lineage.add_output_ref("inter/broken")
        write(ws.local_path("inter/broken") / "part-0.csv", "half")
        raise RuntimeError("the step failed")
    outbox = Outbox(ws)
    for run in range(12):
        outbox.spool([ol_event(run, "START"), ol_event(run, "COMPLETE")])
    os.environ.pop("OPENLINEAGE_URL", None)
    outbox.deliver(make_transport(ws)[0], budget_seconds=30)  # delivered rows, events.jsonl
    outbox.spool([ol_event(99, "START")])  # one still pending
    return ws


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("pristine")
    build(home / "ws")
    forget_databases()  # closed: the store is whole in store.db, ready to be copied
    write(home / "outside" / "keep.txt", "sentinel\n")
    return home


def metadata_files(ws_root: Path) -> list[str]:
    """The files under `.dataworkspace/` (the store's database aside: see `store_file`)."""
    meta = ws_root / ".dataworkspace"
    return sorted(
        str(p.relative_to(meta))
        for p in meta.rglob("*")
        if p.is_file() and not p.name.endswith("lock") and not p.name.startswith(STORE)
    )


def test_the_workspace_has_every_kind_of_file_and_row(pristine: Path) -> None:
    root = pristine / "ws"
    names = metadata_files(root)
    for wanted in ("config.json", "resources.json"):
        assert wanted in names
    assert (root / ".dataworkspace" / STORE).is_file()
    ops = {op for (op,) in query(root, "SELECT DISTINCT op FROM dws_operations")}
    assert ops == {"record", "fail", "claim", "forget", "reset"}
    assert query(root, "SELECT count(*) FROM dws_records WHERE good = 0")[0][0] >= 1
    assert query(root, "SELECT count(*) FROM dws_record_inputs")[0][0] >= 2
    assert (
        query(
            root,
            "SELECT count(*) FROM dws_refs WHERE unknown AND attempt_id IS NOT NULL "
            "AND owner IS NOT NULL",
        )[0][0]
        == 1
    )  # the broken step
    assert query(root, "SELECT count(*) FROM dws_snapshots")[0][0] == 2
    assert sorted(query(root, "SELECT tag FROM dws_snapshot_tags")) == [("v1",), ("v1b",), ("v2",)]
    assert query(root, "SELECT count(DISTINCT hash) FROM dws_snapshot_refs")[0][0] == 2
    assert (
        query(
            root, "SELECT count(*) FROM dws_snapshots WHERE results != '[]' AND metrics IS NOT NULL"
        )[0][0]
        == 2
    )


# --------------------------------------------------------------------------- the battery


class Unexpected(AssertionError):
    pass


def allowed(action: Callable[[], object], what: str, *, strict: bool = False) -> object:
    """Run `action`: it may work, or raise WorkspaceConfigError for damaged metadata (or
    StoreUnavailableError for a store that cannot be read at all), or another DwsError that the
    (valid but edited) content explains — a tag no longer there, data whose version was not
    kept; anything else fails the test. `strict`: only those two (commands that only read)."""
    try:
        return action()
    except DwsError as exc:
        error = exc
    except Exception as exc:  # what this test is about: nothing but DwsError escapes
        raise Unexpected(f"{what} raised {type(exc).__name__}: {exc}") from exc
    assert "\n" not in str(error), f"{what}: a message of several lines: {error}"
    if strict and not isinstance(error, (WorkspaceConfigError, StoreUnavailableError)):
        raise Unexpected(f"{what} raised {type(error).__name__}: {error}")
    return error


def cli(root: Path, *args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = cli_main([*args, "--workspace", str(root)])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
        except Exception as exc:
            raise Unexpected(
                f"dws-dagster {' '.join(args)} raised {type(exc).__name__}: {exc}"
            ) from exc
    text = err.getvalue()
    assert "Traceback" not in text, text
    if code != 0:
        assert text.count("\n") == 1 and text.startswith("error: "), (args, text)
    return code, text


def battery(root: Path) -> None:
    """Every kind of command, through the API and the CLI."""
    for args in (
        ["status"],
        ["lineage", RESULTS],
        ["lineage", "inter/prep", "--snapshot", "v2"],
        ["history"],
        ["diff", "v1", "v2"],
        ["diff", "v2", "current"],
        ["openlineage", "status"],
    ):
        cli(root, *args)

    def opened() -> Workspace:
        return Workspace.open(root)

    ws = allowed(opened, "Workspace.open", strict=True)
    if not isinstance(ws, Workspace):
        return
    allowed(lambda: ws.store.items(), "store.items", strict=True)
    allowed(lambda: list(ws.store.history()), "store.history", strict=True)
    allowed(lambda: list_snapshots(ws), "list_snapshots", strict=True)
    allowed(lambda: Outbox(ws).status(), "Outbox.status", strict=True)
    allowed(lambda: list(Outbox(ws).events()), "Outbox.events", strict=True)
    allowed(lambda: Outbox(ws).spool([ol_event(500, "START")]), "Outbox.spool")
    allowed(lambda: run_step(ws, "fuzz", ["src/trips.csv"], {"inter/fuzz": "f\n"}), "script step")
    allowed(
        lambda: run_step(ws, "other", ["src/trips.csv", "inter/prep"], {"inter/other": "o2\n"}),
        "script step reading lineage",
    )
    allowed(lambda: take_snapshot(ws, "fz", "fuzz"), "take_snapshot")
    allowed(lambda: delete_snapshot(ws, "fz"), "delete_snapshot")
    allowed(lambda: delete_snapshot(ws, "v1b"), "delete_snapshot (one of two tags)")
    allowed(lambda: restore_snapshot(ws, "v2", partial=True), "restore_snapshot")
    cli(root, "snapshot", "fz2")
    cli(root, "restore", "v1", "--partial")
    cli(root, "delete-snapshot", "fz2", "--remove-results")


# ---------------------------------------------------------------- what must survive


def outbox_lines(root: Path) -> list[tuple[Any, ...]]:
    """Every OpenLineage event the store's outbox holds, pending or delivered."""
    return query(root, "SELECT run_id, event_type, body FROM dws_ol_events")


def kept(root: Path) -> tuple[set[Any], set[Any], set[Any]]:
    """What the store holds that nothing may lose: every record, every history entry, every
    snapshot."""
    return (
        set(query(root, "SELECT id, body FROM dws_records")),
        set(query(root, "SELECT id, op, ref, record_id, detail, at FROM dws_operations")),
        {digest for (digest,) in query(root, "SELECT hash FROM dws_snapshots")},
    )


@contextlib.contextmanager
def damaged_copy(pristine: Path, scratch: Path, damage: Callable[[Path], Repair]) -> Iterator[Path]:
    """A fresh copy of the pristine workspace, damaged by `damage(root)` (which returns how to
    repair it); on exit the damage is repaired, and every earlier record, history entry,
    snapshot and outbox event must be there, and nothing beside the workspace may have
    changed."""
    if scratch.exists():
        forget_databases()
        shutil.rmtree(scratch)
    shutil.copytree(pristine, scratch, symlinks=True)
    root = scratch / "ws"
    records, history, hashes = kept(root)
    events = outbox_lines(root)
    outside = tree_state(scratch / "outside")
    repair = damage(root)
    yield root
    forget_databases()  # the user stops everything, then repairs
    assert tree_state(scratch / "outside") == outside
    repair()
    ws = Workspace.open(root)
    ws.store.items()
    list(ws.store.history())
    now_records, now_history, now_hashes = kept(root)
    assert records <= now_records, "a record was lost"
    assert history <= now_history, "a history entry was lost"
    assert hashes <= now_hashes, "a snapshot was lost"
    assert {info.hash for info in list_snapshots(ws)} == now_hashes
    assert set(events) <= set(outbox_lines(root)), "an outbox event was lost"
    Outbox(ws).status()
    forget_databases()


def file_damage(name: str, content: bytes) -> Callable[[Path], Repair]:
    """`.dataworkspace/<name>` replaced by `content`; repaired by putting its bytes back (for
    the store's database: a backup restored, its write-ahead log gone with the damage)."""

    def damage(root: Path) -> Repair:
        target = root / ".dataworkspace" / name
        original = target.read_bytes()
        # Absolute paths in the damage point at the sentinels: even code that followed them
        # would touch nothing but this test's own folder.
        target.write_bytes(
            content.replace(ABSOLUTE.encode(), str(root.parent / "outside").encode())
        )

        def repair() -> None:
            for log in target.parent.glob(target.name + "-*"):
                log.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(original)

        return repair

    return damage


def deep(depth: int) -> bytes:
    return b'{"format": 1, "x": ' + b"[" * depth + b"]" * depth + b"}"


# ------------------------------------------------------------------ every file, fixed


@pytest.mark.parametrize("mutation", ["truncate", "flip", "empty-object", "list", "deep"])
def test_every_file_damaged_in_fixed_ways(pristine: Path, tmp_path: Path, mutation: str) -> None:
    for name in [*metadata_files(pristine / "ws"), STORE]:
        original = (pristine / "ws/.dataworkspace" / name).read_bytes()
        content = {
            "truncate": original[: len(original) * 2 // 3],
            "flip": original[: len(original) // 2]
            + bytes([original[len(original) // 2] ^ 0x5A])
            + original[len(original) // 2 + 1 :],
            "empty-object": b'{"format": 1}\n',
            "list": b"[1, 2, 3]\n",
            "deep": deep(5000) if name.endswith(".json") else deep(200) + b"\n",
        }[mutation]
        with damaged_copy(pristine, tmp_path / "w", file_damage(name, content)) as root:
            battery(root)


def test_a_store_whose_header_is_zeroed_is_named(pristine: Path, tmp_path: Path) -> None:
    original = (pristine / "ws/.dataworkspace" / STORE).read_bytes()
    with damaged_copy(
        pristine, tmp_path / "w", file_damage(STORE, b"\0" * 100 + original[100:])
    ) as root:
        with pytest.raises(StoreUnavailableError) as caught:
            Workspace.open(root).store.items()
        message = str(caught.value)
        assert str(root / ".dataworkspace" / STORE) in message
        assert "restore it from a backup" in message
        battery(root)


# -------------------------------------------------------------- structural mutations


@st.composite
def structural(draw: st.DrawFn, names: list[str], pristine: Path) -> Callable[[Path], Repair]:
    name = draw(st.sampled_from(names))
    original = (pristine / "ws/.dataworkspace" / name).read_bytes()
    lines = original.split(b"\n") if name.endswith(".jsonl") else [original]
    candidates = [i for i, line in enumerate(lines) if line.strip()]
    index = draw(st.sampled_from(candidates))
    lines[index] = orjson.dumps(mutated_json(draw, orjson.loads(lines[index])))
    return file_damage(name, b"\n".join(lines))


@st.composite
def byte_damage(draw: st.DrawFn, names: list[str], pristine: Path) -> Callable[[Path], Repair]:
    name = draw(st.sampled_from(names))
    data = bytearray((pristine / "ws/.dataworkspace" / name).read_bytes())
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        where = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "cut", "insert"]))
        if kind == "flip":
            data[where] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[where:]
        else:
            data[where:where] = draw(st.sampled_from([b"\n", b'"', b"{", b"]", b"\xff", b"0"]))
    return file_damage(name, bytes(data))


FUZZ = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@FUZZ
@given(data=st.data())
def test_structural_damage(pristine: Path, tmp_path: Path, data: st.DataObject) -> None:
    names = [n for n in metadata_files(pristine / "ws") if n.endswith((".json", ".jsonl"))]
    with damaged_copy(pristine, tmp_path / "w", data.draw(structural(names, pristine))) as root:
        battery(root)


@FUZZ
@given(data=st.data())
def test_byte_damage(pristine: Path, tmp_path: Path, data: st.DataObject) -> None:
    names = [*metadata_files(pristine / "ws"), STORE]
    with damaged_copy(pristine, tmp_path / "w", data.draw(byte_damage(names, pristine))) as root:
        battery(root)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_damaged_store_rows(pristine: Path, tmp_path: Path, data: st.DataObject) -> None:
    with damaged_copy(pristine, tmp_path / "w", data.draw(row_damage(pristine))) as root:
        battery(root)
