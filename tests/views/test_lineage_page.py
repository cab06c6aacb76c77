"""The HTML lineage page's data (grouping, focus, details, history, column lineage) and its
escaping, from lineage recorded through the real store (`tests/views/lineage_page_graphs.py`) and
from graphs built by hand. What a person sees in a browser: tests/e2e/test_lineage_page.py."""

from __future__ import annotations

import re
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest

from dws_dagster.errors import PageAssetError
from dws_dagster.snapshots.index import snapshot_manifest
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.views.diagrams import render_html
from dws_dagster.views.graph import SnapshotView, build_graph
from dws_dagster.views.graph_model import GraphEdge, GraphNode, LastRun, LineageGraph
from dws_dagster.views.page import document as lineage_page
from dws_dagster.views.page.content import page_data
from dws_dagster.views.page.document import render_page, script_json
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import COLUMN_LINEAGE_KEY, LineageRecord, StepInfo
from tests.conftest import run_python
from tests.views.lineage_page_graphs import (
    EARLIER_METRICS,
    FAILED_DAY,
    FORECAST_METRICS,
    FORECAST_PARAMETERS,
    FORECAST_REF,
    WEATHER_DAYS,
    forecast_lineage,
    source,
    synthetic_graph,
    version_of,
)
from tests.views.test_render import cycle, diamond, tricky

ROOT = Path(__file__).resolve().parents[2]


def roles(ws: Workspace) -> dict[str, str]:
    return {name: res.role for name, res in ws.resources.items()}


@pytest.fixture
def forecast_graph(ws: Workspace) -> LineageGraph:
    return build_graph(ws.store, forecast_lineage(ws), roles(ws))


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {group["name"]: group for group in data["groups"]}


def embedded(page: str) -> Any:
    """The JSON the page embeds, read back as the page's script reads it."""
    match = re.search(
        r'<script type="application/json" id="lineage-data">(.*?)</script>', page, re.DOTALL
    )
    assert match is not None
    return orjson.loads(match.group(1))


# --------------------------------------------------------------------------- grouping


def test_partitions_and_files_are_grouped_into_one_node_each(forecast_graph: LineageGraph) -> None:
    data = page_data(forecast_graph)
    groups = by_name(data)
    assert set(groups) == {
        "src/weather/",
        "src/trips/",
        "weather_raw",
        "rides_hourly",
        "training_data",
        "forecast",
        "results/dashboard",
    }
    assert len(forecast_graph.nodes) > 2 * len(WEATHER_DAYS)  # 62 days, each a node
    weather = groups["weather_raw"]
    assert weather["kind"] == "asset" and weather["partitioned"]
    assert weather["ref"] == "inter/weather_raw"
    assert weather["count"] == weather["members"] == len(WEATHER_DAYS)
    assert weather["range"] == [WEATHER_DAYS[0], WEATHER_DAYS[-1]]
    # The failed later run of one day shows in the status at a glance.
    assert weather["counts"] == {"ok": len(WEATHER_DAYS) - 1, "failed": 1}
    assert weather["status"] == "failed"
    parts = weather["parts"]
    assert parts["key"] == WEATHER_DAYS
    failed = data["statuses"].index("failed")
    assert [k for k, s in zip(parts["key"], parts["status"], strict=True) if int(s) == failed] == [
        FAILED_DAY
    ]
    assert "ref" not in parts  # the keys say it all: refs are the group's ref + the key
    files = groups["src/weather/"]
    assert files["kind"] == "files" and files["count"] == len(WEATHER_DAYS)
    assert files["counts"] == {"source": len(WEATHER_DAYS)}
    assert groups["rides_hourly"]["count"] == 2
    assert groups["results/dashboard"]["kind"] == "step"
    assert groups["results/dashboard"]["step"] == "publish"
    # Edges between nodes, each standing for the inputs it bundles.
    index = {g["name"]: g["id"] for g in data["groups"]}
    edges = {(s, t): (n, stale) for s, t, n, stale in data["edges"]}
    assert edges[(index["src/weather/"], index["weather_raw"])] == (62, 0)
    assert edges[(index["weather_raw"], index["training_data"])] == (62, 0)
    assert edges[(index["training_data"], index["forecast"])] == (1, 0)
    assert edges[(index["forecast"], index["results/dashboard"])] == (1, 0)
    assert len(data["edges"]) == 6


def test_the_focus_is_the_node_of_the_ref_the_page_is_about(forecast_graph: LineageGraph) -> None:
    data = page_data(forecast_graph)
    focus = data["groups"][data["focus"]["group"]]
    assert focus["name"] == "forecast" and focus["focus"]
    assert [g["name"] for g in data["groups"] if g["focus"]] == ["forecast"]
    assert data["focus"]["id"] == forecast_graph.focus
    assert data["focus"]["ref"] == FORECAST_REF
    assert data["title"] == f"Lineage of {FORECAST_REF}"
    assert (
        focus["parts"]["version"][data["focus"]["member"]]
        == forecast_graph.nodes[forecast_graph.focus].version
    )


def test_details_and_last_run_show_parameters_metrics_and_code(
    forecast_graph: LineageGraph,
) -> None:
    groups = by_name(page_data(forecast_graph))
    forecast = groups["forecast"]
    details = forecast["details"]
    assert details["version"] == version_of(FORECAST_REF, "run-forecast-2")
    assert details["parameters"] == FORECAST_PARAMETERS
    assert details["metrics"] == FORECAST_METRICS
    assert details["code_versions"] == {"2": 1}
    assert details["role"] == "results" and details["rows"] == 2016
    run = forecast["last_run"]
    assert run["parameters"] == FORECAST_PARAMETERS and run["metrics"] == FORECAST_METRICS
    assert run["run_id"] == "run-forecast-2" and run["status"] == "ok"
    assert run["duration_seconds"] == pytest.approx(3.5)
    # A partitioned asset: what every partition shares, and what varies by partition.
    weather = groups["weather_raw"]
    assert weather["details"]["parameters"] == {}
    assert weather["details"]["varying"] == ["dagster/partition"]
    assert weather["details"]["rows"] == 24 * len(WEATHER_DAYS)
    # Its last run is the failed attempt, with its error and parameters.
    run = weather["last_run"]
    assert run["status"] == "failed" and run["partition"] == FAILED_DAY
    assert run["error"] == "ValueError: station KJFK sent no rows"
    assert run["parameters"] == {"dagster/partition": FAILED_DAY}


def test_history_lists_versions_or_the_runs_of_partitions(forecast_graph: LineageGraph) -> None:
    groups = by_name(page_data(forecast_graph))
    history = groups["forecast"]["history"]
    assert [entry["run_id"] for entry in history] == ["run-forecast-2", "run-forecast-1"]
    assert [entry["current"] for entry in history] == [True, False]
    assert [entry["parameters"]["use_weather"] for entry in history] == [True, False]
    assert [entry["metrics"] for entry in history] == [FORECAST_METRICS, EARLIER_METRICS]
    runs = groups["weather_raw"]["history"]
    assert runs[0] == {
        "run_id": "run-weather-retry",
        "status": "failed",
        "count": 1,
        "first": FAILED_DAY,
        "last": FAILED_DAY,
        "end_time": runs[0]["end_time"],
        "start_time": runs[0]["start_time"],
    }
    assert sorted((r["run_id"], r["count"]) for r in runs[1:]) == [
        ("run-weather-2024-01", 31),
        ("run-weather-2024-02", 29),
        ("run-weather-2024-03", 2),
    ]


def test_column_lineage_edges_across_nodes(forecast_graph: LineageGraph) -> None:
    data = page_data(forecast_graph)
    name = {g["id"]: g["name"] for g in data["groups"]}
    edges = {
        (name[s], sc, name[t], tc, kind, subtype)
        for s, sc, t, tc, kind, subtype in data["column_edges"]
    }
    assert len(edges) == len(data["column_edges"])  # each once, however many partitions
    assert (
        "training_data",
        "rides_week_before",
        "forecast",
        "forecast",
        "direct",
        "transformation",
    ) in edges
    assert (
        "training_data",
        "precip_mm",
        "forecast",
        "forecast",
        "direct",
        "transformation",
    ) in edges
    # 62 partitions read, one edge.
    assert (
        "weather_raw",
        "precip_mm",
        "training_data",
        "precip_mm",
        "direct",
        "aggregation",
    ) in edges
    assert (
        "src/weather/",
        "precip_in",
        "weather_raw",
        "precip_mm",
        "direct",
        "transformation",
    ) in edges
    # Whole-table lineage (a join, a filter) goes to the node, not to a column.
    assert ("weather_raw", "date", "training_data", None, "indirect", "join") in edges
    assert ("src/trips/", "trip_distance", "rides_hourly", None, "indirect", "filter") in edges
    assert (
        "forecast",
        "forecast",
        "results/dashboard",
        "error",
        "direct",
        "transformation",
    ) in edges
    groups = by_name(data)
    assert groups["forecast"]["columns"] == ["actual", "forecast", "hour", "zone"]
    # Sources no step wrote get their columns from what read them.
    assert groups["src/weather/"]["columns"] == ["date", "precip_in", "station", "temp_f"]
    assert groups["training_data"]["columns"] == [
        "hour",
        "precip_mm",
        "rides",
        "rides_week_before",
        "zone",
    ]


def test_column_sources_outside_the_graph_are_listed_not_dropped() -> None:
    out = GraphNode(id="inter/out@1", ref="inter/out", version="1", step="s")
    record = {
        "ref": "inter/out",
        "version": "1",
        "step": {"name": "s", "kind": "script"},
        "extra": {
            COLUMN_LINEAGE_KEY: {
                "columns": {
                    "a": [
                        source("inter/elsewhere", "x"),
                        {"location": "s3a://bucket/raw", "column": "y", "kind": "DIRECT"},
                        "not a source",
                        {"column": 3},
                    ]
                },
                "dataset": "not a list",
            }
        },
    }
    data = page_data(LineageGraph(focus=out.id, nodes={out.id: out}, records={out.id: record}))
    (group,) = data["groups"]
    assert group["columns"] == ["a"] and data["column_edges"] == []
    assert group["external_columns"] == [
        ["inter/elsewhere", "x", "a", "direct", "identity"],
        ["s3a://bucket/raw", "y", "a", "direct", None],
    ]


def test_versions_of_one_ref_are_one_node_with_the_stale_one_marked() -> None:
    old = GraphNode(id="raw/a@1", ref="raw/a", version="1", status="source", current=False)
    new = GraphNode(id="raw/a@2", ref="raw/a", version="2", status="source")
    x = GraphNode(id="inter/x@1", ref="inter/x", version="1", step="x")
    y = GraphNode(id="inter/y@1", ref="inter/y", version="1", step="y")
    graph = LineageGraph(
        focus=y.id,
        nodes={n.id: n for n in (old, new, x, y)},
        edges=[GraphEdge(old.id, x.id, stale=True), GraphEdge(new.id, y.id)],
    )
    groups = by_name(page_data(graph))
    raw = groups["raw/a"]
    assert raw["count"] == 2 and not raw["partitioned"]
    assert raw["counts"] == {"stale": 1, "source": 1}
    data = page_data(graph)
    stale = {
        (data["groups"][s]["name"], data["groups"][t]["name"]): n_stale
        for s, t, _, n_stale in data["edges"]
    }
    assert stale == {("raw/a", "inter/x"): 1, ("raw/a", "inter/y"): 0}


@pytest.mark.parametrize("make", [diamond, cycle, tricky])
def test_graphs_built_by_hand_place_every_node_once(make: Any) -> None:
    graph = make()
    data = page_data(graph)
    ids = {
        f"{g['ref']}/{k}" if g["count"] > 1 else g["ref"]
        for g in data["groups"]
        for k in g["parts"]["key"]
    }
    members = sum(g["members"] for g in data["groups"])
    ends = {end for e in graph.edges for end in (e.source, e.target)}
    assert members == len(set(graph.nodes) | ends | {graph.focus})
    assert len(ids) <= members
    assert data["groups"][data["focus"]["group"]]["focus"]
    assert data["truncated"] is False


def test_a_truncated_graph_says_so(ws: Workspace) -> None:
    forecast_lineage(ws)
    graph = build_graph(ws.store, FORECAST_REF, roles(ws), max_nodes=10)
    assert graph.truncated and page_data(graph)["truncated"] is True
    assert not build_graph(ws.store, FORECAST_REF, roles(ws)).truncated


# --------------------------------------------------------------------------- history source


def test_store_ref_history_is_newest_first_and_bounded(ws: Workspace) -> None:
    forecast_lineage(ws)
    found = ws.store.ref_history(
        [FORECAST_REF, "inter/weather_raw/" + FAILED_DAY, "src/nothing"], 5
    )
    assert [r["step"]["run_id"] for r in found[FORECAST_REF]] == [
        "run-forecast-2",
        "run-forecast-1",
    ]
    assert [r["status"] for r in found["inter/weather_raw/" + FAILED_DAY]] == ["failed", "ok"]
    assert found["src/nothing"] == []
    assert len(ws.store.ref_history([FORECAST_REF], 1)[FORECAST_REF]) == 1


def test_snapshot_history_stops_at_the_snapshot(ws: Workspace) -> None:
    forecast_lineage(ws)
    info = take_snapshot(ws, "v1").info
    record = ws.store.get(FORECAST_REF).record
    assert record is not None
    later = LineageRecord.from_json(
        {
            **record,
            "version": version_of("later"),
            "start_time": "2030-01-01T00:00:00+00:00",
            "end_time": "2030-01-01T00:00:01+00:00",
            "step": {**record["step"], "run_id": "run-later"},
        }
    )
    ws.store.commit([later])
    view = SnapshotView(snapshot_manifest(ws, info.hash), ws.store)
    assert [r["step"]["run_id"] for r in view.ref_history([FORECAST_REF], 5)[FORECAST_REF]] == [
        "run-forecast-2",
        "run-forecast-1",
    ]
    assert ws.store.ref_history([FORECAST_REF], 5)[FORECAST_REF][0]["step"]["run_id"] == "run-later"


# --------------------------------------------------------------------------- escaping


HOSTILE = [
    "</script><script>alert(1)</script>",
    "</SCRIPT >",
    "<!-- <script>",
    "a\u2028b\u2029c",
    "\"quoted\" & 'single' <b>bold</b>",
    "]]></style></svg>",
]


def hostile_graph() -> LineageGraph:
    """Everything a record can carry, full of text that would end the page's elements."""
    up = GraphNode(id="raw/in@1", ref="raw/in", version="1", status="source")
    node = GraphNode(id="inter/out@2", ref="inter/out", version="2", step=HOSTILE[0])
    columns = {text: [source("raw/in", text, text)] for text in HOSTILE}
    record = {
        "ref": "inter/out",
        "version": "2",
        "status": "ok",
        "step": {
            "name": HOSTILE[0],
            "kind": "dagster-asset",
            "run_id": HOSTILE[1],
            "partition": HOSTILE[2],
            "code_version": HOSTILE[3],
        },
        "parameters": {text: text for text in HOSTILE},
        "metrics": dict.fromkeys(HOSTILE, HOSTILE),
        "error": HOSTILE[0],
        "start_time": HOSTILE[4],
        "end_time": HOSTILE[5],
        "extra": {"format": HOSTILE[1], COLUMN_LINEAGE_KEY: {"columns": columns}},
    }
    return LineageGraph(
        focus=node.id,
        nodes={up.id: up, node.id: node},
        edges=[GraphEdge(up.id, node.id)],
        records={node.id: record},
        attempts={"inter/out": {**record, "status": "failed"}},
        snapshot=HOSTILE[0],
        last_run=LastRun(
            step=HOSTILE[0],
            status="failed",
            run_id=HOSTILE[1],
            start_time=None,
            end_time=None,
            duration_seconds=None,
            error=HOSTILE[0],
        ),
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


def test_hostile_values_cannot_end_the_data_element_and_read_back_exactly() -> None:
    graph = hostile_graph()
    page = render_page(graph)
    lowered = page.lower()
    # Exactly the page's own three scripts: the data, dagre and the page's code.
    assert lowered.count("<script") == 3 and lowered.count("</script") == 3
    assert "<!--" not in page and "\u2028" not in page and "\u2029" not in page
    assert embedded(page) == orjson.loads(orjson.dumps(page_data(graph)))
    data = embedded(page)
    group = data["groups"][data["focus"]["group"]]
    assert group["details"]["parameters"] == {text: text for text in HOSTILE}
    assert set(group["columns"]) == set(HOSTILE)
    tags = _Tags()
    tags.feed(page)
    assert tags.tags.count("script") == 3 and "b" not in tags.tags
    assert tags.title == "Lineage of inter/out"


def test_script_json_escapes_every_character_that_could_close_or_comment() -> None:
    for text in [*HOSTILE, "&lt;", "\\u003c", "<\\/script>"]:
        encoded = script_json({"k": text})
        assert "<" not in encoded and ">" not in encoded and "&" not in encoded
        assert orjson.loads(encoded) == {"k": text}


def test_page_is_self_contained(forecast_graph: LineageGraph) -> None:
    page = render_html(forecast_graph)
    lowered = page.lower()
    assert page.startswith("<!DOCTYPE html>")
    for banned in ("https://", "<link", "@import", " src=", " href=", "url(http", "//fonts"):
        assert banned not in lowered, banned
    # The browser is told to fetch nothing at all.
    assert "default-src 'none'" in page
    assert "Copyright (c) 2012-2014 Chris Pettitt" in page  # dagre's licence, kept
    assert "<svg" in page  # the edges' layer (the CLI and demo tests look for it)
    assert embedded(page)["focus"]["ref"] == FORECAST_REF


def test_vendored_dagre_and_page_assets_are_packaged() -> None:
    package = Path(lineage_page.__file__).parent
    dagre = (package / "_vendor" / "dagre.min.js").read_text(encoding="utf-8")
    assert "@dagrejs/dagre 3.1.3" in dagre and "var dagre=" in dagre and "layout:" in dagre
    assert "sourceMappingURL" not in dagre
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["dws_dagster.views.page"]
    needed = {
        "assets/lineage_page.js",
        "assets/lineage_page.css",
        "_vendor/dagre.min.js",
        "_vendor/dagre.LICENSE",
    }
    for name in needed:
        assert (package / name).is_file()
        assert any(Path(name).match(pattern) for pattern in patterns), name


def test_an_asset_that_could_close_its_element_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "page_assets"
    folder.mkdir()
    (folder / "bad.js").write_text("var a = '</script>';")
    monkeypatch.setattr(lineage_page.resources, "files", lambda _package: tmp_path)
    lineage_page._asset.cache_clear()
    try:
        with pytest.raises(PageAssetError, match="bad.js"):
            lineage_page._asset("page_assets", "bad.js", "script")
        with pytest.raises(PageAssetError, match="missing.js.*reinstall"):
            lineage_page._asset("page_assets", "missing.js", "script")
    finally:
        lineage_page._asset.cache_clear()


# --------------------------------------------------------------------------- scale


def test_a_large_graph_stays_one_node_per_asset() -> None:
    graph = synthetic_graph(30, 100)
    data = page_data(graph)
    assert len(data["groups"]) == 31  # 30 assets and the report
    assert sorted({g["count"] for g in data["groups"]}) == [1, 100]
    assert all(len(g["parts"]["key"]) == g["members"] for g in data["groups"])
    # Partitions of an asset share their column lineage: one edge per column pair.
    pairs = {(s, sc, t, tc) for s, sc, t, tc, _, _ in data["column_edges"]}
    assert len(pairs) == len(data["column_edges"])
    assert len(data["column_edges"]) < 30 * 8 * 2 + 1


def test_records_of_other_shapes_do_not_break_the_page() -> None:
    node = GraphNode(id="inter/x@1", ref="inter/x", version="1", step="x")
    for record in [
        {},
        {"step": "not a dict"},
        {"extra": [1, 2]},
        {"extra": {COLUMN_LINEAGE_KEY: {"columns": {"a": "not a list"}}}},
        {"metrics": [1], "parameters": "p", "start_time": "x", "end_time": "y"},
    ]:
        graph = LineageGraph(focus=node.id, nodes={node.id: node}, records={node.id: record})
        data = embedded(render_page(graph))
        assert len(data["groups"]) == 1


def test_a_script_step_record_keeps_its_own_node(ws: Workspace) -> None:
    """Two outputs of one script step are two nodes (their columns are not one table)."""
    step = StepInfo(name="split")
    ws.store.commit(
        [
            LineageRecord(ref=ref, version=version_of(ref), step=step)
            for ref in ("inter/left", "inter/right")
        ]
    )
    groups = by_name(page_data(build_graph(ws.store, "inter/left", roles(ws))))
    assert set(groups) == {"inter/left"}
    graph = build_graph(ws.store, "inter/right", roles(ws))
    assert by_name(page_data(graph))["inter/right"]["kind"] == "step"


def test_a_graph_without_records_still_shows_the_focus_last_run() -> None:
    data = page_data(tricky())
    run = data["groups"][data["focus"]["group"]]["last_run"]
    assert run["status"] == "failed" and run["run_id"] == "r<1>"
    assert run["error"] == 'boom <b>"bad"</b> & more'
    assert page_data(cycle())["groups"][0]["last_run"] is None


def test_the_page_imports_neither_dagster_nor_pyspark(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from dws_dagster.views.diagrams import render_html\n"
        "from tests.views.test_render import diamond\n"
        "assert render_html(diamond()).startswith('<!DOCTYPE html>')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dagster', 'pyspark')))"
    )
    result = run_python(code, ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
