"""The dws asset checks in the Dagster UI, on a `dg` project using `dws_dagster.WorkspaceComponent`.

A copy of the session's project made by `create-dagster project` (`tests/support/dg_project.py`) is
materialized once, in this process on the session's Spark, into the instance `dg dev` then
serves: its checks passed with it. Headless Chromium opens the `zones` asset's Checks tab and
finds the dws checks with their verdicts. The data is then edited by hand, the checks run again
(a run of the checks alone, as the tab's "Execute all" launches; here in this process, into the
same instance, rather than in a run process the webserver would start), and the tab shows
`dws_data_version` failed, with its description, the versions and what to run. Screenshots go
to `test-artifacts/e2e/<test name>/`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from tests.e2e.browser import browser_page, sync_playwright_or_skip
from tests.e2e.dagster_server import DagsterServer, free_port, launch, poll
from tests.support.dg_project import DgProject, load_definitions, make_project

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.spark]

CHECKS = ("dws_data_version", "dws_inputs_consistent", "dws_reproduced")
TERMINAL = {"SUCCEEDED", "FAILED", "SKIPPED", "EXECUTION_FAILED"}
CHECK_STATUS_QUERY = """
query E2EChecks($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetChecksOrError {
        ... on AssetChecks {
          checks { name executionForLatestMaterialization { runId status } }
        }
      }
    }
  }
}
"""


@dataclass
class Materialized:
    project: DgProject
    defs: Any


@pytest.fixture(scope="module")
def materialized(
    tmp_path_factory: pytest.TempPathFactory, dg_scaffolded: Path, spark: Any
) -> Materialized:
    """The project, materialized in this process (its checks run with it)."""
    made = make_project(tmp_path_factory.mktemp("dg_ui"), dg_scaffolded)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DWS_WORKSPACE", str(made.workspace))
        defs = load_definitions(made)
        with DagsterInstance.from_config(str(made.home)) as instance:
            result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
                instance=instance
            )
    assert result.success
    return Materialized(made, defs)


def run_the_checks(materialized: Materialized) -> None:
    """A run of the dws checks alone into the project's instance (what "Execute all" on the
    Checks tab launches)."""
    defs, project = materialized.defs, materialized.project
    with (
        pytest.MonkeyPatch.context() as patch,
        DagsterInstance.from_config(str(project.home)) as instance,
    ):
        patch.setenv("DWS_WORKSPACE", str(project.workspace))
        result = materialize(
            [*(defs.assets or []), *(defs.asset_checks or [])],
            instance=instance,
            resources=dict(defs.resources or {}),
            selection=AssetSelection.all_asset_checks(),
            raise_on_error=False,
        )
    assert result.success  # warning checks: a failed verdict does not fail the run


@pytest.fixture(scope="module")
def server(materialized: Materialized, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    project = materialized.project
    port = free_port()
    logs = tmp_path_factory.mktemp("dg_ui_logs")
    started = launch(
        ["dg", "dev", "-h", "127.0.0.1", "-p", str(port)],
        cwd=project.root,
        env=project.env,
        port=port,
        home=project.home,
        log_path=logs / "dg-dev.log",
    )
    try:
        started.wait_for_code_locations()
        yield started
    finally:
        started.stop()


def _statuses(server: DagsterServer) -> dict[str, tuple[str | None, str | None]]:
    data = server.graphql(CHECK_STATUS_QUERY, {"key": {"path": ["zones"]}})
    checks = data["assetNodeOrError"]["assetChecksOrError"]["checks"]
    return {
        check["name"]: (
            (check["executionForLatestMaterialization"] or {}).get("status"),
            (check["executionForLatestMaterialization"] or {}).get("runId"),
        )
        for check in checks
    }


def test_the_checks_tab_shows_dws_verdicts_and_a_failure_after_a_hand_edit(
    materialized: Materialized, server: DagsterServer, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    project = materialized.project
    before = _statuses(server)
    assert before["dws_data_version"][0] == "SUCCEEDED", before
    assert before["dws_inputs_consistent"][0] == "SUCCEEDED", before
    sync_playwright = sync_playwright_or_skip()
    with browser_page(sync_playwright, server, artifacts, "trace-checks.zip") as (page, evidence):
        with evidence.step("checks-passed"):
            evidence.goto(f"{server.url}/assets/zones?view=checks")
            for name in CHECKS:
                expect(page.get_by_text(name, exact=True).first).to_be_visible()
            expect(page.get_by_text("Passed").first).to_be_visible()
            evidence.screenshot("01-checks-passed")

        part = next((project.workspace / "data/intermediate/agg/zones").glob("part-*"))
        part.write_bytes(part.read_bytes() + b"edited by hand")

        with evidence.step("checks-again"):
            expect(page.get_by_role("button", name=re.compile(r"Execute all"))).to_be_enabled()
            run_the_checks(materialized)

            def finished() -> dict[str, Any] | None:
                now = _statuses(server)
                done = all(
                    now[name][1] != before[name][1] and now[name][0] in TERMINAL for name in CHECKS
                )
                return now if done else None

            after = poll(
                finished,
                timeout=60,
                what="the webserver to show the run of the checks",
                interval=1.0,
                on_timeout=server.log_tail,
            )
            assert after["dws_data_version"][0] == "FAILED", after
            assert after["dws_inputs_consistent"][0] == "SUCCEEDED", after
            assert after["dws_reproduced"][0] == "SKIPPED", after  # no replay: no verdict
            page.reload()
            expect(page.get_by_text("Failed", exact=True).first).to_be_visible()
            expect(page.get_by_text("changed outside step 'zones'").first).to_be_visible()
            expect(page.get_by_text("dws/found_version")).to_be_visible()
            expect(page.get_by_text("re-run step 'zones'").first).to_be_visible()
            evidence.screenshot("02-data-version-failed")
