"""The example project in the Dagster UI, end to end.

`dagster dev -w workspace.yaml` (webserver and daemon) serves the example on a fresh instance and
a fresh example workspace of the smallest size (`SMALL`); headless Chromium (Debian's, through
Playwright) opens the asset graph, launches the forecast with its upstream taxi assets with the
"Materialize all" button (a backfill of every month, which the daemon runs), and, once the
forecast's run has succeeded, reads on the forecast's asset page the workspace ref, its version
and the column schema, and in the run's event log the `dagster/column_lineage` entry (Dagster
1.13's open-source UI shows column lineage nowhere else). Then the daemon's lineage sensor must
have written the ref's lineage (with the metrics only it adds to results refs), `results.json`
and an OpenLineage COMPLETE event for the forecast into the workspace.

Screenshots, the Playwright trace of a failure, the `dagster dev` log and the runs' logs are
kept in `test-artifacts/e2e/<test name>/`. Without Playwright or `/usr/bin/chromium` the test is
skipped, unless `CI` is set: then it fails.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import ResourceRef, Workspace
from example_project.project import FORECAST_ASSET
from example_project.setup_workspace import SMALL, ensure_workspace

from .dagster_server import DagsterServer, dg_dev, poll

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

FORECAST_REF = f"results/{FORECAST_ASSET}"
#: What the UI materializes: the forecast with every upstream asset it reads by default (the
#: taxi group feeds training_data); the weather group is only read with `use_weather`.
SELECTION = 'group:"taxi" or group:"forecast"'
SELECTED_GROUPS = ("taxi", "forecast")

#: Waits (seconds). The backfill daemon works every 30 s and each run starts a Spark JVM; the
#: lineage sensor ticks every 30 s (`lineage_sensor`'s default minimum interval).
UI_TIMEOUT_MS = 30_000
BACKFILL_TIMEOUT = 300.0
SENSOR_TIMEOUT = 30 + 90.0

RUN_FAILED = {"FAILURE", "CANCELED", "CANCELING"}
BACKFILL_FAILED = {"FAILED", "FAILING", "CANCELED", "CANCELING", "COMPLETED_FAILED"}

ASSET_NODES_QUERY = """
query E2EAssetNodes { assetNodes { assetKey { path } groupName } }
"""
SHOULD_SHOW_NUX_QUERY = "query E2EShouldShowNux { shouldShowNux }"
BACKFILL_QUERY = """
query E2EBackfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { id status }
    ... on PythonError { message }
  }
  runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
    __typename
    ... on Runs { results { runId status assetSelection { path } } }
  }
}
"""
MATERIALIZATION_QUERY = """
query E2ELatestMaterialization($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset {
      assetMaterializations(limit: 1) {
        runId
        metadataEntries {
          __typename
          label
          ... on TextMetadataEntry { text }
          ... on TableSchemaMetadataEntry { schema { columns { name type } } }
          ... on TableColumnLineageMetadataEntry {
            lineage { columnName columnDeps { assetKey { path } columnName } }
          }
        }
      }
    }
  }
}
"""


# ------------------------------------------------------------------------------ helpers


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so the end-to-end test must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def sync_playwright() -> Any:
    if importlib.util.find_spec("playwright") is None:
        _unavailable("Playwright for Python is not installed: pip install 'playwright>=1.40' "
                     "(it is in the test extra)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _unavailable(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (this test uses "
                     "the system browser and never runs `playwright install`)")
    from playwright.sync_api import sync_playwright
    return sync_playwright


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    folder = ARTIFACTS / re.sub(r"[^\w.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


class Evidence:
    """Screenshots of the steps and of a failure, in the artifacts folder."""

    def __init__(self, page: Any, folder: Path) -> None:
        self.page = page
        self.folder = folder

    def screenshot(self, name: str) -> Path:
        path = self.folder / f"{name}.png"
        # Finish transitions (dialogs fade in) rather than catch them half-way.
        self.page.screenshot(path=str(path), animations="disabled")
        return path

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.screenshot(f"failure-{name}")
            raise


def _entries(materialization: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["label"]: entry for entry in materialization["metadataEntries"]}


def _strip_typenames(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_typenames(v) for k, v in value.items() if k != "__typename"}
    if isinstance(value, list):
        return [_strip_typenames(v) for v in value]
    return value


def _lineage_pairs(lineage: list[dict[str, Any]]) -> dict[str, set[tuple[str, str]]]:
    """{column: {(upstream asset key, upstream column)}} from Dagster's column lineage."""
    return {entry["columnName"]: {("/".join(dep["assetKey"]["path"]), dep["columnName"])
                                  for dep in entry["columnDeps"]}
            for entry in lineage}


def _wait_for_forecast_run(server: DagsterServer, backfill_id: str) -> str:
    """Poll the backfill's runs until the one materializing the forecast succeeded; fail at
    once when a run or the backfill fails. Returns the forecast run's id."""
    def forecast_run() -> str | None:
        server.check_running()
        data = server.graphql(BACKFILL_QUERY, {"id": backfill_id})
        backfill = data["partitionBackfillOrError"]
        assert backfill["__typename"] == "PartitionBackfill", backfill
        runs = data["runsOrError"]["results"]
        failed = [r for r in runs if r["status"] in RUN_FAILED]
        assert not failed, f"backfill {backfill_id}: runs failed: {failed}"
        assert backfill["status"] not in BACKFILL_FAILED, f"backfill {backfill_id}: {backfill}"
        for run in runs:
            keys = {"/".join(a["path"]) for a in run["assetSelection"] or []}
            if FORECAST_ASSET in keys and run["status"] == "SUCCESS":
                return run["runId"]
        return None

    return poll(forecast_run, timeout=BACKFILL_TIMEOUT, interval=2.0,
                what=f"backfill {backfill_id} to materialize {FORECAST_ASSET}",
                on_timeout=lambda: json.dumps(
                    server.graphql(BACKFILL_QUERY, {"id": backfill_id}), indent=1))


def _forecast_events(events_file: Path) -> list[dict[str, Any]]:
    if not events_file.is_file():
        return []
    events = []
    for line in events_file.read_text("utf-8").splitlines():
        if line.strip():
            with contextlib.suppress(json.JSONDecodeError):  # a line being appended
                events.append(json.loads(line))
    return [e for e in events if e.get("job", {}).get("name") == FORECAST_ASSET]


def _keep_run_logs(home: Path, folder: Path) -> None:
    """Copy the runs' captured stdout/stderr (DAGSTER_HOME/storage) into the artifacts."""
    storage = home / "storage"
    if storage.is_dir():
        shutil.copytree(storage, folder / "run-logs", dirs_exist_ok=True)


# ------------------------------------------------------------------------------ the test


@dataclass
class Materialized:
    """What the UI launched and what Dagster recorded for the forecast."""

    backfill_id: str
    run_id: str
    version: str
    schema: list[tuple[str, str]]


class Clock:
    """Phase timings, printed and kept with the artifacts."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.phases: list[str] = []

    def mark(self, phase: str) -> None:
        now = time.monotonic()
        self.phases.append(f"{phase}: {now - self.last:.1f} s")
        self.last = now

    def report(self) -> str:
        return "; ".join(self.phases) + f"; total {time.monotonic() - self.start:.0f} s"


def test_materialize_forecast_from_the_ui(sync_playwright: Any, tmp_path: Path,
                                          artifacts: Path) -> None:
    clock = Clock()
    workspace_dir = tmp_path / "workspace"
    home = tmp_path / "dagster_home"
    # The smallest example: the code location keeps the size the workspace was set up with.
    example = ensure_workspace(workspace_dir, SMALL)
    months = len(example.size.month_keys)
    try:
        with dg_dev(ROOT, home=home, workspace_dir=workspace_dir,
                         log_dir=artifacts) as server:
            server.wait_for_code_locations()
            clock.mark("dagster dev up")
            materialized = _drive_the_ui(sync_playwright, server, artifacts, months, clock)
            _check_sensor_output(server, workspace_dir, materialized)
            clock.mark("lineage sensor output")
    finally:
        _keep_run_logs(home, artifacts)
        (artifacts / "timings.txt").write_text(clock.report() + "\n", "utf-8")
    print(f"\ne2e: {clock.report()}\nartifacts: {artifacts}")


def _drive_the_ui(sync_playwright: Any, server: DagsterServer, artifacts: Path, months: int,
                  clock: Clock) -> Materialized:
    from playwright.sync_api import expect

    nodes = server.graphql(ASSET_NODES_QUERY)["assetNodes"]
    selected = [n for n in nodes if n["groupName"] in SELECTED_GROUPS]
    assert FORECAST_ASSET in {"/".join(n["assetKey"]["path"]) for n in selected}
    show_nux = server.graphql(SHOULD_SHOW_NUX_QUERY)["shouldShowNux"]

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1600, "height": 1100})
        context.set_default_timeout(UI_TIMEOUT_MS)
        context.tracing.start(screenshots=True, snapshots=True)
        page = context.new_page()
        evidence = Evidence(page, artifacts)
        passed = False
        try:
            # -- the asset graph, with the forecast and its upstream taxi assets selected
            with evidence.step("asset-graph"):
                query = urllib.parse.quote(SELECTION, safe="")
                page.goto(f"{server.url}/asset-groups~{query}/")
                if show_nux:  # a fresh instance greets its first visitor, after a second
                    nux = page.get_by_role("dialog").filter(
                        has_text="Join the Dagster community")
                    nux.get_by_role("button", name="Skip").click()
                    expect(nux).to_be_hidden()
                materialize = page.get_by_role("button", name=re.compile(r"\bMaterialize all"))
                expect(materialize).to_be_enabled()
                evidence.screenshot("01-asset-graph")

            # -- launch: "Materialize all" → (confirm unmaterialized upstream) → all months
            with evidence.step("launch"):
                materialize.click()
                confirm = page.get_by_role("dialog").filter(has_text="Are you sure?")
                launch = page.get_by_role("dialog").filter(
                    has_text=re.compile(r"Launch runs to materialize \d+ assets"))
                expect(confirm.or_(launch)).to_be_visible()
                if confirm.is_visible():  # weather_raw, a dependency without data, is empty
                    confirm.get_by_role("button", name="Confirm").click()
                expect(launch).to_contain_text(f"Launch runs to materialize {len(selected)} "
                                               "assets")
                launch.get_by_role("button", name="All", exact=True).click()
                expect(launch).to_contain_text(f"{months} partitions")
                evidence.screenshot("02-launch-dialog")
                launch.get_by_role("button", name="Launch backfill").click()
                toast = page.get_by_text(re.compile(r"Created backfill \w+"))
                expect(toast).to_be_visible()
                backfill_id = re.search(r"Created backfill (\w+)", toast.inner_text())[1]
            clock.mark("UI launch")

            # -- wait for the forecast's run (GraphQL), then see it succeeded in the UI
            run_id = _wait_for_forecast_run(server, backfill_id)
            clock.mark("backfill to forecast success")
            with evidence.step("run-page"):
                page.goto(f"{server.url}/runs/{run_id}")
                expect(page.get_by_text("Success", exact=True).first).to_be_visible()

            materialization = server.graphql(
                MATERIALIZATION_QUERY, {"key": {"path": [FORECAST_ASSET]}}
            )["assetOrError"]["assetMaterializations"][0]
            assert materialization["runId"] == run_id
            entries = _entries(materialization)
            assert entries["dws/ref"]["text"] == FORECAST_REF
            version = entries["dws/version"]["text"]
            schema = [(c["name"], c["type"])
                      for c in entries["dagster/column_schema"]["schema"]["columns"]]
            lineage = _strip_typenames(entries["dagster/column_lineage"]["lineage"])
            assert schema and lineage

            # -- the forecast's asset page: ref, version, column schema
            with evidence.step("asset-page"):
                page.goto(f"{server.url}/assets/{FORECAST_ASSET}")
                ref_row = page.locator("tr", has=page.get_by_text("dws/ref", exact=True)).last
                version_row = page.locator(
                    "tr", has=page.get_by_text("dws/version", exact=True)).last
                expect(ref_row).to_contain_text(FORECAST_REF)
                expect(version_row).to_contain_text(version)
                assert ref_row.locator("td").last.inner_text().strip() == FORECAST_REF
                assert version_row.locator("td").last.inner_text().strip() == version
                columns = page.locator("table", has=page.get_by_text("Column name", exact=True))
                expect(columns.locator("tbody tr")).to_have_count(len(schema))
                shown = [tuple(cell.inner_text().strip().splitlines()[0]
                               for cell in row.locator("td").all()[:2])
                         for row in columns.locator("tbody tr").all()]
                assert shown == schema, f"Columns section shows {shown}, expected {schema}"
                evidence.screenshot("03-forecast-asset-page")
                ref_row.scroll_into_view_if_needed()
                evidence.screenshot("04-forecast-asset-metadata")

            # -- column lineage: Dagster 1.13's open-source UI hides `dagster/column_lineage`
            #    on asset pages and shows it in the run's event log, on the materialization
            with evidence.step("column-lineage"):
                logs = urllib.parse.quote(f"step:{FORECAST_ASSET}|type:ASSET_MATERIALIZATION")
                page.goto(f"{server.url}/runs/{run_id}?logs={logs}")
                row = page.locator("tr", has=page.get_by_text("dagster/column_lineage",
                                                                 exact=True)).last
                row.get_by_text("[Show JSON]").click()
                dialog = page.get_by_role("dialog").filter(has_text="dagster/column_lineage")
                expect(dialog).to_contain_text("columnDeps")
                evidence.screenshot("05-forecast-column-lineage")
                text = dialog.inner_text()
                shown_lineage = _lineage_pairs(_strip_typenames(
                    json.loads(text[text.index("["):text.rindex("]") + 1])))
                assert shown_lineage == _lineage_pairs(lineage)
                assert set(shown_lineage) == {name for name, _ in schema}
                # Each forecast comes from the ride count a week before, in training_data.
                assert ("training_data", "rides_week_before") in shown_lineage["forecast"]
            clock.mark("UI checks")
            passed = True
        finally:
            if passed:
                context.tracing.stop()
            else:
                with contextlib.suppress(Exception):
                    evidence.screenshot("failure")
                with contextlib.suppress(Exception):
                    context.tracing.stop(path=str(artifacts / "playwright-trace.zip"))
            context.close()
            browser.close()
    return Materialized(backfill_id, run_id, version, schema)


def _check_sensor_output(server: DagsterServer, workspace_dir: Path,
                         materialized: Materialized) -> None:
    """The daemon's lineage sensor recorded the forecast: lineage with the metrics (the IO
    manager commits the record at once; only the sensor adds a results ref's metrics),
    `results.json` beside the data and an OpenLineage COMPLETE event. Polled: the sensor ticks
    every 30 s. The backfill is complete by then as well."""
    run_id, version = materialized.run_id, materialized.version
    ws = Workspace.open(workspace_dir)
    events_file = workspace_dir / ".dataworkspace" / "openlineage" / "events.jsonl"
    results_json = ws.local_path(ResourceRef.parse(FORECAST_REF)) / "results.json"

    def completes() -> list[dict[str, Any]]:
        return [e for e in _forecast_events(events_file) if e["eventType"] == "COMPLETE"
                and e["run"]["facets"]["parent"]["run"]["runId"] == run_id]

    def backfill_status() -> str:
        data = server.graphql(BACKFILL_QUERY, {"id": materialized.backfill_id})
        return data["partitionBackfillOrError"]["status"]

    def done() -> bool:
        server.check_running()
        state = ws.store.get(FORECAST_REF)
        record = state.record if state is not None else None
        return bool(record and record.get("metrics") and results_json.is_file()
                    and completes() and backfill_status() == "COMPLETED_SUCCESS")

    def progress() -> str:
        events = [(e["eventType"], e["run"]["runId"]) for e in _forecast_events(events_file)]
        return (f"store: {ws.store.get(FORECAST_REF)}\nresults.json: {results_json.is_file()}"
                f"\nevents: {events}\nbackfill: {backfill_status()}\n{server.log_tail(30)}")

    poll(done, timeout=SENSOR_TIMEOUT, interval=2.0, on_timeout=progress,
         what="the lineage sensor to record the forecast (store, results.json, OpenLineage)")

    record = ws.store.get(FORECAST_REF).record
    assert record["status"] == "ok"
    assert record["version"] == version
    assert record["step"]["name"] == FORECAST_ASSET
    assert record["step"]["run_id"] == run_id
    assert {i["ref"] for i in record["inputs"]} == {"intermediate-data/training_data"}
    results = json.loads(results_json.read_text("utf-8"))
    assert (results["run_id"], results["version"]) == (run_id, version)
    (complete,) = completes()
    (output,) = complete["outputs"]
    assert output["facets"]["version"]["datasetVersion"] == version
    assert [(f["name"], f["type"]) for f in output["facets"]["schema"]["fields"]] \
        == materialized.schema
    assert "columnLineage" in output["facets"]
