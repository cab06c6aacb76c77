"""Running replay plans (`workspace.snapshots.replay_run`): script steps re-run by their recorded
command lines at their recorded commits in a scratch workspace, and judged ref by ref against
the snapshot; real processes in a real git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dws_dagster.replay.planning import SCRIPT, ReplayPlan, ReplayStep, plan_replay
from dws_dagster.replay.run import (
    DIFFERS,
    FAILED,
    NON_DETERMINISTIC,
    NOT_REPLAYABLE,
    REPRODUCED,
    _in_scratch_arg,
    run_plan,
    step_error,
)
from dws_dagster.replay.scratch import prepare_scratch
from dws_dagster.snapshots.index import SnapshotInfo
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace.definition import Workspace
from tests.conftest import ROOT, tree_state, write
from tests.replay.replay_steps import STEP_SCRIPT, git, script

#: A step whose output depends on what is not among its parameters.
ODD_SCRIPT = """\
import os, random, sys
from dws_dagster.lineage import LineageBuilder

builder = LineageBuilder().as_script_step().with_parameters({}).with_input_refs(["inter/prep"])
with builder.eval() as lineage:
    if os.environ.get("REPLAY_FAIL"):
        sys.exit("the model server is unreachable")
    if os.environ.get("REPLAY_MISSING"):
        lineage.add_input_ref("src/gone.csv")
    lineage.add_output_ref("results/odd")
    out = lineage.workspace.local_path("results/odd")
    out.mkdir(parents=True, exist_ok=True)
    value = random.random() if os.environ.get("ODD_RANDOM") else os.environ.get("FACTOR", "1")
    (out / "part-0.csv").write_text(f"v\\n{value}\\n")
"""


def _commit(root: Path, message: str) -> str:
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "code")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def odd_step_after_prep(ws: Workspace) -> None:
    """Where every test of the odd step starts: the step committed, prep run; the odd step is
    then run with the environment the test sets."""
    write(ws.root / "code/odd.py", ODD_SCRIPT)
    _commit(ws.root, "odd")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")


def _replay(ws: Workspace, tag: str, into: Path, refs: list[str] | None = None):
    plan = plan_replay(ws, tag, refs or [])
    return run_plan(plan, prepare_scratch(ws, plan, into))


def test_a_snapshot_reproduces_exactly_after_code_and_data_changed(git_ws, tmp_path: Path) -> None:
    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    take_snapshot(ws, "v1")
    write(ws.root / "code/prep.py", STEP_SCRIPT.replace("text.upper()", "text.lower()"))
    _commit(ws.root, "lower case")
    write(ws.root / "data/src/trips.csv", "a\n7\n")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    before = tree_state(ws.root)

    report = _replay(ws, "v1", tmp_path / "scratch")

    assert [(v.ref, v.outcome) for v in report.verdicts] == [
        ("inter/prep", REPRODUCED),
        ("results/exp", REPRODUCED),
    ]
    assert report.reproduced
    assert all(v.reproduced == v.recorded for v in report.verdicts)
    assert tree_state(ws.root) == before  # the current workspace untouched
    scratch = Workspace.open(tmp_path / "scratch")
    assert (scratch.local_path("inter/prep") / "part-0.csv").read_text() == "A\n1\n"


def test_a_step_that_changes_between_two_replays_is_named_non_deterministic(
    git_ws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, _ = git_ws
    odd_step_after_prep(ws)
    monkeypatch.setenv("ODD_RANDOM", "1")
    script(ws, "odd")
    take_snapshot(ws, "v1")

    report = _replay(ws, "v1", tmp_path / "scratch")

    verdicts = {v.ref: v for v in report.verdicts}
    assert verdicts["inter/prep"].outcome == REPRODUCED
    odd = verdicts["results/odd"]
    assert odd.outcome == NON_DETERMINISTIC and odd.reproduced != odd.recorded
    assert "two replays of the step on the same inputs" in (odd.detail or "")
    assert not report.reproduced


def test_a_step_that_differs_the_same_way_twice_differs(
    git_ws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, _ = git_ws
    odd_step_after_prep(ws)
    monkeypatch.setenv("FACTOR", "1")
    script(ws, "odd")
    take_snapshot(ws, "v1")
    monkeypatch.setenv("FACTOR", "2")  # the environment changed, not the step

    report = _replay(ws, "v1", tmp_path / "scratch", ["results/odd"])

    odd = {v.ref: v for v in report.verdicts}["results/odd"]
    assert odd.outcome == DIFFERS and odd.reproduced not in (None, odd.recorded)


def test_a_step_whose_commit_is_gone_is_not_run_nor_what_reads_it(git_ws, tmp_path: Path) -> None:
    ws, first = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    write(ws.root / "code/train.py", STEP_SCRIPT + "\n# v2\n")
    gone = _commit(ws.root, "train v2")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    take_snapshot(ws, "v1")
    # History rewritten: the commit train ran at no longer exists anywhere.
    git(ws.root, "reset", "-q", "--hard", first)
    git(ws.root, "reflog", "expire", "--expire=now", "--all")
    git(ws.root, "gc", "-q", "--prune=now")

    report = _replay(ws, "v1", tmp_path / "scratch")

    verdicts = {v.ref: v for v in report.verdicts}
    assert verdicts["inter/prep"].outcome == REPRODUCED
    train = verdicts["results/exp"]
    assert train.outcome == NOT_REPLAYABLE and train.reproduced is None
    assert train.detail == f"its git commit {gone[:12]} is not in the repository"
    assert not any((tmp_path / "scratch/results/exp").rglob("*"))  # nothing ran


def test_a_step_that_fails_on_replay_is_reported_with_its_error(
    git_ws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, _ = git_ws
    odd_step_after_prep(ws)
    script(ws, "odd")
    take_snapshot(ws, "v1")
    monkeypatch.setenv("REPLAY_FAIL", "1")

    report = _replay(ws, "v1", tmp_path / "scratch", ["results/odd"])

    odd = {v.ref: v for v in report.verdicts}["results/odd"]
    assert odd.outcome == FAILED
    assert odd.detail is not None and "the model server is unreachable" in odd.detail


def test_a_failed_steps_error_is_its_own_without_the_machinerys_frames(
    git_ws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error raised inside dws_dagster (an input gone) ends a traceback of installed
    frames: the detail keeps the error and where the step's own code was, not the frames."""
    ws, _ = git_ws
    odd_step_after_prep(ws)
    script(ws, "odd")
    take_snapshot(ws, "v1")
    monkeypatch.setenv("REPLAY_MISSING", "1")

    report = _replay(ws, "v1", tmp_path / "scratch", ["results/odd"])

    odd = {v.ref: v for v in report.verdicts}["results/odd"]
    assert odd.outcome == FAILED and odd.detail is not None
    assert odd.detail.startswith("exit code 1: ")
    assert "DataNotFoundError: " in odd.detail and "src/gone.csv" in odd.detail
    assert odd.detail.endswith("(in code/odd.py, line 9)")
    for frame in ('File "', "Traceback", str(ROOT), "site-packages", "lineage_api.py"):
        assert frame not in odd.detail


@pytest.mark.parametrize(
    ("said", "error"),
    [
        ("plain words on stderr\n", "plain words on stderr"),
        ("one\ntwo\nthree\nfour\n", "two / three / four"),
        (
            'Traceback (most recent call last):\n  File "/w/code/s.py", line 3, in <module>\n'
            "    main()\n"
            '  File "/venv/lib/python3.12/site-packages/dws/x.py", line 9, in main\n'
            "    raise KeyError('k')\nKeyError: 'k'\n",
            "KeyError: 'k' (in code/s.py, line 3)",
        ),
        (
            'Traceback (most recent call last):\n  File "/w/code/s.py", line 1\n'
            "    x = (\n        ^\nSyntaxError: '(' was never closed\n",
            "SyntaxError: '(' was never closed (in code/s.py, line 1)",
        ),
        (
            'Traceback (most recent call last):\n  File "/lib/a.py", line 1, in f\n'
            "    g()\nValueError: first\n\nDuring handling of the above exception, another "
            'exception occurred:\n\nTraceback (most recent call last):\n  File "/lib/b.py", '
            "line 2, in h\n    raise\nRuntimeError: second\n  which spans two lines\n",
            "RuntimeError: second / which spans two lines",
        ),
    ],
)
def test_a_step_error_keeps_the_users_words_and_drops_the_frames(said: str, error: str) -> None:
    assert step_error(said, Path("/w")) == error


def _plan_of_one_step_writing(ref: str, marker: Path) -> ReplayPlan:
    """A plan of one replayable script step writing `ref`, which creates `marker` if run."""
    step = ReplayStep(
        key="export@1",
        kind=SCRIPT,
        name="export",
        run_id=None,
        partition=None,
        outputs=((ref, "0" * 32),),
        inputs=(),
        parameters={},
        command_line=(sys.executable, "-c", f"open({str(marker)!r}, 'w')"),
        working_folder=".",
        git_commit=None,
        code_version="1",
    )
    return ReplayPlan(SnapshotInfo(hash="0" * 32), (ref,), (step,))


def test_a_step_writing_a_remote_resource_is_never_run(tmp_path: Path) -> None:
    """The scratch workspace shares remote resources with the original: a step writing one
    would replace the original's data, so it is not replayable (and its command never runs)."""
    scratch = Workspace.init(tmp_path / "scratch")
    scratch.add_resource("lake", "intermediate-data", uri="s3a://bucket/lake")
    marker = tmp_path / "ran"
    plan = _plan_of_one_step_writing("lake/table", marker)

    report = run_plan(plan, scratch)

    (verdict,) = report.verdicts
    assert verdict.outcome == NOT_REPLAYABLE
    assert verdict.detail == (
        "it writes to remote resource(s) lake, which the scratch workspace shares with the "
        "workspace itself"
    )
    assert not marker.exists()


def test_a_step_writing_a_resource_no_longer_defined_is_not_run(tmp_path: Path) -> None:
    scratch = Workspace.init(tmp_path / "scratch")
    marker = tmp_path / "ran"
    plan = _plan_of_one_step_writing("archive/table", marker)

    (verdict,) = run_plan(plan, scratch).verdicts

    assert verdict.outcome == NOT_REPLAYABLE
    assert verdict.detail == (
        "it writes to resource(s) archive, which the workspace no longer defines"
    )
    assert not marker.exists()


#: A step reading a whole source-data resource by its folder, as `with_input_path` takes it.
LOOKUP_SCRIPT = """\
from pathlib import Path
from dws_dagster.lineage import LineageBuilder

builder = LineageBuilder().as_script_step().with_parameters({}).with_input_path("data/lookup")
with builder.eval() as lineage:
    text = "".join(p.read_text() for p in sorted(Path("data/lookup").rglob("*.csv")))
    lineage.add_output_ref("results/joined")
    out = lineage.workspace.local_path("results/joined")
    out.mkdir(parents=True, exist_ok=True)
    (out / "part-0.csv").write_text(text or "nothing to join\\n")
"""


@pytest.mark.parametrize("given", ["data/lookup", "data/lookup/zones"])
def test_every_source_input_the_snapshot_retained_is_brought_back(
    git_ws, tmp_path: Path, given: str
) -> None:
    """A step reads a source-data resource whole (or a folder of it): the scratch workspace
    holds it as the snapshot retained it, whatever happened to it since."""
    ws, _ = git_ws
    ws.add_resource("lookup", "source-data", path="data/lookup")
    write(ws.root / "data/lookup/zones/a.csv", "zone\n1\n")
    write(ws.root / "data/lookup/zones/b.csv", "zone\n2\n")
    write(ws.root / "code/lookup.py", LOOKUP_SCRIPT.replace('"data/lookup"', repr(given)))
    _commit(ws.root, "lookup")
    script(ws, "lookup")
    take_snapshot(ws, "v1")
    shutil.rmtree(ws.root / "data/lookup")  # the source data gone since

    report = _replay(ws, "v1", tmp_path / "scratch")

    assert [(v.ref, v.outcome, v.detail) for v in report.verdicts] == [
        ("results/joined", REPRODUCED, None)
    ]
    assert (tmp_path / "scratch/data/lookup/zones/b.csv").read_text() == "zone\n2\n"


def test_code_found_through_pythonpath_is_the_recorded_commits(
    git_ws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step importing the repository's own modules through PYTHONPATH=$PWD imports them,
    in a replay, from the scratch clone at the recorded commit, never from today's checkout."""
    ws, _ = git_ws
    write(ws.root / "stamp.py", 'STAMP = "v1"\n')
    write(
        ws.root / "code/stamped.py",
        "from stamp import STAMP\n" + ODD_SCRIPT.replace("results/odd", "results/stamped")
        .replace('os.environ.get("FACTOR", "1")', "STAMP"),
    )  # fmt: skip
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "stamp.py")
    _commit(ws.root, "stamped")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(ws.root)]))
    done = subprocess.run(
        [sys.executable, "code/stamped.py"], cwd=ws.root, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    take_snapshot(ws, "v1")
    write(ws.root / "stamp.py", 'STAMP = "v2"\n')  # today's checkout, not committed

    report = _replay(ws, "v1", tmp_path / "scratch", ["results/stamped"])

    stamped = {v.ref: v for v in report.verdicts}["results/stamped"]
    assert stamped.outcome == REPRODUCED, stamped
    assert (tmp_path / "scratch/results/stamped/part-0.csv").read_text() == "v\nv1\n"


_PART = st.text(alphabet="abcXYZ019_-. ", min_size=1, max_size=6).filter(
    lambda part: part not in (".", "..")
)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(_PART, max_size=4),
    where=st.sampled_from(["workspace", "repository", "elsewhere", "relative"]),
    option=st.sampled_from(["", "--workspace=", "-w="]),
)
def test_every_path_into_the_workspace_replayed_is_given_as_the_scratch_ones(
    parts: list[str], where: str, option: str
) -> None:
    """Command-line arguments naming the workspace replayed or its repository, whole or as
    an option's value, name the same place in the scratch workspace or clone; nothing else
    changes."""
    repository, clone = Path("/home/u/repo"), Path("/tmp/replays/r1")
    scratch = Workspace(
        root=clone / "ws",
        name="ws-replay",
        replay_of={"snapshot": "0" * 32, "root": str(repository / "ws"), "clone": str(clone)},
    )
    base = {
        "workspace": repository / "ws",
        "repository": repository,
        "elsewhere": Path("/home/u/other"),
        "relative": Path("data"),
    }[where]
    path = base.joinpath(*parts)
    mapped = _in_scratch_arg(f"{option}{path}", scratch)
    expected = {
        "workspace": scratch.root.joinpath(*parts),
        "repository": clone.joinpath(*parts),
    }.get(where, path)
    if where == "repository" and parts[:1] == ["ws"]:
        expected = scratch.root.joinpath(*parts[1:])
    assert mapped == f"{option}{expected}"
