"""Every file under `.dataworkspace/` damaged in turn: bytes flipped, truncated, replaced by
other JSON (wrong types, missing keys, extra or deep nesting). Each command then either works
or refuses with `WorkspaceConfigError` (the CLI: exit 1, one line, no traceback) — never another
exception — nothing outside the workspace changes, and once the file's bytes are restored every
record written before is still there.

The workspace is real and built once (script steps, a forget, snapshots with a results copy, a
restore from kept versions, an OpenLineage outbox with sealed segments and a delivery state);
each example runs on a fresh copy of it. No Spark, so the whole module takes well under a
minute.
"""

from __future__ import annotations

import contextlib
import functools
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
from dws_dagster.cli import main as cli_main
from dws_dagster.ol.outbox import Outbox
from dws_dagster.ol.transport import make_transport
from dws_dagster.workspace import formats, shapes
from dws_dagster.workspace.snapshots import (
    delete_snapshot,
    list_snapshots,
    restore_snapshot,
    take_snapshot,
)
from dws_dagster.workspace.swap import keep_copy

from .conftest import run_step, tree_state, write

RESULTS = "results/exp"
#: Stands for the absolute path of the sentinel folder beside the workspace in damaged files.
ABSOLUTE = "/@sentinels@"


def ol_event(run: int, kind: str) -> dict[str, Any]:
    return {"eventType": kind, "eventTime": f"2026-01-01T00:{run % 60:02d}:00+00:00",
            "run": {"runId": f"00000000-0000-4000-8000-{run:012d}"},
            "job": {"namespace": "fuzz", "name": "job"}, "inputs": [], "outputs": [],
            "producer": "https://example.com/fuzz", "schemaURL": "https://example.com/s"}


def build(root: Path) -> Workspace:
    """A workspace holding every kind of file `.dataworkspace/` can hold."""
    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"}, {"scale": 2})
    run_step(ws, "train", ["inter/prep"], {}, {"gamma": 0.1}, results={"mae": 1.5},
             results_dir=RESULTS)
    run_step(ws, "lookup", [], {"inter/lookup": "k\n"})
    ws.store.forget("inter/lookup")
    take_snapshot(ws, "v1", "first")
    take_snapshot(ws, "v1b")  # a second tag of the same snapshot
    # Rewrite prep, keeping its old data as a kept version (what keep_versions does).
    old = ws.version_of("inter/prep")
    keep_copy(ws.resource_root("inter"), "prep", old, ws.local_path("inter/prep"))
    shutil.rmtree(ws.local_path("inter/prep"))
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "B\n2\n"}, {"scale": 3})
    run_step(ws, "train", ["inter/prep"], {}, {"gamma": 0.2}, results={"mae": 1.2},
             results_dir=RESULTS)
    take_snapshot(ws, "v2", "second")
    restore_snapshot(ws, "v1")  # a reset in the journal, kept versions made on the way
    run_step(ws, "other", ["src/trips.csv"], {"inter/other": "o\n"})
    with contextlib.suppress(RuntimeError), LineageBuilder().with_step_name("broken") \
            .with_parameters({}).with_workspace_directory(ws.root).with_no_inputs() \
            .eval() as lineage:
        lineage.add_output_ref("inter/broken")
        write(ws.local_path("inter/broken") / "part-0.csv", "half")
        raise RuntimeError("the step failed")
    outbox = Outbox(ws, segment_bytes=2000)
    for run in range(12):
        outbox.spool([ol_event(run, "START"), ol_event(run, "COMPLETE")])
    os.environ.pop("OPENLINEAGE_URL", None)
    outbox.deliver(make_transport(ws)[0], budget_seconds=30)  # state.json, events.jsonl
    outbox.spool([ol_event(99, "START")])  # one still pending
    return ws


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("pristine")
    build(home / "ws")
    write(home / "outside" / "keep.txt", "sentinel\n")
    return home


def metadata_files(ws_root: Path) -> list[str]:
    meta = ws_root / ".dataworkspace"
    return sorted(str(p.relative_to(meta)) for p in meta.rglob("*")
                  if p.is_file() and not p.name.endswith("lock"))


def test_the_workspace_has_every_kind_of_file(pristine: Path) -> None:
    names = metadata_files(pristine / "ws")
    for wanted in ("config.json", "resources.json", "lineage/current.json",
                   "snapshots/index.json", "openlineage/outbox/state.json"):
        assert wanted in names
    assert any(n.startswith("lineage/journal/") for n in names)
    assert sum(n.endswith(".keys.json") for n in names) >= 2
    manifests = [n for n in names if n.startswith("snapshots/") and n.endswith(".json")
                 and n != "snapshots/index.json"]
    assert len(manifests) == 2
    # and the notes that the store checked what it wrote (checked again when they disagree)
    assert "lineage/current.checked" in names
    assert all(n.replace(".json", ".checked") in names for n in manifests)
    journal = b"".join(p.read_bytes() for p in
                       sorted((pristine / "ws/.dataworkspace/lineage/journal").glob("*.jsonl")))
    for op in (b'"op":"record"', b'"op":"fail"', b'"op":"claim"', b'"op":"forget"',
               b'"op":"reset"'):
        assert op in journal


# --------------------------------------------------------------------------- the battery


class Unexpected(AssertionError):
    pass


def allowed(action: Callable[[], object], what: str, *, strict: bool = False) -> object:
    """Run `action`: it may work, or raise WorkspaceConfigError for a damaged file, or another
    DwsError that the (valid but edited) content explains — a tag no longer there, data whose
    version was not kept; anything else fails the test. `strict`: only WorkspaceConfigError
    (commands that only read the files)."""
    try:
        return action()
    except DwsError as exc:
        error = exc
    except Exception as exc:  # what this test is about: nothing but DwsError escapes
        raise Unexpected(f"{what} raised {type(exc).__name__}: {exc}") from exc
    assert "\n" not in str(error), f"{what}: a message of several lines: {error}"
    if strict and not isinstance(error, WorkspaceConfigError):
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
            raise Unexpected(f"dws-dagster {' '.join(args)} raised {type(exc).__name__}: "
                             f"{exc}") from exc
    text = err.getvalue()
    assert "Traceback" not in text, text
    if code != 0:
        assert text.count("\n") == 1 and text.startswith("error: "), (args, text)
    return code, text


def battery(root: Path) -> None:
    """Every kind of command, through the API and the CLI."""
    for args in (["status"], ["lineage", RESULTS], ["lineage", "inter/prep", "--snapshot", "v2"],
                 ["history"], ["diff", "v1", "v2"], ["diff", "v2", "current"],
                 ["openlineage", "status"]):
        cli(root, *args)

    def opened() -> Workspace:
        return Workspace.open(root)

    ws = allowed(opened, "Workspace.open", strict=True)
    if not isinstance(ws, Workspace):
        return
    allowed(lambda: ws.store.items(), "store.items", strict=True)
    allowed(lambda: list_snapshots(ws), "list_snapshots", strict=True)
    allowed(lambda: Outbox(ws).status(), "Outbox.status", strict=True)
    allowed(lambda: list(Outbox(ws).events()), "Outbox.events", strict=True)
    allowed(lambda: Outbox(ws).spool([ol_event(500, "START")]), "Outbox.spool")
    allowed(lambda: run_step(ws, "fuzz", ["src/trips.csv"], {"inter/fuzz": "f\n"}),
            "script step")
    allowed(lambda: take_snapshot(ws, "fz", "fuzz"), "take_snapshot")
    allowed(lambda: delete_snapshot(ws, "fz"), "delete_snapshot")
    allowed(lambda: delete_snapshot(ws, "v1b"), "delete_snapshot (one of two tags)")
    allowed(lambda: restore_snapshot(ws, "v2", partial=True), "restore_snapshot")
    cli(root, "snapshot", "fz2")
    cli(root, "restore", "v1", "--partial")
    cli(root, "delete-snapshot", "fz2", "--remove-results")


# ---------------------------------------------------------------- what must survive


def journal_lines(folder: Path) -> list[bytes]:
    """Every complete line of the `*.jsonl` segments in `folder`, in order."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        data = path.read_bytes()
        out.extend(line for line in data[: data.rfind(b"\n") + 1].split(b"\n") if line)
    return out


def history_ops(root: Path) -> list[bytes]:
    return journal_lines(root / ".dataworkspace/lineage/journal")


def outbox_lines(root: Path) -> list[bytes]:
    return journal_lines(root / ".dataworkspace/openlineage/outbox/journal")


@contextlib.contextmanager
def damaged_copy(pristine: Path, scratch: Path, name: str, content: bytes) -> Iterator[Path]:
    """A fresh copy of the pristine workspace with `.dataworkspace/<name>` replaced by
    `content`; on exit, the file's original bytes go back and every earlier record must be
    there, and nothing beside the workspace may have changed."""
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(pristine, scratch, symlinks=True)
    root = scratch / "ws"
    target = root / ".dataworkspace" / name
    original = target.read_bytes()
    ops, events = history_ops(root), outbox_lines(root)
    hashes = {info.hash for info in list_snapshots(Workspace.open(root))}
    outside = tree_state(scratch / "outside")
    # Absolute paths in the damage point at the sentinels: even code that followed them would
    # touch nothing but this test's own folder.
    target.write_bytes(content.replace(ABSOLUTE.encode(), str(scratch / "outside").encode()))
    yield root
    assert tree_state(scratch / "outside") == outside
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(original)  # the user repairs the file
    ws = Workspace.open(root)
    ws.store.items()
    now = history_ops(root)
    assert set(ops) <= set(now), "a journal record was lost"
    assert set(events) <= set(outbox_lines(root)), "an outbox event was lost"
    assert hashes <= {info.hash for info in list_snapshots(ws)}, "a snapshot was lost"
    Outbox(ws).status()


def deep(depth: int) -> bytes:
    return b'{"format": 1, "x": ' + b"[" * depth + b"]" * depth + b"}"


# ------------------------------------------------------------------ every file, fixed


@pytest.mark.parametrize("mutation", ["truncate", "flip", "empty-object", "list", "deep"])
def test_every_file_damaged_in_fixed_ways(pristine: Path, tmp_path: Path,
                                          mutation: str) -> None:
    for name in metadata_files(pristine / "ws"):
        original = (pristine / "ws/.dataworkspace" / name).read_bytes()
        content = {
            "truncate": original[: len(original) * 2 // 3],
            "flip": original[: len(original) // 2] + bytes([original[len(original) // 2] ^ 0x5A])
            + original[len(original) // 2 + 1:],
            "empty-object": b'{"format": 1}\n',
            "list": b"[1, 2, 3]\n",
            "deep": deep(5000) if name.endswith(".json") else deep(200) + b"\n",
        }[mutation]
        with damaged_copy(pristine, tmp_path / "w", name, content) as root:
            battery(root)


# -------------------------------------------------------------- structural mutations


def json_values(depth: int = 3) -> st.SearchStrategy[Any]:
    leaves = st.none() | st.booleans() | st.integers(-5, 2**40) | st.sampled_from(
        ["", "..", "../../outside", ABSOLUTE, "a/../b", "results/exp", "v1", "0" * 32, "ok",
         "script", "\x00", "snapshots/../..", "x" * 300])
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.sampled_from(
                            ["ref", "version", "hash", "tags", "folder", "record", "op",
                             "position", "segment", "offset", "format", "refs", "x"]),
                            inner, max_size=3), max_leaves=6)


def paths_in(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_in(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            found += paths_in(item, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any, action: str) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    if rest:
        copy[head] = replaced(value[head], rest, new, action)
    elif action == "delete":
        del copy[head]
    elif action == "nest":
        copy[head] = [value[head]]
    else:
        copy[head] = new
    return copy


@st.composite
def structural(draw: st.DrawFn, names: list[str], pristine: Path) -> tuple[str, bytes]:
    name = draw(st.sampled_from(names))
    original = (pristine / "ws/.dataworkspace" / name).read_bytes()
    lines = original.split(b"\n") if name.endswith(".jsonl") else [original]
    candidates = [i for i, line in enumerate(lines) if line.strip()]
    index = draw(st.sampled_from(candidates))
    parsed = orjson.loads(lines[index])
    path = draw(st.sampled_from(paths_in(parsed)))
    action = draw(st.sampled_from(["replace", "delete", "nest"]) if path
                  else st.just("replace"))
    new = draw(json_values())
    lines[index] = orjson.dumps(replaced(parsed, path, new, action))
    return name, b"\n".join(lines)


@st.composite
def byte_damage(draw: st.DrawFn, names: list[str], pristine: Path) -> tuple[str, bytes]:
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
    return name, bytes(data)


FUZZ = settings(max_examples=30, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(data=st.data())
def test_structural_damage(pristine: Path, tmp_path: Path, data: st.DataObject) -> None:
    names = [n for n in metadata_files(pristine / "ws") if n.endswith((".json", ".jsonl"))]
    name, content = data.draw(structural(names, pristine))
    with damaged_copy(pristine, tmp_path / "w", name, content) as root:
        battery(root)


@FUZZ
@given(data=st.data())
def test_byte_damage(pristine: Path, tmp_path: Path, data: st.DataObject) -> None:
    name, content = data.draw(byte_damage(metadata_files(pristine / "ws"), pristine))
    with damaged_copy(pristine, tmp_path / "w", name, content) as root:
        battery(root)


# --------------------------------------------- the quick checks agree with the schemas


def kinds_of(name: str) -> list[tuple[str, Callable[[Any], Any]]]:
    """(kind, part of the parsed file it checks) for a file under `.dataworkspace/`."""
    whole = [("config", "config.json"), ("resources", "resources.json"),
             ("index", "snapshots/index.json"), ("outbox state", "outbox/state.json")]
    for kind, suffix in whole:
        if name.endswith(suffix):
            return [(kind, lambda data: data)]
    if name == "lineage/current.json":
        return [("current", lambda data: data), ("states", lambda data: data.get("refs"))]
    if name.startswith("snapshots/") and name.endswith(".json"):
        return [("manifest", lambda data: data), ("states", lambda data: data.get("refs"))]
    if name.endswith(".keys.json"):
        return [("outbox keys", lambda data: data)]
    return []


@functools.cache
def parsed_files(pristine: Path) -> list[tuple[str, Any, list[tuple[Any, ...]]]]:
    meta = pristine / "ws/.dataworkspace"
    found = [(name, orjson.loads((meta / name).read_bytes()))
             for name in metadata_files(pristine / "ws") if kinds_of(name)]
    ops = [orjson.loads(line) for line in history_ops(pristine / "ws")]
    found.append(("lineage/journal", ops))
    return [(name, data, paths_in(data)) for name, data in found]


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_quick_checks_accept_only_what_the_schemas_accept(pristine: Path,
                                                          data: st.DataObject) -> None:
    """Files are checked by plain loops first (`shapes`), for speed; whatever they accept, the
    schemas (`formats`) must accept too, or a damaged file would get past both."""
    name, parsed, paths = data.draw(st.sampled_from(parsed_files(pristine)))
    path = data.draw(st.sampled_from(paths))
    action = data.draw(st.sampled_from(["replace", "delete", "nest"]) if path
                       else st.just("replace"))
    mutated = replaced(parsed, path, data.draw(json_values()), action)
    if name == "lineage/journal":
        if isinstance(mutated, list) and shapes.ops_ok(mutated):
            formats.check(formats.JOURNAL, mutated, name)  # must not raise
        return
    for kind, part in kinds_of(name):
        piece = part(mutated) if isinstance(mutated, dict) else mutated
        quick, schema = shapes._KINDS[kind]
        if quick(piece):
            formats.check(getattr(formats, schema), piece, name)  # must not raise


def test_checks_and_schemas_accept_the_files_dws_dagster_writes(pristine: Path) -> None:
    for name, parsed, _ in parsed_files(pristine):
        if name == "lineage/journal":
            assert shapes.ops_ok(parsed)
            formats.check(formats.JOURNAL, parsed, name)
            continue
        for kind, part in kinds_of(name):
            quick, schema = shapes._KINDS[kind]
            assert quick(part(parsed)), (name, kind)
            formats.check(getattr(formats, schema), part(parsed), name)
