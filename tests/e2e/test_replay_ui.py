"""A replay's Dagster runs in the Dagster UI: a copy of the example's demo
(tests/replay/replay_example.py) is replayed, one step's worth, from the command line; then
`dagster-webserver` (on 127.0.0.1, the demo's own instance) must list the replay's runs under
their tag `dws/replay_of`, each succeeded and materializing the replayed asset, and headless
Chromium must show that tag on the run's page. Screenshots are kept in
`test-artifacts/e2e/<test name>/`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import metadata_keys as keys
from dws_dagster.replay.planning import DAGSTER_ASSET, plan_replay
from dws_dagster.snapshots.index import resolve_snapshot
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.definition import Workspace
from tests.e2e.browser import browser_page, sync_playwright_or_skip
from tests.e2e.dagster_server import DagsterServer, free_port, launch
from tests.replay.replay_example import copy_demo, run

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPLAY_RUNS_QUERY = """
query E2EReplayRuns($snapshot: String!) {
  runsOrError(filter: {tags: [{key: "dws/replay_of", value: $snapshot}]}) {
    __typename
    ... on Runs {
      results { runId status tags { key value } assetSelection { path } }
    }
  }
}
"""


def _smallest_dagster_ref(ws: Workspace) -> tuple[str, int]:
    """The snapshot's Dagster-written ref whose replay takes the fewest steps."""
    best: tuple[str, int] | None = None
    plan = plan_replay(ws, "replay-me")
    for step in plan.steps:
        if step.kind != DAGSTER_ASSET:
            continue
        for ref, _version in step.outputs:
            steps = len(plan_replay(ws, "replay-me", [ref]).steps)
            if best is None or steps < best[1]:
                best = (ref, steps)
    assert best is not None
    return best


def test_replay_runs_are_listed_in_the_ui_under_their_tag(
    replay_demo: Path, tmp_path: Path, artifacts: Path
) -> None:
    sync_playwright = sync_playwright_or_skip()
    root = tmp_path / "demo"
    env = copy_demo(replay_demo, root)
    ws = Workspace.open(root)
    ref, steps = _smallest_dagster_ref(ws)
    snapshot = resolve_snapshot(ws, "replay-me").hash
    forget_databases()

    done = run(
        "-m", "dws_dagster.cli", "replay", "replay-me", ref, "--format", "json",
        "--into", str(tmp_path / "scratch"), cwd=root, env=env,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert {r["verdict"] for r in json.loads(done.stdout)["refs"]} == {"reproduced"}

    port = free_port()
    command = [
        sys.executable, "-m", "dagster_webserver", "-w", "workspace.yaml",
        "-h", "127.0.0.1", "-p", str(port),
    ]  # fmt: skip
    with launch(
        command, cwd=root, env=env, port=port, home=root / ".dagster",
        log_path=artifacts / "webserver.log",
    ) as server:  # fmt: skip
        found = server.graphql(REPLAY_RUNS_QUERY, {"snapshot": snapshot})["runsOrError"]
        assert found["__typename"] == "Runs", found
        runs = found["results"]
        # One run per replayed step, each succeeded, each tagged with the snapshot.
        assert len(runs) == steps, runs
        assert {r["status"] for r in runs} == {"SUCCESS"}
        for replayed in runs:
            assert {"key": keys.REPLAY_OF, "value": snapshot} in replayed["tags"]
        _show_run_page(sync_playwright, server, runs[0]["runId"], snapshot, artifacts)


def _show_run_page(
    sync_playwright: Any, server: DagsterServer, run_id: str, snapshot: str, artifacts: Path
) -> None:
    """The run's page and its tags dialog, the first visitor's greeting dismissed when the
    instance says it will show (it shows after a second: a fixed wait for it was a race)."""
    from playwright.sync_api import expect

    with browser_page(sync_playwright, server, artifacts, "trace-replay.zip") as (page, evidence):
        with evidence.step("run-page"):
            evidence.goto(f"{server.url}/runs/{run_id}")
            expect(page.get_by_text("RUN_SUCCESS").first).to_be_visible()
            evidence.screenshot("01-replay-run")
        with evidence.step("run-tags"):
            # The run's tags, where the UI shows them: the snapshot it replays.
            page.get_by_role("button", name="View tags and config").click()
            dialog = page.get_by_role("dialog")
            expect(dialog.get_by_text(keys.REPLAY_OF).first).to_be_visible()
            expect(dialog.get_by_text(snapshot).first).to_be_visible()
            evidence.screenshot("02-replay-run-tags")
