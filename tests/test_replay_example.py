"""`dws-dagster replay` on the example project (NYC taxi forecast), as a user runs it: the demo
materializes the whole example (Dagster runs on a real instance, the Spark IO manager) from a
git repository holding the project's code, a script step reports on the forecast in the same
lineage, a snapshot is taken after the weather-adjusted forecast; then code and data change and
the snapshot is replayed into a scratch folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance

from dws_dagster import metadata_keys as keys
from dws_dagster.workspace.snapshots.snapshots import take_snapshot
from dws_dagster.workspace.store.database import forget_databases
from dws_dagster.workspace.workspace import Workspace

from .conftest import ROOT, tree_state, write
from .replay_steps import git

FORECAST_REF = "results/yellow_rides_hourly_forecast"
REPORT_REF = "results/forecast_report"

#: A script step downstream of the forecast, run by hand as scripts are.
REPORT_SCRIPT = """\
from dws_dagster.lineage import LineageBuilder

builder = LineageBuilder().as_script_step().with_parameters({"top": 3})
builder = builder.with_input_refs(["results/yellow_rides_hourly_forecast"])
with builder.eval() as lineage:
    ws = lineage.workspace
    parts = sorted(ws.local_path("results/yellow_rides_hourly_forecast").rglob("*.parquet"))
    lineage.add_output_ref("results/forecast_report")
    out = ws.local_path("results/forecast_report")
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text(f"{len(parts)} parquet files\\n")
"""


def _commit(root: Path, message: str) -> str:
    git(
        root,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "add",
        "-A",
        "example_project",
        "report.py",
    )
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def _data_and_lineage(root: Path) -> dict[str, str]:
    """The workspace's files; not the Dagster instance's, where the replay's runs belong, nor
    the replay's own record."""
    return {
        k: v
        for k, v in tree_state(root).items()
        if not k.startswith((".dagster/", ".dataworkspace/replays/"))
    }


def _run(*argv: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=900, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's workspace in a git repository holding its own copy of the example project,
    a report script run after it, and snapshot `replay-me` of it all."""
    root = tmp_path_factory.mktemp("replay-example") / "demo"
    root.mkdir()
    shutil.copytree(
        ROOT / "example_project", root / "example_project",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    write(root / "report.py", REPORT_SCRIPT)
    git(root, "init", "-q")
    first = _commit(root, "the example project")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)]),  # the copy is imported
        "SPARK_LOCAL_IP": "127.0.0.1",
        "DAGSTER_HOME": str(root / ".dagster"),
        "DWS_EXAMPLE_WORKSPACE": str(root),
    }
    for name in ("DWS_STORE_URL", "DWS_STORE_SCHEMA"):
        env.pop(name, None)
    done = _run("-m", "dws_dagster.cli", "demo", str(root), "--small", cwd=root, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    done = _run("report.py", cwd=root, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ws = Workspace.open(root)
    record = ws.store.get(FORECAST_REF).record
    assert record["parameters"]["use_weather"] is True  # the weather-adjusted forecast
    assert record["step"]["git_commit"] == first
    take_snapshot(ws, "replay-me")
    forget_databases()
    return root, env


def test_the_example_reproduces_exactly_after_code_and_data_changed(demo, tmp_path: Path) -> None:
    root, env = demo
    # The forecast's code changes (committed), and so does a landed file.
    assets = root / "example_project/assets.py"
    assets.write_text(assets.read_text() + "\n# tuned later\n")
    _commit(root, "tune the forecast")
    landed = sorted((root / "data").rglob("yellow_tripdata_*"))[0]
    landed.write_bytes(landed.read_bytes() + b"\n")
    before = _data_and_lineage(root)

    done = _run(
        "-m", "dws_dagster.cli", "replay", "replay-me", "--format", "json",
        "--into", str(tmp_path / "scratch"), cwd=root, env=env,
    )  # fmt: skip

    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    found = json.loads(done.stdout)
    verdicts = {r["ref"]: r["verdict"] for r in found["refs"]}
    assert verdicts[FORECAST_REF] == "reproduced" and verdicts[REPORT_REF] == "reproduced"
    assert set(verdicts.values()) == {"reproduced"}, found["refs"]
    # Dagster assets and partitions: the taxi months, the weather days, training data.
    assert len(verdicts) > 20 and any("yellow_taxi_raw" in ref for ref in verdicts)
    assert _data_and_lineage(root) == before  # the current workspace untouched
    with DagsterInstance.from_config(str(root / ".dagster")) as instance:
        tagged = [r for r in instance.get_runs() if keys.REPLAY_OF in r.tags]
    assert tagged and {r.tags[keys.REPLAY_OF] for r in tagged} == {found["snapshot"]}


def test_steps_whose_commit_is_gone_are_not_replayable_and_nothing_runs(
    demo, tmp_path: Path
) -> None:
    original, env = demo
    root = tmp_path / "copy"  # the module's demo stays as it is for the other test
    shutil.copytree(original, root, symlinks=True)
    # History rewritten: every commit the steps ran at is gone from the repository.
    git(root, "checkout", "-q", "--orphan", "rewritten")
    _commit(root, "squashed")
    for branch in git(root, "branch", "--format=%(refname:short)").split():
        if branch != "rewritten":
            git(root, "branch", "-q", "-D", branch)
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")

    done = _run(
        "-m", "dws_dagster.cli", "replay", "replay-me", "--format", "json",
        "--into", str(tmp_path / "scratch"), cwd=root,
        env={**env, "DWS_EXAMPLE_WORKSPACE": str(root)},
    )  # fmt: skip

    assert done.returncode == 3, (done.stdout[-3000:], done.stderr[-3000:])
    found = json.loads(done.stdout)
    assert {r["verdict"] for r in found["refs"]} == {"not replayable"}
    assert all("is not in the repository" in r["detail"] or "which was not replayed" in r["detail"]
               for r in found["refs"])  # fmt: skip
    scratch = Workspace.open(tmp_path / "scratch")
    assert scratch.store.get(FORECAST_REF) is None  # nothing ran
