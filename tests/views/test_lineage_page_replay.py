"""A replayed snapshot's verdicts in the lineage page's data: drawn on the very versions the
replay judged, compact for nodes of many partitions, the rest of the replay summed up and
listed rather than dropped, hostile text kept as data. What a person sees in a browser:
tests/e2e/test_lineage_page.py (test_replay_verdicts_as_a_person_sees_them)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from dws_dagster.views.graph import build_graph
from dws_dagster.views.graph_model import GraphEdge, GraphNode, LineageGraph
from dws_dagster.views.page import verdicts as page_replay
from dws_dagster.views.page.content import page_data
from dws_dagster.views.page.document import render_page
from dws_dagster.views.page.verdicts import VERDICTS
from dws_dagster.views.report import render_json
from dws_dagster.workspace.definition import Workspace
from tests.views.lineage_page_graphs import (
    FAILED_DAY,
    FORECAST_DIFFERS,
    FORECAST_REF,
    MONTHS,
    NOT_REPLAYABLE_DETAIL,
    OUTSIDE_REF,
    REPLAY_FAILED_DETAIL,
    REPLAY_INTO,
    WEATHER_DAYS,
    forecast_lineage,
    replay_document,
    replayed_forecast,
    synthetic_graph,
    verdict,
    version_of,
)
from tests.views.test_lineage_page import HOSTILE, _Tags, by_name, embedded, hostile_graph, roles


def without_replay(data: Any) -> Any:
    """`data` with every key the replay adds taken out."""
    data = orjson.loads(orjson.dumps(data))
    data.pop("replay")
    for group in data["groups"]:
        group.pop("replay")
    return data


# --------------------------------------------------------------------------- matching


def test_each_node_carries_the_verdicts_of_its_versions(ws: Workspace) -> None:
    graph = replayed_forecast(ws)
    data = page_data(graph)
    groups = by_name(data)

    forecast = groups["forecast"]["replay"]
    assert forecast["verdict"] == "differs" and forecast["counts"] == {"differs": 1}
    assert forecast["judged"] == 1 and forecast["marks"] == str(VERDICTS.index("differs"))
    assert forecast["entries"] == [
        {
            "member": 0,
            "verdict": "differs",
            "step": "forecast",
            "recorded": version_of(FORECAST_REF, "run-forecast-2"),
            "reproduced": version_of(FORECAST_REF, "replayed"),
            "detail": FORECAST_DIFFERS,
            "columns": ["forecast"],
        }
    ]
    assert groups["training_data"]["replay"]["counts"] == {"reproduced": 1}
    dashboard = groups["results/dashboard"]["replay"]
    assert dashboard["verdict"] == "not replayable"
    assert dashboard["entries"][0]["detail"] == NOT_REPLAYABLE_DETAIL
    assert dashboard["entries"][0]["reproduced"] is None
    # Source data is not replayed: its nodes carry no verdict (but say the page has a replay).
    assert groups["src/weather/"]["replay"] is None and groups["src/trips/"]["replay"] is None

    # A node of partitions: counts per verdict, and each partition's verdict in parts order.
    weather = groups["weather_raw"]
    replay = weather["replay"]
    assert replay["counts"] == {"reproduced": len(WEATHER_DAYS) - 1, "failed": 1}
    assert replay["verdict"] == "failed" and replay["judged"] == len(WEATHER_DAYS)
    marks = dict(zip(weather["parts"]["key"], replay["marks"], strict=True))
    assert marks[FAILED_DAY] == str(VERDICTS.index("failed"))
    assert {m for day, m in marks.items() if day != FAILED_DAY} == {"0"}
    failed = [e for e in replay["entries"] if e["verdict"] == "failed"]
    assert [weather["parts"]["key"][e["member"]] for e in failed] == [FAILED_DAY]
    assert failed[0]["detail"] == REPLAY_FAILED_DETAIL
    rides = groups["rides_hourly"]["replay"]
    assert rides["counts"] == {"reproduced": 1, "non-deterministic": 1}
    month = next(e for e in rides["entries"] if e["verdict"] == "non-deterministic")
    assert groups["rides_hourly"]["parts"]["key"][month["member"]] == MONTHS[-1]
    assert month["columns"] == ["rides"]


def test_the_summary_counts_every_ref_and_lists_those_no_node_shows(ws: Workspace) -> None:
    graph = replayed_forecast(ws)
    assert graph.replay is not None
    summary = page_data(graph)["replay"]
    assert summary["snapshot"] == graph.replay["snapshot"]
    assert (summary["snapshot_name"], summary["tags"]) == ("v1", ["v1"])
    assert summary["replayed_at"] == "2026-11-25T01:50:00+00:00"
    assert (summary["into"], summary["in_place"], summary["reproduced"]) == (
        REPLAY_INTO,
        False,
        False,
    )
    refs = len(WEATHER_DAYS) + len(MONTHS) + 4
    assert summary["refs"] == refs and summary["drawn"] == refs - 1
    assert summary["counts"] == {
        "reproduced": refs - 4,
        "differs": 1,
        "non-deterministic": 1,
        "failed": 1,
        "not replayable": 1,
    }
    assert summary["verdicts"] == list(VERDICTS)
    # The ref the forecast's lineage does not reach is counted and listed, not dropped.
    assert summary["outside_count"] == 1 and summary["outside_counts"] == {"reproduced": 1}
    assert [(e["ref"], e["in_graph"], e["verdict"]) for e in summary["outside"]] == [
        (OUTSIDE_REF, False, "reproduced")
    ]


def test_a_verdict_is_drawn_only_on_the_version_it_judged() -> None:
    old = GraphNode(id="inter/a@1", ref="inter/a", version="1", step="a", current=False)
    new = GraphNode(id="inter/a@2", ref="inter/a", version="2", step="a")
    x = GraphNode(id="inter/x@1", ref="inter/x", version="1", step="x")
    y = GraphNode(id="results/y@1", ref="results/y", version="1", step="y")
    graph = LineageGraph(
        focus=y.id,
        nodes={n.id: n for n in (old, new, x, y)},
        edges=[GraphEdge(old.id, x.id, stale=True), GraphEdge(new.id, y.id), GraphEdge(x.id, y.id)],
    )
    graph.replay = replay_document(
        verdict("inter/a", "a", "differs", "1", "7", None, ["n"]),
        # The snapshot recorded another version of x than the one drawn: not x's verdict.
        verdict("inter/x", "x", "reproduced", "9", "9"),
        verdict("results/y", "y", "reproduced", "1", "1"),
        # The same version judged twice: the second is listed, not lost.
        verdict("results/y", "y", "failed", "1", None, "again"),
        verdict("results/far", "far", "failed", "3", None, "boom"),
    )
    data = page_data(graph)
    groups = by_name(data)
    a = groups["inter/a"]
    assert a["parts"]["version"] == ["1", "2"]
    assert a["replay"]["marks"] == str(VERDICTS.index("differs")) + "-"
    assert a["replay"]["judged"] == 1 and [e["member"] for e in a["replay"]["entries"]] == [0]
    assert groups["inter/x"]["replay"] is None
    assert groups["results/y"]["replay"]["counts"] == {"reproduced": 1}
    summary = data["replay"]
    assert summary["refs"] == 5 and summary["drawn"] == 2 and summary["outside_count"] == 3
    # Worst first, each saying whether its ref is drawn at another version.
    assert [(e["ref"], e["verdict"], e["in_graph"]) for e in summary["outside"]] == [
        ("results/far", "failed", False),
        ("results/y", "failed", True),
        ("inter/x", "reproduced", True),
    ]
    assert summary["outside_counts"] == {"reproduced": 1, "failed": 2}


def test_many_partitions_list_only_the_verdicts_marks_cannot_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = synthetic_graph(2, 300)
    data = page_data(graph)
    asset = next(g for g in data["groups"] if g["members"] == 300)
    refs = [f"{asset['ref']}/{key}" for key in asset["parts"]["key"]]
    versions = asset["parts"]["version"]
    odd = {7: "differs", 150: "non-deterministic", 299: "failed"}
    graph.replay = replay_document(
        *(
            verdict(ref, "s", odd[i], v, None, f"why {i}")
            if i in odd
            else verdict(ref, "s", "reproduced", v, v)
            for i, (ref, v) in enumerate(zip(refs, versions, strict=True))
        )
    )
    replay = by_name(page_data(graph))[asset["name"]]["replay"]
    assert replay["judged"] == 300 and len(replay["marks"]) == 300
    assert replay["counts"] == {
        "reproduced": 297,
        "differs": 1,
        "non-deterministic": 1,
        "failed": 1,
    }
    # A plain "reproduced" is its mark; only the others are spelled out.
    assert [(e["member"], e["verdict"], e["detail"]) for e in replay["entries"]] == [
        (i, odd[i], f"why {i}") for i in sorted(odd)
    ]
    assert {replay["marks"][i] for i in range(300) if i not in odd} == {"0"}
    assert replay["entries_more"] == 0
    monkeypatch.setattr(page_replay, "ENTRIES_SHOWN", 2)
    capped = by_name(page_data(graph))[asset["name"]]["replay"]
    assert len(capped["entries"]) == 2 and capped["entries_more"] == 1


def test_a_page_without_a_replay_is_unchanged(ws: Workspace) -> None:
    graph = build_graph(ws.store, forecast_lineage(ws), roles(ws))
    data = page_data(graph)
    assert "replay" not in data
    assert all("replay" not in group for group in data["groups"])
    assert "replay" in render_json(graph) and render_json(graph)["replay"] is None


def test_a_replay_only_adds_keys(ws: Workspace) -> None:
    graph = replayed_forecast(ws)
    replayed = page_data(graph)
    graph.replay = None
    assert without_replay(replayed) == orjson.loads(orjson.dumps(page_data(graph)))


def test_json_report_carries_the_replay_document(ws: Workspace) -> None:
    graph = replayed_forecast(ws)
    data = render_json(graph)
    assert data["replay"] == graph.replay
    plain = render_json(build_graph(ws.store, FORECAST_REF, roles(ws)))
    assert set(data) == set(plain)
    assert orjson.loads(orjson.dumps(data)) == data


# --------------------------------------------------------------------------- hostile values


def test_hostile_verdicts_cannot_end_the_data_element_and_read_back_exactly() -> None:
    graph = hostile_graph()
    graph.replay = {
        **replay_document(
            verdict("inter/out", HOSTILE[0], "differs", "2", "3", HOSTILE[0], list(HOSTILE)),
            verdict("raw/in", HOSTILE[1], "failed", "1", None, HOSTILE[2]),
            verdict("raw/elsewhere", HOSTILE[4], "not replayable", "1", None, HOSTILE[5]),
        ),
        "snapshot_name": HOSTILE[1],
        "into": HOSTILE[3],
        "tags": [HOSTILE[0], 7],
    }
    page = render_page(graph)
    lowered = page.lower()
    assert lowered.count("<script") == 3 and lowered.count("</script") == 3
    assert "<!--" not in page and "\u2028" not in page and "\u2029" not in page
    data = embedded(page)
    assert data == orjson.loads(orjson.dumps(page_data(graph)))
    entry = data["groups"][data["focus"]["group"]]["replay"]["entries"][0]
    assert entry["detail"] == HOSTILE[0] and entry["columns"] == list(HOSTILE)
    assert by_name(data)["raw/in"]["replay"]["entries"][0]["detail"] == HOSTILE[2]
    summary = data["replay"]
    assert (summary["snapshot_name"], summary["into"]) == (HOSTILE[1], HOSTILE[3])
    assert summary["tags"] == [HOSTILE[0]]  # tags are not in the checked schema: names only
    assert summary["outside"][0]["detail"] == HOSTILE[5]
    tags = _Tags()
    tags.feed(page)
    assert tags.tags.count("script") == 3 and "b" not in tags.tags


def test_a_credential_in_a_failed_steps_error_is_not_shown() -> None:
    graph = hostile_graph()
    error = "OperationalError: could not connect to postgresql://dws:s3cretpw@db:5432/lineage"
    graph.replay = replay_document(verdict("inter/out", "out", "failed", "2", None, error))
    page = render_page(graph)
    assert "s3cretpw" not in page
    data = embedded(page)
    detail = data["groups"][data["focus"]["group"]]["replay"]["entries"][0]["detail"]
    assert detail.startswith("OperationalError: could not connect to postgresql://")
