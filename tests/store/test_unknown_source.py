"""Recovering `unknown` refs after a partial restore: a source ref (no step writes it) has no
step to re-run, so every message names the command that records its data as it is now,
`dws-dagster observe REF` (`LineageStore.observe_source`); a ref a step writes is made
unknown by the restore, not by a failed step, and the messages say so and name the step."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from dws_dagster import LineageBuilder, LineageConflictError, UnknownRefStateError, Workspace
from dws_dagster.workspace.versions import short
from tests.conftest import run_step, write
from tests.support.store_db import db_dump, lose_retained, workspace_state

SRC = "src/trips.csv"
PREP = "inter/prep"
CLI = Callable[..., tuple[int, str, str]]


def partially_restored(ws: Workspace, cli: CLI) -> tuple[str, str]:
    """Snapshot v1 of src/trips.csv -> prep; then new source data and prep re-run; then the
    retained v1 data of both refs is deleted by hand, so a partial restore of v1 can bring
    back neither. Returns the restore's text output and the v1 version of the source."""
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    run_step(ws, "prep", [SRC], {PREP: "A\n1\n"})
    v1 = ws.store.get(SRC).version
    prep_v1 = ws.store.get(PREP).version
    assert cli("snapshot", "v1", "-w", ws.root)[0] == 0
    write(ws.root / "data/src/trips.csv", "a\n2\n")
    run_step(ws, "prep", [SRC], {PREP: "A\n2\n"})
    lose_retained(ws, SRC, v1)
    lose_retained(ws, PREP, prep_v1)
    code, out, err = cli("restore", "v1", "--partial", "-w", ws.root)
    assert code == 0, err
    return out, v1


def no_step_failed(message: str) -> None:
    assert "its writer" not in message and "failed" not in message


def test_messages_after_a_partial_restore_say_what_happened_and_how_to_recover(
    ws: Workspace, cli: CLI
) -> None:
    out, v1 = partially_restored(ws, cli)
    source, prep = ws.store.get(SRC), ws.store.get(PREP)
    assert source.unknown and source.owner is None and source.attempt is None
    assert prep.unknown and prep.owner == "prep" and prep.attempt is None

    # The restore's report.
    [src_line] = [line for line in out.splitlines() if f"NOT restored:   {SRC}:" in line]
    assert f"version {short(v1)} was not kept" in src_line
    assert "source data (no step writes it)" in src_line
    assert f"'dws-dagster observe {SRC}'" in src_line
    assert "re-run" not in src_line
    [prep_line] = [line for line in out.splitlines() if f"NOT restored:   {PREP}:" in line]
    assert "re-run its step 'prep'" in prep_line and "observe" not in prep_line

    # Reading either ref is refused with a message that names the way back.
    with pytest.raises(UnknownRefStateError) as info:
        run_step(ws, "reader", [SRC], {"inter/reader": "x\n"})
    message = str(info.value)
    assert f"step 'reader' may not read ref {SRC}" in message
    assert f"a snapshot restore could not bring back its version {short(v1)}" in message
    assert f"'dws-dagster observe {SRC}'" in message and "then re-run 'reader'" in message
    no_step_failed(message)
    with pytest.raises(UnknownRefStateError) as info:
        run_step(ws, "reader", [PREP], {"inter/reader": "x\n"})
    message = str(info.value)
    assert "a snapshot restore could not bring back its version" in message
    assert "re-run its step 'prep' to rewrite inter/prep" in message
    assert "observe" not in message
    no_step_failed(message)

    # `status` lists both with what to do.
    code, out, _ = cli("status", "-w", ws.root)
    assert code == 0
    assert f"need attention: {PREP} (unknown), {SRC} (unknown)" in out
    [src_hint] = [line for line in out.splitlines() if line.startswith(f"  {SRC}: ")]
    assert f"'dws-dagster observe {SRC}'" in src_hint
    no_step_failed(src_hint)
    [prep_hint] = [line for line in out.splitlines() if line.startswith(f"  {PREP}: ")]
    assert "re-run its step 'prep'" in prep_hint
    code, out, _ = cli("status", "-w", ws.root, "--format", "json")
    rows = {row["ref"]: row for row in json.loads(out)["refs"]}
    assert f"'dws-dagster observe {SRC}'" in rows[SRC]["attention"]
    assert "'prep'" in rows[PREP]["attention"]


def test_observe_recovers_a_source_and_refuses_a_ref_a_step_writes(ws: Workspace, cli: CLI) -> None:
    partially_restored(ws, cli)
    before = workspace_state(ws, ws.meta_dir)
    code, _, err = cli("observe", PREP, "-w", ws.root)
    assert code == 1
    assert "ref inter/prep is written by step 'prep'" in err
    assert "re-run 'prep'" in err and "clears unknown" in err
    assert "Traceback" not in err
    assert workspace_state(ws, ws.meta_dir) == before

    now = ws.version_of(SRC)
    code, out, err = cli("observe", SRC, "-w", ws.root)
    assert code == 0, err
    assert f"recorded {SRC}@{short(now)}" in out and "no longer unknown" in out
    for store in (ws.store, Workspace.open(ws.root).store):
        state = store.get(SRC)
        assert state.status == "source" and state.version == now and not state.unknown
    # Observing again writes nothing; a step may read the source again.
    rows = db_dump(ws)
    code, out, _ = cli("observe", SRC, "-w", ws.root, "--format", "json")
    assert code == 0
    assert json.loads(out) == {"ref": SRC, "version": now, "recorded": False, "was_unknown": False}
    assert db_dump(ws) == rows
    run_step(ws, "reader", [SRC], {"inter/reader": "x\n"})
    assert ws.store.get("inter/reader").record["inputs"] == [{"ref": SRC, "version": now}]
    # inter/prep stays unknown until its step runs again.
    assert ws.store.get(PREP).unknown
    run_step(ws, "prep", [SRC], {PREP: "A\n2\n"})
    assert ws.store.get(PREP).status == "ok"


def test_api_recovers_a_source_whose_data_was_put_back(ws: Workspace, cli: CLI) -> None:
    """The API way: data put back by hand has the version on record, and observing it clears
    `unknown` all the same."""
    _, v1 = partially_restored(ws, cli)
    write(ws.root / "data/src/trips.csv", "a\n1\n")  # the v1 data, put back by hand
    assert ws.version_of(SRC) == v1
    outcome = Workspace.open(ws.root).store.observe_source(SRC)
    assert (outcome.ref, outcome.version, outcome.recorded, outcome.was_unknown) == (
        SRC,
        v1,
        True,
        True,
    )
    state = ws.store.get(SRC)
    assert state.version == v1 and not state.unknown and state.status == "source"
    with pytest.raises(LineageConflictError, match="written by step 'prep'"):
        ws.store.observe_source(PREP)


def test_unknown_resource_and_missing_data_are_refused(
    ws: Workspace, cli: CLI, tmp_path: Path
) -> None:
    before = workspace_state(ws, ws.meta_dir)
    code, _, err = cli("observe", "nosuch/x", "-w", ws.root)
    assert code == 1 and "nosuch" in err
    code, _, err = cli("observe", "src/missing.csv", "-w", ws.root)
    assert code == 1 and "src/missing.csv" in err and "Traceback" not in err
    assert workspace_state(ws, ws.meta_dir) == before


def test_a_failed_step_is_still_named_as_such(ws: Workspace) -> None:
    """Unknown after a failed step (not a restore): the step and its failure are named."""
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    with (
        pytest.raises(RuntimeError),
        LineageBuilder()
        .with_step_name("prep")
        .with_parameters({})
        .with_input_ref(SRC)
        .with_workspace_directory(ws.root)
        .eval() as lineage,
    ):
        lineage.add_output_ref(PREP)
        write(ws.local_path(PREP) / "part-0.csv", "partial")
        raise RuntimeError("crash")
    with pytest.raises(UnknownRefStateError) as info:
        run_step(ws, "reader", [PREP], {"inter/reader": "x\n"})
    message = str(info.value)
    assert "its data may be partial after step 'prep' failed" in message
    assert "re-run 'prep' to rewrite inter/prep" in message and "restore" not in message


def test_a_remote_source_is_observed_with_its_version_given(ws: Workspace, cli: CLI) -> None:
    """Remote data cannot be versioned from here: the CLI says how instead; the API takes the
    version (as the Dagster source asset's observation does)."""
    ws.add_resource("lake", "source-data", uri="s3a://bucket/lake")
    before = workspace_state(ws, ws.meta_dir)
    code, _, err = cli("observe", "lake/trips", "-w", ws.root)
    assert code == 1 and "remote resource 'lake'" in err and "dws_source_asset" in err
    assert workspace_state(ws, ws.meta_dir) == before
    outcome = ws.store.observe_source("lake/trips", "v" * 64)
    assert outcome.recorded and ws.store.get("lake/trips").version == "v" * 64
