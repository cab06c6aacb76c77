"""`dws-dagster replay` on the example project (NYC taxi forecast), as a user runs it: the demo
materializes the whole example (Dagster runs on a real instance, the Spark IO manager) from a
git repository holding the project's code, a script step reports on the forecast in the same
lineage, a snapshot is taken after the weather-adjusted forecast; then code and data change and
the snapshot is replayed into a scratch folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance

from dws_dagster import metadata_keys as keys
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.definition import Workspace
from tests.conftest import tree_state
from tests.replay.replay_example import DRAWN_REF, FORECAST_REF, REPORT_REF, commit, copy_demo, run
from tests.replay.replay_steps import git

pytestmark = [pytest.mark.slow]


def _data_and_lineage(root: Path) -> dict[str, str]:
    """The workspace's files; not the Dagster instance's, where the replay's runs belong, nor
    the replay's own record."""
    return {
        k: v
        for k, v in tree_state(root).items()
        if not k.startswith((".dagster/", ".dataworkspace/replays/"))
    }


def test_the_example_reproduces_exactly_after_code_and_data_changed(
    replay_demo: Path, tmp_path: Path
) -> None:
    root = tmp_path / "demo"
    env = copy_demo(replay_demo, root)
    # The forecast's code changes (committed), and so does a landed file.
    assets = root / "example_project/assets.py"
    assets.write_text(assets.read_text() + "\n# tuned later\n")
    commit(root, "tune the forecast")
    landed = sorted((root / "data").rglob("yellow_tripdata_*"))[0]
    landed.write_bytes(landed.read_bytes() + b"\n")
    before = _data_and_lineage(root)

    done = run(
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
    replay_demo: Path, tmp_path: Path
) -> None:
    root = tmp_path / "copy"
    env = copy_demo(replay_demo, root)
    # History rewritten: every commit the steps ran at is gone from the repository.
    git(root, "checkout", "-q", "--orphan", "rewritten")
    commit(root, "squashed")
    for branch in git(root, "branch", "--format=%(refname:short)").split():
        if branch != "rewritten":
            git(root, "branch", "-q", "-D", branch)
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")

    done = run(
        "-m", "dws_dagster.cli", "replay", "replay-me", "--format", "json",
        "--into", str(tmp_path / "scratch"), cwd=root,
        env=env,
    )  # fmt: skip

    assert done.returncode == 3, (done.stdout[-3000:], done.stderr[-3000:])
    found = json.loads(done.stdout)
    assert {r["verdict"] for r in found["refs"]} == {"not replayable"}
    assert all("is not in the repository" in r["detail"] or "which was not replayed" in r["detail"]
               for r in found["refs"])  # fmt: skip
    scratch = Workspace.open(tmp_path / "scratch")
    assert scratch.store.get(FORECAST_REF) is None  # nothing ran


def test_an_asset_stamped_with_the_clock_is_named_non_deterministic(
    replay_demo: Path, tmp_path: Path
) -> None:
    root = tmp_path / "demo"
    env = copy_demo(replay_demo, root)
    # The baseline forecast (use_weather off: it reads training data only) and the stamped
    # asset, in one run: the replay then runs the taxi months' steps under the forecast, not
    # also the fifteen weather days' (the example's own replay covers those).
    done = run(
        "-m", "dagster", "asset", "materialize", "-m", "example_project.definitions",
        "--select", "yellow_rides_hourly_forecast,forecast_drawn", cwd=root, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    ws = Workspace.open(root)
    assert ws.store.get(FORECAST_REF).record["parameters"]["use_weather"] is False
    take_snapshot(ws, "drawn")
    forget_databases()

    done = run(
        "-m", "dws_dagster.cli", "replay", "drawn", DRAWN_REF, "--format", "json",
        "--into", str(tmp_path / "scratch"), cwd=root, env=env,
    )  # fmt: skip

    assert done.returncode == 3, (done.stdout[-3000:], done.stderr[-3000:])
    verdicts = {r["ref"]: r for r in json.loads(done.stdout)["refs"]}
    drawn = verdicts.pop(DRAWN_REF)
    assert drawn["verdict"] == "non-deterministic"
    assert drawn["columns"] == ["drawn_at"]  # the clock's column, and only it
    assert drawn["detail"].startswith("two replays of the step on the same inputs wrote")
    # Everything it reads (the forecast and all upstream of it) reproduced exactly.
    assert verdicts and {r["verdict"] for r in verdicts.values()} == {"reproduced"}
    assert FORECAST_REF in verdicts
    assert any("yellow_taxi_raw" in ref for ref in verdicts)  # back to the landed months
