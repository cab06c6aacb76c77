"""`dws-dagster replay` as a user runs it: a real process over a workspace in a real git
repository; the verdict as a table, as JSON, and as the exit code."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dws_dagster.cli.commands.replay import definitions_of
from dws_dagster.replay.record import latest_replay
from dws_dagster.snapshots.index import resolve_snapshot
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.definition import Workspace
from tests.conftest import ROOT, tree_state, write
from tests.replay.replay_steps import STEP_SCRIPT, git, script
from tests.replay.test_run import odd_step_after_prep


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dws_dagster.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_replay_prints_every_ref_reproduced_and_exits_0(git_ws, tmp_path: Path) -> None:
    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    take_snapshot(ws, "v1")
    write(ws.root / "code/prep.py", STEP_SCRIPT.replace("text.upper()", "text.lower()"))
    write(ws.root / "data/src/trips.csv", "a\n5\n")
    forget_databases()  # this process's connections closed: SQLite folds its log in
    before = tree_state(ws.root)

    done = _cli("replay", "v1", "--into", str(tmp_path / "again"), cwd=ws.root)
    after = tree_state(ws.root)
    kept = [path for path in after if path.startswith(".dataworkspace/replays/")]

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["REF", "VERDICT", "RECORDED", "REPRODUCED", "WHY"]
    assert [line.split()[:2] for line in lines[1:3]] == [
        ["inter/prep", "reproduced"],
        ["results/exp", "reproduced"],
    ]
    assert "every ref of snapshot v1 reproduced exactly (2 refs)" in done.stdout
    assert "replaying prep@" in done.stderr and "Traceback" not in done.stderr
    # Nothing of the workspace changed but the record of this replay, kept for its page.
    assert len(kept) == 1 and kept[0].startswith(".dataworkspace/replays/v1-")
    assert {k: v for k, v in after.items() if k not in kept} == before
    record = latest_replay(ws, resolve_snapshot(ws, "v1").hash)
    assert record is not None and record["reproduced"] and record["into"] == str(tmp_path / "again")
    assert [(r["ref"], r["verdict"]) for r in record["refs"]] == [
        ("inter/prep", "reproduced"),
        ("results/exp", "reproduced"),
    ]
    # The command it prints runs as printed.
    lines = done.stdout.strip().splitlines()
    page = lines[-1].split("the verdicts on the snapshot's lineage page: ")[1]
    argv = shlex.split(page)
    assert argv[0] == "dws-dagster"
    drawn = _cli(*argv[1:], cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    html = (tmp_path / "replay-v1.html").read_text(encoding="utf-8")
    assert '"snapshot_name":"v1"' in html.replace(" ", "") and "reproduced" in html
    printed = lines[-2].split("a workspace of its own: ")[1]
    argv = shlex.split(printed)
    assert argv[0] == "dws-dagster"
    shown = _cli(*argv[1:], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "results/exp" in shown.stdout


def test_replay_as_json_and_exit_3_when_a_ref_does_not_reproduce(git_ws, tmp_path: Path) -> None:
    ws, _ = git_ws
    odd_step_after_prep(ws)
    script(ws, "odd")  # FACTOR unset: 1
    take_snapshot(ws, "v1")

    done = _cli(
        "replay", "v1", "results/odd", "--format", "json", "--into", str(tmp_path / "j"),
        cwd=ws.root, env={"FACTOR": "2"},
    )  # fmt: skip

    assert done.returncode == 3, done.stderr
    # Spark, started to name the columns, says nothing on the terminal (no start-up
    # warnings, no log, no progress bars): stdout is the document, stderr is empty.
    assert done.stderr == ""
    found = json.loads(done.stdout)
    assert found["reproduced"] is False and found["tags"] == ["v1"]
    verdicts = {r["ref"]: r for r in found["refs"]}
    assert verdicts["inter/prep"]["verdict"] == "reproduced"
    assert verdicts["results/odd"]["verdict"] == "differs"
    assert verdicts["results/odd"]["recorded"] != verdicts["results/odd"]["reproduced"]
    # The script's CSV files, read by Spark in the command's own process: its one column.
    assert verdicts["results/odd"]["columns"] == ["v"]
    assert verdicts["results/odd"]["detail"].endswith("columns that differ: v")
    assert found["into"] == str(tmp_path / "j")


def test_replay_names_the_columns_through_a_spark_connect_session(
    git_ws, tmp_path: Path, connect_server
) -> None:
    """With Spark Connect configured (`SPARK_REMOTE`), pyspark makes no local session: the
    columns are compared by the Connect server, which reads the same paths, with the same
    verdict as a local session's."""
    ws, _ = git_ws
    odd_step_after_prep(ws)
    script(ws, "odd")  # FACTOR unset: 1
    take_snapshot(ws, "v1")

    done = _cli(
        "replay", "v1", "results/odd", "--format", "json", "--into", str(tmp_path / "c"),
        cwd=ws.root, env={"FACTOR": "2", "SPARK_REMOTE": connect_server.url},
    )  # fmt: skip

    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    verdict = {r["ref"]: r for r in json.loads(done.stdout)["refs"]}["results/odd"]
    assert verdict["verdict"] == "differs" and verdict["columns"] == ["v"]
    assert verdict["detail"].endswith("columns that differ: v")
    assert not (tmp_path / "c" / ".dataworkspace" / "spark-compare.log").exists()


def test_replay_refusals_are_one_line_and_change_nothing(git_ws, tmp_path: Path) -> None:
    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "results/prep")
    take_snapshot(ws, "v1")
    busy = tmp_path / "busy"
    write(busy / "mine.txt", "keep")
    forget_databases()  # this process's connections closed: SQLite folds its log in
    before = tree_state(ws.root)
    for args, message in [
        (["replay", "nope"], "no snapshot is tagged 'nope'"),
        (["replay", "v1", "--into", str(busy)], "is not an empty folder"),
        (["replay", "v1", "src/trips.csv"], "no step's record of src/trips.csv"),
        # The workspace's own folders: not even a new folder among them.
        *(
            (["replay", "v1", "--into", into], "inside the workspace's .dataworkspace/ folder")
            for into in (
                ".dataworkspace",
                ".dataworkspace/objects/x",
                ".dataworkspace/replays/mine",
                str(ws.root / ".dataworkspace/cache"),
            )
        ),
    ]:
        done = _cli(*args, cwd=ws.root)
        assert done.returncode == 1, (args, done.stdout)
        assert message in done.stderr and "Traceback" not in done.stderr
    assert tree_state(ws.root) == before
    assert (busy / "mine.txt").read_text() == "keep"


def test_the_definitions_are_found_where_dagsters_tools_look(tmp_path: Path) -> None:
    assert definitions_of(tmp_path) is None
    write(tmp_path / "workspace.yaml", "load_from:\n  - python_module: proj.defs\n")
    assert definitions_of(tmp_path) == "proj.defs"
    write(
        tmp_path / "workspace.yaml",
        "load_from:\n  - python_module:\n      module_name: proj.other\n",
    )
    assert definitions_of(tmp_path) == "proj.other"
    write(tmp_path / "pyproject.toml", '[tool.dg.project]\nroot_module = "proj"\n')
    assert definitions_of(tmp_path) == "proj.definitions"
    write(tmp_path / "pyproject.toml", '[tool.dagster]\nmodule_name = "proj.defs"\n')
    assert definitions_of(tmp_path) == "proj.defs"
    for broken in ("[tool.dagster\n", "\xff", '[tool]\ndagster = "x"\n'):
        write(tmp_path / "pyproject.toml", broken)
        write(tmp_path / "workspace.yaml", ": : :\n")
        assert definitions_of(tmp_path) is None


def _forget_kept_copies(ws, snapshot: str, refs: list[str]) -> None:
    """Everything `restore` could bring `refs` back from: the snapshot's retained files, the
    results copy, kept versions; as if freed or lost."""
    from dws_dagster.snapshots import snapshot_data
    from dws_dagster.snapshots.objects import ObjectStore

    objects = ObjectStore.of_workspace(ws.meta_dir)
    rows = {row.ref: row.version for row in snapshot_data.rows_of(ws, snapshot)}
    for ref in refs:
        kept = snapshot_data.manifest(ws, ref, rows[ref])
        assert kept is not None, ref
        for entry in kept[1]:
            objects.remove(entry.digest)
    for folder in ws.root.rglob("*"):
        if folder.is_dir() and folder.name in (".dws", "snapshots") and "data" in folder.parts:
            shutil.rmtree(folder, ignore_errors=True)


def test_replay_in_place_lands_the_snapshot_with_the_replayed_data(git_ws, tmp_path: Path) -> None:
    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    take_snapshot(ws, "v1")
    recorded = {ref: ws.store.get(ref).version for ref in ("inter/prep", "results/exp")}
    write(ws.root / "data/src/trips.csv", "a\n5\n")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    script(ws, "train", "--input", "inter/prep", "--output", "results/exp")
    _forget_kept_copies(ws, resolve_snapshot(ws, "v1").hash, ["inter/prep", "results/exp"])
    forget_databases()
    before = tree_state(ws.root)
    # Restore alone cannot bring them back: refused, nothing changed.
    refused = _cli("restore", "v1", cwd=ws.root)
    assert refused.returncode == 1 and "nothing was changed" in refused.stderr
    assert tree_state(ws.root) == before

    done = _cli("replay", "v1", "--in-place", cwd=ws.root)

    assert done.returncode == 0, done.stderr
    assert "replayed in place: snapshot v1" in done.stdout
    assert "data of 2 ref(s) from the replay" in done.stdout
    assert "  data replayed:  results/exp" in done.stdout
    forget_databases()
    again = Workspace.open(ws.root)
    for ref, version in recorded.items():
        assert again.store.get(ref).version == version  # the snapshot's lineage, current
        assert again.version_of(ref) == version  # and its data, reproduced
    assert (ws.root / "data/src/trips.csv").read_text() != "a\n5\n"  # the snapshot's source
    record = latest_replay(again, resolve_snapshot(again, "v1").hash)
    assert record is not None and record["in_place"] is True


def test_replay_in_place_that_does_not_reproduce_changes_nothing(git_ws, tmp_path: Path) -> None:
    ws, _ = git_ws
    odd_step_after_prep(ws)
    script(ws, "odd")
    take_snapshot(ws, "v1")
    write(ws.root / "data/src/trips.csv", "a\n5\n")
    script(ws, "prep", "--input", "src/trips.csv", "--output", "inter/prep")
    forget_databases()
    before = tree_state(ws.root)

    done = _cli(
        "replay", "v1", "--in-place", "--format", "json", "--into", str(tmp_path / "r"),
        cwd=ws.root, env={"FACTOR": "2"},
    )  # fmt: skip

    assert done.returncode == 3, done.stderr
    assert "not replayed in place: 1 ref(s) of snapshot v1 did not reproduce exactly" in (
        done.stderr
    )
    assert "(results/odd); the workspace was not changed" in done.stderr
    assert json.loads(done.stdout)["in_place"] is False and "Traceback" not in done.stderr
    after = tree_state(ws.root)
    assert {k: v for k, v in after.items() if not k.startswith(".dataworkspace/replays/")} == (
        before
    )


#: A results step as the lineage API documents it: deterministic, its metrics in results.json.
RESULTS_SCRIPT = """\
from dws_dagster.lineage import LineageBuilder

builder = LineageBuilder().as_script_step().with_parameters({"k": 1})
builder = builder.with_input_refs(["src/trips.csv"]).as_results_step("results/report")
with builder.eval() as lineage:
    text = lineage.workspace.local_path("src/trips.csv").read_text()
    lineage.write_results({"lines": len(text.splitlines())})
"""


def test_a_deterministic_results_step_reproduces(git_ws, tmp_path: Path) -> None:
    """results.json says when its step ran and how long it took; a replay runs later, for
    another time, and still writes what the step wrote: reproduced, exit 0."""
    ws, _ = git_ws
    write(ws.root / "code/report.py", RESULTS_SCRIPT)
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "code")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "report")
    script(ws, "report")
    take_snapshot(ws, "s1")
    forget_databases()

    done = _cli("replay", "s1", "--into", str(tmp_path / "again"), cwd=ws.root)

    assert done.returncode == 0, (done.stdout, done.stderr)
    assert [line.split()[:2] for line in done.stdout.splitlines()[1:2]] == [
        ["results/report", "reproduced"]
    ]
    replayed = json.loads((tmp_path / "again/results/report/results.json").read_text())
    recorded = json.loads((ws.root / "results/report/results.json").read_text())
    assert replayed["start_time"] != recorded["start_time"]  # it did run again, later
    assert replayed["metrics"] == recorded["metrics"] == {"lines": 2}


#: A step that finds its workspace by itself: from a `--workspace` argument (the lineage API's
#: `with_workspace_directory`), else from its own file's absolute path; it writes through
#: that path, not through the lineage API's workspace.
SELF_LOCATING_SCRIPT = """\
import os
import sys
from pathlib import Path
from dws_dagster.lineage import LineageBuilder

STAMP = "v1"
if "--workspace" in sys.argv:
    root = Path(sys.argv[sys.argv.index("--workspace") + 1])
elif "--pwd" in sys.argv:
    root = Path(os.environ["PWD"])
else:
    root = Path(__file__).resolve().parents[1]
builder = LineageBuilder().as_script_step().with_parameters({}).with_workspace_directory(root)
with builder.with_input_paths([root / "data/src/trips.csv"]).eval() as lineage:
    lineage.add_output_path(root / "results/located")
    out = root / "results/located"
    out.mkdir(parents=True, exist_ok=True)
    (out / "part-0.csv").write_text((root / "data/src/trips.csv").read_text() + STAMP + "\\n")
"""


@pytest.mark.parametrize("form", ["--workspace $PWD", "absolute __file__", "os.environ PWD"])
def test_a_step_that_finds_the_workspace_by_itself_replays_without_touching_it(
    git_ws, tmp_path: Path, form: str
) -> None:
    """Whatever path the step was given or worked out, the replay runs the recorded commit's
    code in the scratch workspace: the live store, data and code are byte for byte as they
    were."""
    ws, _ = git_ws
    write(ws.root / "code/located.py", SELF_LOCATING_SCRIPT)
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "code")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "located")
    if form == "--workspace $PWD":
        argv = [sys.executable, "code/located.py", "--workspace", str(ws.root)]
    elif form == "os.environ PWD":
        argv = [sys.executable, "code/located.py", "--pwd"]
    else:
        argv = [sys.executable, str(ws.root / "code/located.py")]
    shell = {**os.environ, "PYTHONPATH": str(ROOT), "PWD": str(ws.root)}
    ran = subprocess.run(argv, cwd=ws.root, env=shell, capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    take_snapshot(ws, "s1")
    # Today's checkout moved on (not committed): a replay must not run it.
    write(ws.root / "code/located.py", SELF_LOCATING_SCRIPT.replace('"v1"', '"v2"'))
    forget_databases()
    before = tree_state(ws.root)

    # Replay run from the workspace's folder, as a shell there runs it (PWD set).
    done = _cli("replay", "s1", "--into", str(tmp_path / "again"), cwd=ws.root, env=shell)

    assert done.returncode == 0, (done.stdout, done.stderr)
    assert [line.split()[:2] for line in done.stdout.splitlines()[1:2]] == [
        ["results/located", "reproduced"]
    ]
    after = tree_state(ws.root)
    assert {k: v for k, v in after.items() if not k.startswith(".dataworkspace/replays/")} == (
        before
    )
    assert (tmp_path / "again/results/located/part-0.csv").read_text() == "a\n1\nv1\n"


def test_a_tampered_working_folder_is_refused_with_its_reason(git_ws, tmp_path: Path) -> None:
    """The store is untrusted input: a record whose folder climbs out of the workspace is
    refused, and the message says which field is wrong and why, not only that it is."""
    from tests.support.store_db import damage, sql

    ws, _ = git_ws
    script(ws, "prep", "--input", "src/trips.csv", "--output", "results/prep")
    take_snapshot(ws, "v1")
    [(body,)] = sql(ws, "SELECT body FROM dws_records WHERE ref = 'results/prep'")
    record = json.loads(body)
    record["step"]["working_folder"] = "../../outside"
    damage(
        ws, "UPDATE dws_records SET body = :body WHERE body = :old",
        body=json.dumps(record), old=body,
    )  # fmt: skip
    forget_databases()
    before = tree_state(ws.root)

    done = _cli("replay", "v1", "--into", str(tmp_path / "r"), cwd=ws.root)

    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "working_folder: '../../outside' is not a folder inside the workspace" in done.stderr
    assert "Traceback" not in done.stderr
    assert tree_state(ws.root) == before
