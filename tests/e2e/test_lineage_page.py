"""The HTML lineage page in headless Chromium, as a person sees it.

The page of a forecast whose lineage is recorded through the workspace's store the way the
Spark IO manager records it (tests/views/lineage_page_graphs.py: a daily-partitioned asset of 62
days and a monthly one feeding training data, the forecast with two runs, column lineage,
one failed partition) is opened from a file: the forecast (the focus) must be in the window,
each asset one node ("62 partitions", not 62 nodes), a column's upstream columns highlighted
across assets, the details panel showing parameters and metrics, and search finding columns
and partitions. A synthetic graph of 50 assets × 200 partitions must open with the focus in
view. The page of the forecast's snapshot after a replay must show each node's verdict in
words and the replay's result in a banner. Screenshots are kept in
`test-artifacts/e2e/<test name>/`. Without Playwright or
`/usr/bin/chromium` the tests are skipped, unless `CI` is set: then they fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dws_dagster.views.diagrams import render_html
from dws_dagster.views.graph import build_graph
from dws_dagster.workspace.definition import Workspace
from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS, sync_playwright_or_skip
from tests.views.lineage_page_graphs import (
    FAILED_DAY,
    FORECAST_DIFFERS,
    FORECAST_METRICS,
    FORECAST_REF,
    NOT_REPLAYABLE_DETAIL,
    OUTSIDE_REF,
    REPLAY_FAILED_DETAIL,
    WEATHER_DAYS,
    forecast_lineage,
    replay_document,
    replayed_forecast,
    synthetic_graph,
    verdict,
    version_of,
)
from tests.views.test_lineage_page import HOSTILE, hostile_graph
from tests.views.test_render import cycle, diamond, tricky

pytestmark = [pytest.mark.e2e]

WINDOW = {"width": 1400, "height": 900}
#: Waits for what the page does in a few milliseconds; generous for a loaded machine.
TIMEOUT_MS = 30_000
UP_BACKGROUND = "rgb(217, 242, 244)"  # --up-bg
DOWN_BACKGROUND = "rgb(243, 229, 245)"  # --down-bg


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = sync_playwright_or_skip()
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Page:
    """A page opened from a file, its errors and dialogs collected, screenshots kept."""

    def __init__(self, browser: Any, html: str, folder: Path) -> None:
        self.folder = folder
        path = folder / "lineage.html"
        path.write_text(html, encoding="utf-8")
        self.context = browser.new_context(viewport=WINDOW)
        self.context.set_default_timeout(TIMEOUT_MS)
        # Nothing may be fetched: any request but the file itself is a failure.
        self.requests: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on(
            "console", lambda message: message.type == "error" and self.errors.append(message.text)
        )
        self.page.on("dialog", self._dialog)
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("html[data-ready=true]")

    def _route(self, route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.requests.append(route.request.url)
            route.abort()

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def screenshot(self, name: str) -> Path:
        path = self.folder / f"{name}.png"
        self.page.screenshot(path=str(path), animations="disabled")
        return path

    def close(self) -> None:
        self.context.close()
        assert self.errors == [] and self.requests == [] and self.dialogs == []

    def node(self, name: str) -> Any:
        return self.page.locator(".node").filter(
            has=self.page.locator(".title", has_text=re.compile(f"^{re.escape(name)}$"))
        )

    def in_view(self, locator: Any) -> bool:
        """The element's box lies wholly inside the window and the graph's area (not under
        the details panel)."""
        box = locator.bounding_box()
        area = self.page.locator("#viewport").bounding_box()
        assert box is not None and area is not None
        return (
            area["x"] <= box["x"]
            and box["x"] + box["width"] <= area["x"] + area["width"]
            and area["y"] <= box["y"]
            and box["y"] + box["height"] <= area["y"] + area["height"]
            and box["x"] + box["width"] <= WINDOW["width"]
            and box["y"] + box["height"] <= WINDOW["height"]
        )

    def style(self, locator: Any, prop: str) -> str:
        return locator.evaluate(f"e => getComputedStyle(e).{prop}")

    def overlapping_nodes(self) -> list[tuple[str, str]]:
        boxes = self.page.eval_on_selector_all(
            ".node",
            """nodes => nodes.map(n => [
            n.querySelector('.title').textContent, n.offsetLeft, n.offsetTop,
            n.offsetWidth, n.offsetHeight])""",
        )
        found = []
        for i, (a, x1, y1, w1, h1) in enumerate(boxes):
            for b, x2, y2, w2, h2 in boxes[i + 1 :]:
                if not (x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1):
                    found.append((a, b))
        return found


@pytest.fixture
def open_page(browser: Any, artifacts: Path) -> Iterator[Any]:
    pages: list[Page] = []

    def opener(html: str) -> Page:
        pages.append(Page(browser, html, artifacts))
        return pages[-1]

    yield opener
    for page in pages:
        page.close()


def test_forecast_page_as_a_person_sees_it(ws: Workspace, open_page: Any) -> None:
    from playwright.sync_api import expect

    ref = forecast_lineage(ws)
    graph = build_graph(ws.store, ref, {n: r.role for n, r in ws.resources.items()})
    page = open_page(render_html(graph))
    p = page.page
    page.screenshot("01-open")

    # -- the focus is in the window, marked, at a size a person can read
    focus = p.locator(".node.focus")
    expect(focus).to_have_count(1)
    expect(focus.locator(".title")).to_have_text("forecast")
    expect(focus.locator(".badge")).to_have_text("focus")
    assert page.in_view(focus)
    assert p.evaluate("window.lineagePage.state.scale") >= 0.8
    assert page.style(focus.locator(".title"), "fontSize") == "14px"

    # -- one node per asset: 62 weather days are one node saying so, with their status bar
    expect(p.locator(".node")).to_have_count(7)
    weather = page.node("weather_raw")
    expect(weather).to_have_count(1)
    expect(weather).to_contain_text("62 partitions")
    expect(weather).to_contain_text(f"{WEATHER_DAYS[0]} … {WEATHER_DAYS[-1]}")
    failed = weather.locator(".bar .failed")
    expect(failed).to_be_visible()
    assert (failed.bounding_box() or {"width": 0})["width"] >= 3
    expect(page.node("src/weather/")).to_contain_text("62 files")
    assert page.overlapping_nodes() == []

    # -- the details panel opens on the focus: parameters and metrics of its last run
    panel = p.locator("#panel")
    expect(panel.locator("h2")).to_have_text("forecast")
    expect(panel).to_contain_text("Last run")
    for name, value in [
        ("use_weather", "true"),
        ("horizon_days", "7"),
        *((k, str(v)) for k, v in FORECAST_METRICS.items()),
    ]:
        row = panel.locator("table.kv tr").filter(has=p.locator("td", has_text=name))
        expect(row.first).to_contain_text(value)
    expect(panel).to_contain_text("Code version")
    history = panel.locator(".history li")
    expect(history).to_have_count(2)
    expect(history.first).to_contain_text("current")
    expect(history.nth(1)).to_contain_text("use_weather=false")

    # -- column lineage: the forecast's `forecast` column, traced upstream and downstream
    focus.locator(".cols-btn").click()
    focus.locator('.col[data-col="forecast"]').click()
    page.screenshot("02-column-lineage")
    expect(focus.locator(".col.sel")).to_have_text(re.compile("^forecast"))
    expect(focus.locator(".col.sel .how")).to_have_text("← transformation")
    upstream = {
        "training_data": ["precip_mm", "rides_week_before"],
        "weather_raw": ["precip_mm"],
        "rides_hourly": ["rides"],
        "src/weather/": ["precip_in"],
        "src/trips/": ["pickup_datetime"],
    }
    for name, columns in upstream.items():
        node = page.node(name)
        assert "on-path" in (node.get_attribute("class") or "")
        assert page.style(node, "opacity") == "1"
        for column in columns:
            cell = node.locator(f'.col.up[data-col="{column}"]')
            expect(cell).to_be_visible()
            assert page.style(cell, "backgroundColor") == UP_BACKGROUND
    expect(page.node("weather_raw").locator('.col[data-col="precip_mm"] .how')).to_have_text(
        "← transformation"
    )
    expect(page.node("training_data").locator('.col[data-col="precip_mm"] .how')).to_have_text(
        "← aggregation"
    )
    expect(page.node("training_data").locator(".rows-note")).to_contain_text("join")
    down = page.node("results/dashboard").locator('.col.down[data-col="error"]')
    expect(down).to_be_visible()
    assert page.style(down, "backgroundColor") == DOWN_BACKGROUND
    # Columns off the path are listed dimmed, nodes off the path faded.
    expect(focus.locator(".col.off")).to_have_count(3)
    expect(panel.locator(".trace-box")).to_contain_text("training_data.rides_week_before")
    expect(p.locator(".col-edge.up")).not_to_have_count(0)
    assert page.overlapping_nodes() == []
    # Following an upstream column from the panel brings its node into view.
    panel.get_by_role("button", name="weather_raw.precip_mm", exact=True).click()
    assert page.in_view(page.node("weather_raw"))
    expect(page.node("weather_raw").locator(".col.sel")).to_have_attribute("data-col", "precip_mm")
    page.screenshot("03-upstream-column")
    p.keyboard.press("Escape")
    expect(p.locator(".col.sel")).to_have_count(0)

    # -- search: a column, then a partition
    search = p.locator("#search")
    search.fill("rides_week")
    result = p.locator("#results li").filter(has_text="training_data.rides_week_before")
    expect(result).to_be_visible()
    page.screenshot("04-search")
    result.click()
    training = page.node("training_data")
    assert page.in_view(training)
    expect(training.locator(".col.sel")).to_have_attribute("data-col", "rides_week_before")
    search.fill(FAILED_DAY)
    search.press("Enter")
    assert page.in_view(weather)
    expect(panel.locator("h2")).to_have_text("weather_raw")
    rows = panel.locator(".parts-list tbody tr")
    expect(rows).to_have_count(len(WEATHER_DAYS))
    hit = panel.locator(".parts-list tr.hit")
    expect(hit).to_contain_text(FAILED_DAY)
    expect(hit).to_be_in_viewport()
    assert "st-failed" in (hit.get_attribute("class") or "")
    expect(panel).to_contain_text("ValueError: station KJFK sent no rows")
    page.screenshot("05-failed-partition")


def test_hostile_names_are_shown_as_text(open_page: Any) -> None:
    from playwright.sync_api import expect

    page = open_page(render_html(hostile_graph()))
    p = page.page
    title = p.locator(".node.focus .title")
    expect(title).to_have_text(HOSTILE[0])
    expect(p.locator("#panel")).to_contain_text(HOSTILE[4])
    assert p.locator("script").count() == 3  # none injected
    assert p.evaluate("typeof window.alert") == "function"
    page.screenshot("01-open")
    # close() asserts that no dialog opened and nothing failed or was fetched


def readable(page: Page, locator: Any) -> None:
    """`locator` is shown whole (not cut short), at a size a person reads, and clear of its
    node's title."""
    assert locator.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), locator.inner_text()
    assert float(page.style(locator, "fontSize").removesuffix("px")) >= 11
    node = locator.locator("xpath=ancestor::div[contains(@class, 'node')][1]")
    box, title = locator.bounding_box(), node.locator(".title").bounding_box()
    assert box is not None and title is not None
    assert box["y"] >= title["y"] + title["height"] - 0.5  # below the title, never over it


def test_replay_verdicts_as_a_person_sees_them(ws: Workspace, open_page: Any) -> None:
    from playwright.sync_api import expect

    graph = replayed_forecast(ws)
    page = open_page(render_html(graph))
    p = page.page
    page.screenshot("01-open")

    # -- the banner says what the replay found, under the header, above the graph
    banner = p.locator("#replay")
    expect(banner.locator(".headline")).to_have_text(
        "≠ Replay of snapshot v1 on 2026-11-25 01:50 UTC: 64 of 68 refs reproduced exactly"
    )
    expect(banner.locator(".verdict")).to_have_text(
        ["≠ 1 differs", "≈ 1 non-deterministic", "✗ 1 failed", "⊘ 1 not replayable"]
    )
    expect(banner).to_contain_text("1 more ref outside this graph")
    header, area = p.locator(".top").bounding_box(), p.locator("#viewport").bounding_box()
    box = banner.bounding_box()
    assert header is not None and area is not None and box is not None
    assert header["y"] + header["height"] <= box["y"] + 0.5
    assert box["y"] + box["height"] <= area["y"] + 0.5

    # -- every replayed node says its verdict in words; source data says nothing
    focus = p.locator(".node.focus")
    expect(focus.locator(".verdict")).to_have_text("≠ differs")
    expect(focus.locator(".verdict-note")).to_have_text(FORECAST_DIFFERS)
    readable(page, focus.locator(".verdict"))
    p.locator("#fit").click()
    page.screenshot("02-whole-graph")
    pills = {
        "forecast": ["≠ differs"],
        "training_data": ["✓ reproduced"],
        "results/dashboard": ["⊘ not replayable"],
        "weather_raw": [f"✓ {len(WEATHER_DAYS) - 1} reproduced", "✗ 1 failed"],
        "rides_hourly": ["✓ 1 reproduced", "≈ 1 non-deterministic"],
    }
    colours = set()
    for name, texts in pills.items():
        node = page.node(name)
        expect(node.locator(".verdict")).to_have_text(texts)
        for pill in node.locator(".verdict").all():
            readable(page, pill)
            colours.add((pill.inner_text()[0], page.style(pill, "backgroundColor")))
    assert len({colour for _, colour in colours}) == 5  # each verdict its own colour too
    expect(page.node("results/dashboard").locator(".verdict-note")).to_have_text(
        NOT_REPLAYABLE_DETAIL
    )
    for name in ("src/weather/", "src/trips/"):
        expect(page.node(name).locator(".verdict")).to_have_count(0)
    assert page.overlapping_nodes() == []

    # -- the details of the node that differs: recorded beside reproduced, and the columns
    p.locator("#to-focus").click()
    page.node("results/dashboard").click()
    panel = p.locator("#panel")
    expect(panel.locator(".replay-box")).to_contain_text(NOT_REPLAYABLE_DETAIL)
    page.node("forecast").click()
    expect(panel.locator("h2")).to_have_text("forecast")
    replay = panel.locator(".replay-box")
    expect(replay.locator("h3")).to_have_text("Replay of snapshot v1")
    expect(replay.locator(".verdict")).to_have_text("≠ differs")
    recorded = version_of(FORECAST_REF, "run-forecast-2")
    reproduced = version_of(FORECAST_REF, "replayed")
    rows = {
        dt.inner_text(): dd
        for dt, dd in zip(replay.locator("dt").all(), replay.locator("dd").all(), strict=True)
    }
    assert rows["Recorded"].inner_text() == recorded[:12]
    assert rows["Recorded"].locator(".mono").get_attribute("title") == recorded
    assert rows["Reproduced"].inner_text() == reproduced[:12]
    assert rows["Detail"].inner_text() == FORECAST_DIFFERS
    assert rows["Differing columns"].inner_text() == "≠ forecast"
    expect(replay).to_be_in_viewport()
    page.screenshot("03-differs-details")

    # -- its columns: the one whose content differs is marked, in the node and the panel
    focus.locator(".cols-btn").click()
    differing = focus.locator(".col.differs")
    expect(differing).to_have_count(1)
    expect(differing).to_have_attribute("data-col", "forecast")
    expect(differing.locator(".dmark")).to_have_text("≠")
    expect(panel.locator(".col-list .link.differs")).to_have_text("≠ forecast")
    assert page.overlapping_nodes() == []
    page.screenshot("04-differing-column")

    # -- a partitioned node: its failed partition listed with the error, marked in the list
    search = p.locator("#search")
    search.fill(FAILED_DAY)
    search.press("Enter")
    expect(panel.locator("h2")).to_have_text("weather_raw")
    failed = panel.locator(".replay-box .verdict-list li")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text(FAILED_DAY)
    expect(failed.locator(".verdict")).to_have_text("✗ failed")
    expect(failed.locator(".vi-detail")).to_have_text(REPLAY_FAILED_DETAIL)
    hit = panel.locator(".parts-list tr.hit")
    expect(hit.locator(".verdict")).to_have_attribute("aria-label", "failed")
    expect(panel.locator(".parts-list .verdict-key")).to_contain_text("not replayable")
    page.screenshot("05-failed-partition")

    # -- the whole replay: what it did not reproduce, and the ref outside this graph
    banner.get_by_role("button", name="Replay details").click()
    expect(panel.locator("h2")).to_have_text("Replay of snapshot v1")
    lists = panel.locator(".verdict-list")
    expect(lists.first.locator("li")).to_have_count(4)
    expect(lists.nth(1)).to_contain_text(OUTSIDE_REF)
    expect(panel).to_contain_text("Outside this graph (1)")
    page.screenshot("06-replay-details")
    lists.first.get_by_role("button", name="forecast", exact=True).click()
    expect(panel.locator("h2")).to_have_text("forecast")
    assert page.in_view(focus)


def test_hostile_replay_values_are_shown_as_text(open_page: Any) -> None:
    from playwright.sync_api import expect

    graph = hostile_graph()
    graph.replay = {
        **replay_document(
            verdict("inter/out", HOSTILE[0], "differs", "2", "3", HOSTILE[0], list(HOSTILE)),
            verdict("raw/elsewhere", HOSTILE[4], "failed", "1", None, HOSTILE[5]),
        ),
        "snapshot_name": HOSTILE[1],
        "into": HOSTILE[3],
    }
    page = open_page(render_html(graph))
    p = page.page
    expect(p.locator("#replay .headline")).to_contain_text(HOSTILE[1])
    focus = p.locator(".node.focus")
    expect(focus.locator(".verdict")).to_have_text("≠ differs")
    expect(focus.locator(".verdict-note")).to_contain_text(HOSTILE[0])
    expect(p.locator("#panel .replay-box .diff-col")).to_have_count(len(HOSTILE))
    page.screenshot("01-open")
    p.locator("#replay").get_by_role("button", name="Replay details").click()
    expect(p.locator("#panel")).to_contain_text(HOSTILE[5])
    assert p.locator("script").count() == 3  # none injected
    page.screenshot("02-replay-details")


@pytest.mark.parametrize("make", [diamond, cycle, tricky])
def test_graphs_built_by_hand_open_with_the_focus_in_view(make: Any, open_page: Any) -> None:
    """Graphs without records (stale inputs, a cycle, a self-loop, a missing version)."""
    from playwright.sync_api import expect

    graph = make()
    page = open_page(render_html(graph))
    page.screenshot("01-open")
    focus = page.page.locator(".node.focus")
    expect(focus).to_have_count(1)
    assert page.in_view(focus)
    assert page.overlapping_nodes() == []
    if any(edge.stale for edge in graph.edges):
        expect(page.page.locator("path.edge.stale")).not_to_have_count(0)


def test_a_large_graph_opens_with_the_focus_in_view(open_page: Any) -> None:
    from playwright.sync_api import expect

    graph = synthetic_graph(50, 200)
    page = open_page(render_html(graph))
    p = page.page
    page.screenshot("01-open")
    expect(p.locator(".node")).to_have_count(51)
    focus = p.locator(".node.focus")
    assert page.in_view(focus)
    expect(focus.locator(".title")).to_have_text("report")
    expect(p.locator(".node").filter(has_text="200 partitions")).to_have_count(50)
    assert page.overlapping_nodes() == []
    # The focus's upstream asset is one click away and lists its 200 partitions.
    p.locator("#panel").get_by_role("button", name="layer04/asset_049").click()
    assert page.in_view(page.node("layer04/asset_049"))
    p.locator("#panel details.parts-list summary").click()
    expect(p.locator("#panel .parts-list tbody tr")).to_have_count(200)
    page.screenshot("02-upstream")
    timings = p.evaluate("window.lineagePage.timings")
    print(
        f"50 assets x 200 partitions: page script {timings['total']:.0f} ms "
        f"(layout {timings['layout']:.0f} ms)"
    )


def test_the_demos_own_page_as_a_person_sees_it(
    browser: Any, artifacts: Path, replay_demo: Path
) -> None:
    """The page `./dev demo` writes, from lineage the Spark IO manager recorded in real
    Dagster runs (not a graph built for the test): the forecast in view, partitions grouped,
    a column of the forecast traced to its upstream columns across assets. The demo is the
    test session's own (`replay_demo`, which the replay tests copy): its page is only read."""
    from playwright.sync_api import expect

    page = Page(browser, (replay_demo / "lineage.html").read_text(encoding="utf-8"), artifacts)
    p = page.page
    page.screenshot("01-open")
    focus = p.locator(".node.focus")
    expect(focus.locator(".title")).to_have_text("yellow_rides_hourly_forecast")
    assert page.in_view(focus)
    # One node per asset: 15 weather days and 2 taxi months, each one node saying so.
    expect(page.node("weather_raw")).to_contain_text("15 partitions")
    expect(page.node("yellow_taxi_raw")).to_contain_text("2 partitions")
    assert p.locator(".node").count() <= 12
    assert page.overlapping_nodes() == []
    # The forecast's `forecast` column: computed from the training data's columns, which
    # come from the hourly actuals and the weather (`use_weather`).
    focus.locator(".cols-btn").click()
    focus.locator('.col[data-col="forecast"]').click()
    selected = focus.locator(".col.sel")
    expect(selected).to_have_attribute("data-col", "forecast")
    # The name stays readable beside a long derivation (which gives way, cut short).
    name = selected.locator(".name")
    assert name.evaluate("e => e.scrollWidth <= e.clientWidth") and name.inner_text() == "forecast"
    training = page.node("training_data")
    assert "on-path" in (training.get_attribute("class") or "")
    upstream = training.locator(".col.up")
    expect(upstream.first).to_be_visible()
    assert page.style(upstream.first, "backgroundColor") == UP_BACKGROUND
    assert p.locator(".node.on-path").count() >= 4  # back through actuals and weather
    page.screenshot("02-forecast-column-upstream")
    page.close()
