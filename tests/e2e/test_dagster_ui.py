"""The example project in the Dagster UI, end to end.

`dg dev -w workspace.yaml` (webserver and daemon, on 127.0.0.1, with the test's DAGSTER_HOME)
serves the example on a fresh instance and a fresh example workspace of the smallest size
(`SMALL`); headless Chromium (Debian's, through Playwright) opens the asset graph, launches the
forecast with its upstream taxi assets with the "Materialize all" button (a backfill of every
month, which the daemon runs), and, once the forecast's run has succeeded, reads on the
forecast's asset page the workspace ref, its version, the column schema and the column lineage
as a table (`dws/column_sources`: Dagster 1.13's open-source UI shows
`dagster/column_lineage` only as JSON, in the run's event log, which is checked too). Then the
daemon's lineage sensor must have written the ref's lineage (with the metrics only it adds to
results refs), `results.json` and an OpenLineage COMPLETE event for the forecast into the
workspace, and the sensor's page must show, where it lists the ticks, what a tick did (the
tick's skip reason: on its status tag, and in its details).

Screenshots, the Playwright trace of a failure, the `dg dev` log and the runs' logs are kept in
`test-artifacts/e2e/<test name>/`. Without Playwright or `/usr/bin/chromium` the test is
skipped, unless `CI` is set: then it fails.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import ResourceRef, Workspace
from dws_dagster.ol.job_names import asset_job_name
from example_project.project import FORECAST_ASSET
from example_project.setup_workspace import SMALL, ensure_workspace
from tests.e2e.browser import ROOT, browser_page, sync_playwright_or_skip
from tests.e2e.dagster_server import DagsterServer, dg_dev, poll

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


FORECAST_REF = f"results/{FORECAST_ASSET}"
#: What the UI materializes: the forecast with every upstream asset it reads by default (the
#: taxi group feeds training_data); the weather group is only read with `use_weather`.
SELECTION = 'group:"taxi" or group:"forecast"'
SELECTED_GROUPS = ("taxi", "forecast")

#: Waits (seconds). The backfill daemon works every 30 s and each run starts a Spark JVM; the
#: lineage sensor ticks every 30 s (`lineage_sensor`'s default minimum interval).
BACKFILL_TIMEOUT = 300.0
SENSOR_TIMEOUT = 30 + 90.0

#: A hover's tooltip shows at once; one that has not shown in this time was dropped by a
#: re-render of the live tick list, and the row is hovered again.
TOOLTIP_TIMEOUT_MS = 10_000
RUN_FAILED = {"FAILURE", "CANCELED", "CANCELING"}
BACKFILL_FAILED = {"FAILED", "FAILING", "CANCELED", "CANCELING", "COMPLETED_FAILED"}

ASSET_NODES_QUERY = """
query E2EAssetNodes { assetNodes { assetKey { path } groupName } }
"""
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
          ... on TableMetadataEntry { table { schema { columns { name } } records } }
        }
      }
    }
  }
}
"""

SENSOR = "dws_lineage_sensor"
SENSORS_QUERY = """
query E2ESensors {
  repositoriesOrError {
    __typename
    ... on RepositoryConnection {
      nodes { name location { name } sensors { name } }
    }
  }
}
"""
SENSOR_TICKS_QUERY = """
query E2ESensorTicks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { ticks(limit: 100) { id status timestamp skipReason } } }
  }
}
"""
#: What a tick of the lineage sensor says it did (`TickOutcome.tick_text`), once the backfill's
#: events are applied and their OpenLineage events written to the events file.
APPLIED_TICK = re.compile(
    r"Applied \d+ events?: \d+ lineage records? \(\d+ new to the "
    r"store\).*\. OpenLineage: \d+ events? spooled, \d+ delivered, "
    r"0 pending\."
)
IDLE_TICK = re.compile(
    r"No new events\. OpenLineage: 0 events spooled, 0 delivered, "
    r"0 pending\."
)
LINEAGE_TABLE_COLUMNS = ["output column", "input asset", "input column", "kind"]


# ------------------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def sync_playwright() -> Any:
    return sync_playwright_or_skip()


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
    return {
        entry["columnName"]: {
            ("/".join(dep["assetKey"]["path"]), dep["columnName"]) for dep in entry["columnDeps"]
        }
        for entry in lineage
    }


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

    return poll(
        forecast_run,
        timeout=BACKFILL_TIMEOUT,
        interval=2.0,
        what=f"backfill {backfill_id} to materialize {FORECAST_ASSET}",
        on_timeout=lambda: json.dumps(
            server.graphql(BACKFILL_QUERY, {"id": backfill_id}), indent=1
        ),
    )


def _forecast_events(events_file: Path) -> list[dict[str, Any]]:
    if not events_file.is_file():
        return []
    events = []
    for line in events_file.read_text("utf-8").splitlines():
        if line.strip():
            with contextlib.suppress(json.JSONDecodeError):  # a line being appended
                events.append(json.loads(line))
    return [e for e in events if e.get("job", {}).get("name") == asset_job_name(FORECAST_ASSET)]


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


def test_materialize_forecast_from_the_ui(
    sync_playwright: Any, tmp_path: Path, artifacts: Path
) -> None:
    clock = Clock()
    workspace_dir = tmp_path / "workspace"
    home = tmp_path / "dagster_home"
    # The smallest example: the code location keeps the size the workspace was set up with.
    example = ensure_workspace(workspace_dir, SMALL)
    months = len(example.size.month_keys)
    try:
        with dg_dev(ROOT, home=home, workspace_dir=workspace_dir, log_dir=artifacts) as server:
            server.wait_for_code_locations()
            # Loopback only, and the instance in the test's DAGSTER_HOME.
            served = poll(server.served_url, timeout=30, what="the webserver's address")
            assert served == f"http://127.0.0.1:{server.port}"
            assert str(home) in server.instance_info()
            clock.mark("dg dev up")
            materialized = _drive_the_ui(sync_playwright, server, artifacts, months, clock)
            _check_sensor_output(server, workspace_dir, materialized)
            clock.mark("lineage sensor output")
            _check_sensor_ticks(sync_playwright, server, artifacts)
            clock.mark("sensor ticks in the UI")
    finally:
        _keep_run_logs(home, artifacts)
        (artifacts / "timings.txt").write_text(clock.report() + "\n", "utf-8")
    print(f"\ne2e: {clock.report()}\nartifacts: {artifacts}")


def _drive_the_ui(
    sync_playwright: Any, server: DagsterServer, artifacts: Path, months: int, clock: Clock
) -> Materialized:
    from playwright.sync_api import expect

    nodes = server.graphql(ASSET_NODES_QUERY)["assetNodes"]
    selected = [n for n in nodes if n["groupName"] in SELECTED_GROUPS]
    assert FORECAST_ASSET in {"/".join(n["assetKey"]["path"]) for n in selected}

    with browser_page(sync_playwright, server, artifacts, "playwright-trace.zip") as (
        page,
        evidence,
    ):
        # -- the asset graph, with the forecast and its upstream taxi assets selected
        with evidence.step("asset-graph"):
            query = urllib.parse.quote(SELECTION, safe="")
            evidence.goto(f"{server.url}/asset-groups~{query}/")
            materialize = page.get_by_role("button", name=re.compile(r"\bMaterialize all"))
            expect(materialize).to_be_enabled()
            evidence.screenshot("01-asset-graph")

        # -- launch: "Materialize all" → (confirm unmaterialized upstream) → all months
        with evidence.step("launch"):
            materialize.click()
            confirm = page.get_by_role("dialog").filter(has_text="Are you sure?")
            launch = page.get_by_role("dialog").filter(
                has_text=re.compile(r"Launch runs to materialize \d+ assets")
            )
            expect(confirm.or_(launch)).to_be_visible()
            if confirm.is_visible():  # weather_raw, a dependency without data, is empty
                confirm.get_by_role("button", name="Confirm").click()
            expect(launch).to_contain_text(f"Launch runs to materialize {len(selected)} assets")
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
        schema = [
            (c["name"], c["type"]) for c in entries["dagster/column_schema"]["schema"]["columns"]
        ]
        lineage = _strip_typenames(entries["dagster/column_lineage"]["lineage"])
        assert schema and lineage
        lineage_table = entries["dws/column_sources"]["table"]
        assert [c["name"] for c in lineage_table["schema"]["columns"]] == LINEAGE_TABLE_COLUMNS
        lineage_rows = [
            tuple(json.loads(record)[name] for name in LINEAGE_TABLE_COLUMNS)
            for record in lineage_table["records"]
        ]
        assert ("forecast", "training_data", "rides_week_before", "transformation") in lineage_rows

        # -- the forecast's asset page: ref, version, column schema
        with evidence.step("asset-page"):
            page.goto(f"{server.url}/assets/{FORECAST_ASSET}")
            ref_row = page.locator("tr", has=page.get_by_text("dws/ref", exact=True)).last
            version_row = page.locator("tr", has=page.get_by_text("dws/version", exact=True)).last
            expect(ref_row).to_contain_text(FORECAST_REF)
            expect(version_row).to_contain_text(version)
            assert ref_row.locator("td").last.inner_text().strip() == FORECAST_REF
            assert version_row.locator("td").last.inner_text().strip() == version
            columns = page.locator("table", has=page.get_by_text("Column name", exact=True))
            expect(columns.locator("tbody tr")).to_have_count(len(schema))
            shown = [
                tuple(
                    cell.inner_text().strip().splitlines()[0]
                    for cell in row.locator("td").all()[:2]
                )
                for row in columns.locator("tbody tr").all()
            ]
            assert shown == schema, f"Columns section shows {shown}, expected {schema}"
            evidence.screenshot("03-forecast-asset-page")
            ref_row.scroll_into_view_if_needed()
            evidence.screenshot("04-forecast-asset-metadata")

        # -- the column lineage on the asset page, as a table (not behind [Show JSON])
        with evidence.step("column-lineage-table"):
            entry = page.locator("tr", has=page.get_by_text("dws/column_sources", exact=True)).last
            label, value = entry.locator(":scope > td").first, entry.locator(":scope > td").last
            table = value.locator("table")
            # Scrolled to by its label, at the left: the page scrolls down, not sideways.
            label.scroll_into_view_if_needed()
            expect(label).to_be_in_viewport(ratio=1)
            expect(table).to_be_visible()
            expect(table).to_be_in_viewport()
            expect(value).not_to_contain_text("[Show JSON]")
            headers = [cell.inner_text().strip() for cell in table.locator("th").all()]
            assert headers == LINEAGE_TABLE_COLUMNS
            shown = [
                tuple(cell.inner_text().strip() for cell in row.locator("td").all())
                for row in table.locator("tbody tr").all()
            ]
            assert shown == lineage_rows, f"the table shows {shown}"
            # Readable as it is: every column whole, none cut off at the page's edge or the
            # metadata panel's (which would need scrolling sideways).
            for cell in [
                *table.locator("th").all(),
                *table.locator("tbody tr").first.locator("td").all(),
            ]:
                expect(cell).to_be_in_viewport(ratio=1)
            evidence.screenshot("05-forecast-column-lineage-table")

        # -- column lineage: Dagster 1.13's open-source UI hides `dagster/column_lineage`
        #    on asset pages and shows it in the run's event log, on the materialization
        with evidence.step("column-lineage"):
            logs = urllib.parse.quote(f"step:{FORECAST_ASSET}|type:ASSET_MATERIALIZATION")
            page.goto(f"{server.url}/runs/{run_id}?logs={logs}")
            row = page.locator(
                "tr", has=page.get_by_text("dagster/column_lineage", exact=True)
            ).last
            row.get_by_text("[Show JSON]").click()
            dialog = page.get_by_role("dialog").filter(has_text="dagster/column_lineage")
            expect(dialog).to_contain_text("columnDeps")
            evidence.screenshot("06-forecast-column-lineage-json")
            text = dialog.inner_text()
            shown_lineage = _lineage_pairs(
                _strip_typenames(json.loads(text[text.index("[") : text.rindex("]") + 1]))
            )
            assert shown_lineage == _lineage_pairs(lineage)
            assert set(shown_lineage) == {name for name, _ in schema}
            # Each forecast comes from the ride count a week before, in training_data.
            assert ("training_data", "rides_week_before") in shown_lineage["forecast"]
        clock.mark("UI checks")
    return Materialized(backfill_id, run_id, version, schema)


def _check_sensor_output(
    server: DagsterServer, workspace_dir: Path, materialized: Materialized
) -> None:
    """The daemon's lineage sensor recorded the forecast: lineage with the metrics (the IO
    manager commits the record at once; only the sensor adds a results ref's metrics),
    `results.json` beside the data and an OpenLineage COMPLETE event. Polled: the sensor ticks
    every 30 s. The backfill is complete by then as well."""
    run_id, version = materialized.run_id, materialized.version
    ws = Workspace.open(workspace_dir)
    events_file = workspace_dir / ".dataworkspace" / "openlineage" / "events.jsonl"
    results_json = ws.local_path(ResourceRef.parse(FORECAST_REF)) / "results.json"

    def completes() -> list[dict[str, Any]]:
        return [
            e
            for e in _forecast_events(events_file)
            if e["eventType"] == "COMPLETE"
            and e["run"]["facets"]["parent"]["run"]["runId"] == run_id
        ]

    def backfill_status() -> str:
        data = server.graphql(BACKFILL_QUERY, {"id": materialized.backfill_id})
        return data["partitionBackfillOrError"]["status"]

    def done() -> bool:
        server.check_running()
        state = ws.store.get(FORECAST_REF)
        record = state.record if state is not None else None
        return bool(
            record
            and record.get("metrics")
            and results_json.is_file()
            and completes()
            and backfill_status() == "COMPLETED_SUCCESS"
        )

    def progress() -> str:
        events = [(e["eventType"], e["run"]["runId"]) for e in _forecast_events(events_file)]
        return (
            f"store: {ws.store.get(FORECAST_REF)}\nresults.json: {results_json.is_file()}"
            f"\nevents: {events}\nbackfill: {backfill_status()}\n{server.log_tail(30)}"
        )

    poll(
        done,
        timeout=SENSOR_TIMEOUT,
        interval=2.0,
        on_timeout=progress,
        what="the lineage sensor to record the forecast (store, results.json, OpenLineage)",
    )

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
    assert [
        (f["name"], f["type"]) for f in output["facets"]["schema"]["fields"]
    ] == materialized.schema
    assert "columnLineage" in output["facets"]


def _check_sensor_ticks(sync_playwright: Any, server: DagsterServer, artifacts: Path) -> None:
    """Every tick of the lineage sensor says what it did (Dagster keeps it as the tick's skip
    reason), and the sensor's page shows it where it lists the ticks: on the status tag of a
    tick ("0 runs requested": the sensor requests no runs) and in the tick's details."""
    from playwright.sync_api import expect

    repositories = server.graphql(SENSORS_QUERY)["repositoriesOrError"]["nodes"]
    (repository,) = [r for r in repositories if SENSOR in {s["name"] for s in r["sensors"]}]
    selector = {
        "repositoryName": repository["name"],
        "repositoryLocationName": repository["location"]["name"],
        "sensorName": SENSOR,
    }
    data = server.graphql(SENSOR_TICKS_QUERY, {"selector": selector})["sensorOrError"]
    ticks = data["sensorState"]["ticks"]
    texts = [t["skipReason"] for t in ticks if t["status"] == "SKIPPED"]
    assert texts and len(texts) == len(ticks), ticks  # no failed tick, each one says something
    assert all(APPLIED_TICK.fullmatch(t) or IDLE_TICK.fullmatch(t) for t in texts), texts
    assert any(APPLIED_TICK.fullmatch(t) for t in texts), texts

    page_url = (
        f"{server.url}/locations/{repository['name']}@"
        f"{repository['location']['name']}/sensors/{SENSOR}"
    )
    with (
        browser_page(sync_playwright, server, artifacts, "playwright-trace-ticks.zip") as (
            page,
            evidence,
        ),
        evidence.step("sensor-ticks"),
    ):
        evidence.goto(page_url)
        rows = page.locator("table", has=page.get_by_role("columnheader", name="Result")).locator(
            "tbody tr"
        )
        expect(rows.first).to_be_visible()
        tooltip = page.get_by_role("tooltip")

        def status_text(row: Any) -> str:
            """The tooltip of a tick's status tag. The list refreshes live and a tick that
            started after the page loaded re-renders it, which can drop the tooltip under a
            hover; the row is found and hovered again, at most three times."""
            for attempt in range(3):
                row.locator("td").nth(1).get_by_text("0 runs requested").hover()
                try:
                    expect(tooltip).to_be_visible(timeout=TOOLTIP_TIMEOUT_MS)
                except AssertionError:
                    if attempt == 2:
                        raise
                    page.mouse.move(0, 0)
                    continue
                return tooltip.inner_text().strip()
            raise AssertionError("unreachable")

        found = None
        for index in range(rows.count()):
            row = rows.nth(index)
            text = status_text(row)
            assert APPLIED_TICK.fullmatch(text) or IDLE_TICK.fullmatch(text), text
            if APPLIED_TICK.fullmatch(text):
                # The element with the role is a hidden copy for screen readers, inside the
                # tooltip people see.
                expect(tooltip.locator("xpath=..")).to_be_in_viewport()
                found = (row.locator("td").first.inner_text().strip(), text)
                evidence.screenshot("07-sensor-tick-list")
                break
            page.keyboard.press("Escape")
            page.mouse.move(0, 0)
            expect(tooltip).to_be_hidden()
        assert found is not None, "no tick in the list says it applied events"
        timestamp, text = found
        page.keyboard.press("Escape")
        page.mouse.move(0, 0)
        expect(tooltip).to_be_hidden()
        # The same text in the tick's details (new ticks may have moved its row down).
        row = rows.filter(has=page.get_by_text(timestamp, exact=True)).first
        row.locator("td").nth(4).get_by_role("button", name="0 runs requested").click()
        dialog = page.get_by_role("dialog").filter(has_text="Skip reason:")
        expect(dialog).to_contain_text(f"Skip reason: {text}")
        evidence.screenshot("08-sensor-tick-details")
