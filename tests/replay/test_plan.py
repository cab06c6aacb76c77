"""Replay plans (`workspace.snapshots.replay_plan`): the steps behind a snapshot's results in
dependency order, read from the snapshot's lineage, with what each needs to run again or why
it cannot; real script steps run as processes in a real git repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dws_dagster.errors import ReplayScratchError, SnapshotError, WorkspaceConfigError
from dws_dagster.replay.planning import SCRIPT, plan_replay
from dws_dagster.replay.scratch import prepare_scratch
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace import formats
from dws_dagster.workspace.definition import Workspace
from tests.conftest import run_step, tree_state, write
from tests.replay.replay_steps import STEP_SCRIPT, git, script


def test_script_steps_are_planned_in_dependency_order_from_the_snapshot(git_ws) -> None:
    ws, commit = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    take_snapshot(ws, "v1")
    # Later work changes the current lineage; the plan is the snapshot's.
    write(ws.root / "data/src/trips.csv", "a\n2\n")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")

    plan = plan_replay(ws, "v1")

    assert plan.requested == ("results/exp",)
    assert [s.name for s in plan.steps] == ["prep", "train"]
    prep, train = plan.steps
    assert plan.replayable and prep.replayable and train.replayable
    assert train.after == (prep.key,) and prep.after == ()
    assert prep.kind == SCRIPT
    assert prep.command_line[1:] == (
        "code/prep.py", "--input", "src/trips.csv", "--output", "inter/prep",
    )  # fmt: skip
    assert prep.working_folder == "."
    assert prep.git_commit == commit == train.git_commit
    assert prep.parameters == {"scale": 2}
    snapshot_versions = dict(ws.store.snapshot_items(plan.snapshot.hash))
    assert plan.sources == (("src/trips.csv", snapshot_versions["src/trips.csv"].version),)
    assert train.outputs == (("results/exp", snapshot_versions["results/exp"].version),)
    assert train.inputs == (("inter/prep", snapshot_versions["inter/prep"].version),)
    assert ws.store.get("inter/prep").version != snapshot_versions["inter/prep"].version


def test_an_input_replaced_before_the_snapshot_blocks_the_step_and_names_it(git_ws) -> None:
    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    write(ws.root / "data/src/trips.csv", "a\n3\n")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    take_snapshot(ws, "stale")

    plan = plan_replay(ws, "stale", ["results/exp"])

    assert [s.name for s in plan.steps] == ["train"]
    assert not plan.replayable
    assert "it read inter/prep@" in plan.steps[0].blocked
    assert "which the snapshot does not hold" in plan.steps[0].blocked


def test_a_secret_on_the_command_line_blocks_the_step_and_what_reads_it(git_ws) -> None:
    ws, _ = git_ws
    script(
        ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep",
        "--password", "hunter2-secret",
    )  # fmt: skip
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    take_snapshot(ws, "v1")

    prep, train = plan_replay(ws, "v1").steps

    assert prep.blocked == "its command line held a secret, which was never recorded"
    assert "hunter2" not in " ".join(prep.command_line)
    assert train.blocked == f"it reads what {prep.key} wrote, which cannot be replayed"


def test_steps_whose_code_or_command_was_not_recorded_are_not_replayable(
    ws: Workspace,
) -> None:
    # Scripts outside git (no commit, no code version), and a step run in-process by a test
    # harness (no command line): what they ran was never recorded.
    write(ws.root / "code/prep.py", STEP_SCRIPT)
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    run_step(ws, "train", ["inter/prep"], {"results/exp": "m\n1\n"})
    take_snapshot(ws, "v1")

    prep, train = plan_replay(ws, "v1").steps

    assert prep.blocked == (
        "neither a git commit nor a code version was recorded: the code it ran cannot be recovered"
    )
    assert train.blocked == "no command line was recorded (the step did not run as a script)"


def test_a_folder_input_depends_on_every_step_that_wrote_below_it(git_ws) -> None:
    ws, _ = git_ws
    for part in ("a", "b"):
        script(ws, f"part_{part}", "--input", "src/trips.csv", "--output", f"inter/parts/{part}")
    script(ws, "merge", "--input", "inter/parts", "--output", "results/all")
    take_snapshot(ws, "v1")

    plan = plan_replay(ws, "v1")

    assert [s.name for s in plan.steps][-1] == "merge"
    assert sorted(s.name for s in plan.steps[:2]) == ["part_a", "part_b"]
    assert len(plan.steps[-1].after) == 2 and plan.replayable


def test_refs_no_step_wrote_are_refused_by_name(git_ws) -> None:
    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    take_snapshot(ws, "v1")
    with pytest.raises(SnapshotError, match="holds no results a step wrote"):
        plan_replay(ws, "v1")
    with pytest.raises(SnapshotError, match=r"no step's record of src/trips\.csv"):
        plan_replay(ws, "v1", ["src/trips.csv"])
    assert [s.name for s in plan_replay(ws, "v1", ["inter/prep"]).steps] == ["prep"]


@settings(max_examples=300, deadline=None)
@given(
    folder=st.one_of(
        st.none(),
        st.sampled_from([".", "..", "./x", "/etc", "a/../b", "a/./b", "a//b", "a\\b", "", "a/"]),
        st.text(alphabet="./\\ab\x00", max_size=12),
        st.text(max_size=12),
    )
)
def test_a_recorded_working_folder_is_accepted_only_inside_the_workspace(folder) -> None:
    """Replay runs a script in the folder its record names: the store is untrusted input, so
    a folder is accepted only as "." or parts that cannot climb out, by the record's format
    (its fast verdict and its explanation alike)."""
    record = {
        "ref": "inter/x",
        "version": "0" * 32,
        "step": {"name": "s", "working_folder": folder},
    }
    quick = formats.RECORD.ok(record)
    refused = ""
    try:
        formats.check(formats.RECORD, record, "store")
        schema = True
    except WorkspaceConfigError as exc:
        schema, refused = False, str(exc)
    # A refusal keeps its reason: what the field must be, not only that it is wrong.
    assert schema or ("working_folder" in refused and "is not ;" not in refused), refused
    assert quick == schema
    if schema and folder is not None:
        parts = folder.split("/")
        assert not folder.startswith("/") and ".." not in parts and "\\" not in folder
        assert folder == "." or ("." not in parts and "" not in parts)
        root = Path("/workspace")
        assert (root / folder).resolve().is_relative_to(root)


def test_the_scratch_workspace_holds_the_snapshots_sources_and_the_steps_code(
    git_ws, tmp_path: Path
) -> None:
    ws, commit = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    take_snapshot(ws, "v1")
    # Afterwards the code and the source data change, and are committed.
    write(ws.root / "code/prep.py", STEP_SCRIPT.replace("text.upper()", "text.lower()"))
    write(ws.root / "data/src/trips.csv", "a\n9\n")
    write(ws.root / "data/src/extra.csv", "e\n1\n")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "lower")
    plan = plan_replay(ws, "v1")
    before = tree_state(ws.root)

    scratch = prepare_scratch(ws, plan, tmp_path / "scratch")

    assert tree_state(ws.root) == before  # the current workspace is untouched
    root = tmp_path / "scratch"
    assert scratch.root == root and git(root, "rev-parse", "HEAD") == commit
    assert (root / "code/prep.py").read_text() == STEP_SCRIPT
    assert (root / "data/src/trips.csv").read_text() == "a\n1\n"
    assert not (root / "data/src/extra.csv").exists()  # not in the snapshot
    assert scratch.version_of("src/trips.csv") == dict(plan.sources)["src/trips.csv"]
    assert sorted(scratch.resources) == sorted(ws.resources)
    assert scratch.store.get("inter/prep") is None  # a store of its own, empty
    assert not any((root / "data/inter").rglob("*"))  # nothing replayed yet


def test_a_scratch_folder_that_would_overwrite_anything_is_refused(git_ws) -> None:
    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "results/prep")
    take_snapshot(ws, "v1")
    plan = plan_replay(ws, "v1")
    busy = ws.root.parent / "busy"
    write(busy / "keep.txt", "mine")
    cases = {
        busy: "is not an empty folder",
        ws.root / "data/inter/replay": "overlaps resource 'inter'",
        ws.root / "data": "overlaps resource",
        ws.root.parent: "holds the workspace itself",
    }
    for into, message in cases.items():
        with pytest.raises(ReplayScratchError, match=message):
            prepare_scratch(ws, plan, into)
    assert (busy / "keep.txt").read_text() == "mine"
    assert not (ws.root / "data/inter/replay").exists()
