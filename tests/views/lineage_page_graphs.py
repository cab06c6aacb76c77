"""Lineage for the HTML page's tests and benchmark.

`forecast_lineage(ws)` records, through the workspace's lineage store, what the Spark IO
manager records for a small forecast pipeline (Dagster assets, daily and monthly partitions,
column lineage in the shape of its `dws/column_lineage` metadata under the records'
`extra.column_lineage`, two runs of the forecast, a failed partition) plus a script step
downstream; `replayed_forecast(ws)` is its snapshot's page with a replay of every verdict.
`synthetic_graph(assets, partitions)` builds a `LineageGraph` of any size in
memory, its records shaped the same way, for the scale check and `bench/lineage_page.py`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from collections.abc import Iterable
from typing import Any

from dws_dagster.replay.record import latest_replay, save_replay
from dws_dagster.snapshots.index import snapshot_manifest
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.views.graph import SnapshotView, build_graph
from dws_dagster.views.graph_model import GraphEdge, GraphNode, LastRun, LineageGraph
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import COLUMN_LINEAGE_KEY, LineageRecord, StepInfo

FORECAST_REF = "results/forecast"
WEATHER_DAYS = [(dt.date(2024, 1, 1) + dt.timedelta(days=i)).isoformat() for i in range(62)]
MONTHS = ["2024-01-01", "2024-02-01"]
FAILED_DAY = "2024-02-14"
FORECAST_PARAMETERS = {"use_weather": True, "horizon_days": 7, "model": "seasonal-naive"}
FORECAST_METRICS = {"mae": 0.7166, "rmse": 1.1668, "hours_scored": 2016}
EARLIER_METRICS = {"mae": 0.7421, "rmse": 1.2013, "hours_scored": 2016}
_START = dt.datetime(2024, 3, 3, 6, 0, tzinfo=dt.UTC)


def version_of(*parts: object) -> str:
    return hashlib.md5(":".join(map(str, parts)).encode()).hexdigest()


def source(
    ref: str, column: str, subtype: str = "IDENTITY", kind: str = "DIRECT", asset: str | None = None
) -> dict[str, Any]:
    """One column source as the IO manager describes it in dws/column_lineage."""
    item = {"ref": ref, "column": column, "kind": kind, "subtype": subtype}
    if asset is not None:
        item["asset"] = asset
    return item


class _Clock:
    def __init__(self) -> None:
        self.now = _START

    def span(self, seconds: float) -> tuple[str, str]:
        start = self.now
        self.now += dt.timedelta(seconds=seconds)
        return start.isoformat(timespec="microseconds"), self.now.isoformat(timespec="microseconds")


def _asset_record(
    clock: _Clock,
    ref: str,
    version: str,
    asset: str,
    run_id: str,
    inputs: Iterable[tuple[str, str]],
    columns: dict[str, list[dict[str, Any]]],
    *,
    partition: str | None = None,
    parameters: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    dataset: list[dict[str, Any]] = (),
    rows: int = 100,
    code_version: str = "1",
    seconds: float = 2.0,
) -> LineageRecord:
    start, end = clock.span(seconds)
    params = dict(parameters or {})
    if partition is not None:
        params["dagster/partition"] = partition
    inputs = tuple(sorted(inputs))
    return LineageRecord(
        ref=ref,
        version=version,
        step=StepInfo(
            name=asset,
            kind="dagster-asset",
            run_id=run_id,
            partition=partition,
            code_version=code_version,
        ),
        parameters=params,
        inputs=inputs,
        provenance={**dict(inputs), ref: version},
        start_time=start,
        end_time=end,
        metrics=metrics,
        extra={
            "format": "parquet",
            "rows": rows,
            COLUMN_LINEAGE_KEY: {"columns": columns, "dataset": list(dataset), "complete": True},
        },
    )


def forecast_lineage(ws: Workspace) -> str:
    """Record the pipeline's lineage in `ws` (resources `src`, `inter`, `results`); returns
    the forecast's ref, the page's focus.

        src/weather/<day>.csv ─▶ weather_raw (62 daily partitions) ─┐
        src/trips/<month>.csv ─▶ rides_hourly (2 monthly partitions) ┴▶ training_data
            ─▶ forecast (results, two runs) ─▶ dashboard (a script step)
    """
    store, clock = ws.store, _Clock()
    records: list[LineageRecord] = []
    weather: list[tuple[str, str]] = []
    for day in WEATHER_DAYS:
        ref, src = f"inter/weather_raw/{day}", f"src/weather/{day}.csv"
        version = version_of(ref, 1)
        records.append(
            _asset_record(
                clock,
                ref,
                version,
                "weather_raw",
                f"run-weather-{day[:7]}",
                [(src, version_of(src))],
                {
                    "date": [source(src, "date")],
                    "station": [source(src, "station")],
                    "precip_mm": [source(src, "precip_in", "TRANSFORMATION")],
                    "temp_c": [source(src, "temp_f", "TRANSFORMATION")],
                },
                partition=day,
                rows=24,
            )
        )
        weather.append((ref, version))
    rides: list[tuple[str, str]] = []
    for month in MONTHS:
        ref, src = f"inter/rides_hourly/{month[:7]}", f"src/trips/trips_{month[:7]}.csv"
        version = version_of(ref, 1)
        records.append(
            _asset_record(
                clock,
                ref,
                version,
                "rides_hourly",
                f"run-rides-{month[:7]}",
                [(src, version_of(src))],
                {
                    "zone": [source(src, "PULocationID")],
                    "hour": [source(src, "pickup_datetime", "TRANSFORMATION")],
                    "rides": [source(src, "pickup_datetime", "AGGREGATION")],
                },
                dataset=[source(src, "trip_distance", "FILTER", "INDIRECT")],
                partition=month,
                rows=744 * 3,
            )
        )
        rides.append((ref, version))
    training = ("inter/training_data", version_of("inter/training_data", 1))
    records.append(
        _asset_record(
            clock,
            *training,
            "training_data",
            "run-train-1",
            [*weather, *rides],
            {
                "zone": [source(r, "zone", asset="rides_hourly") for r, _ in rides],
                "hour": [source(r, "hour", asset="rides_hourly") for r, _ in rides],
                "rides": [source(r, "rides", asset="rides_hourly") for r, _ in rides],
                "rides_week_before": [
                    source(r, "rides", "WINDOW", asset="rides_hourly") for r, _ in rides
                ],
                "precip_mm": [
                    source(r, "precip_mm", "AGGREGATION", asset="weather_raw") for r, _ in weather
                ],
            },
            dataset=[
                source(r, "date", "JOIN", "INDIRECT", asset="weather_raw") for r, _ in weather
            ],
            rows=2016 * 3,
        )
    )
    store.commit(records)

    def forecast(run: str, use_weather: bool, metrics: dict[str, Any]) -> LineageRecord:
        columns = {
            "zone": [source(training[0], "zone", asset="training_data")],
            "hour": [source(training[0], "hour", asset="training_data")],
            "forecast": [
                source(training[0], "rides_week_before", "TRANSFORMATION", asset="training_data")
            ],
            "actual": [source(training[0], "rides", asset="training_data")],
        }
        if use_weather:
            columns["forecast"].append(
                source(training[0], "precip_mm", "TRANSFORMATION", asset="training_data")
            )
        return _asset_record(
            clock,
            FORECAST_REF,
            version_of(FORECAST_REF, run),
            "forecast",
            run,
            [training],
            columns,
            parameters={**FORECAST_PARAMETERS, "use_weather": use_weather},
            metrics=metrics,
            rows=2016,
            code_version="2",
            seconds=3.5,
        )

    store.commit([forecast("run-forecast-1", False, EARLIER_METRICS)])
    store.commit([forecast("run-forecast-2", True, FORECAST_METRICS)])

    dashboard = "results/dashboard"
    start, end = clock.span(1.0)
    store.commit(
        [
            LineageRecord(
                ref=dashboard,
                version=version_of(dashboard),
                step=StepInfo(name="publish"),
                parameters={"title": "Hourly rides"},
                inputs=((FORECAST_REF, version_of(FORECAST_REF, "run-forecast-2")),),
                start_time=start,
                end_time=end,
                extra={
                    COLUMN_LINEAGE_KEY: {
                        "columns": {
                            "zone": [source(FORECAST_REF, "zone")],
                            "error": [
                                source(FORECAST_REF, "forecast", "TRANSFORMATION"),
                                source(FORECAST_REF, "actual", "TRANSFORMATION"),
                            ],
                        }
                    }
                },
            )
        ]
    )

    # A later run of one day failed: its last good data stays, the attempt is recorded.
    ref = f"inter/weather_raw/{FAILED_DAY}"
    start, end = clock.span(1.0)
    store.fail(
        [
            LineageRecord(
                ref=ref,
                version=None,
                status="failed",
                step=StepInfo(
                    name="weather_raw",
                    kind="dagster-asset",
                    run_id="run-weather-retry",
                    partition=FAILED_DAY,
                    code_version="1",
                ),
                parameters={"dagster/partition": FAILED_DAY},
                inputs=((f"src/weather/{FAILED_DAY}.csv", version_of("late")),),
                start_time=start,
                end_time=end,
                error="ValueError: station KJFK sent no rows",
            )
        ]
    )
    return FORECAST_REF


def synthetic_graph(
    assets: int, partitions: int, *, columns: int = 8, seed: int = 0
) -> LineageGraph:
    """`assets` partitioned assets of `partitions` partitions each, in layers of about ten,
    each reading one to three assets of the layers before it partition by partition, and a
    final non-partitioned report (the focus) reading every partition of the last asset.
    Records carry parameters and column lineage (partitions of an asset share one column
    lineage object, which keeps memory low; the page still reads it once per partition)."""
    rng = random.Random(seed)
    nodes: dict[str, GraphNode] = {}
    edges: list[GraphEdge] = []
    records: dict[str, dict[str, Any]] = {}
    names = [f"layer{i // 10:02d}/asset_{i:03d}" for i in range(assets)]
    keys = [(dt.date(2021, 1, 1) + dt.timedelta(days=d)).isoformat() for d in range(partitions)]
    cols = [f"col_{c}" for c in range(columns)]
    base = _START
    for index, name in enumerate(names):
        layer = index // 10
        earlier = [i for i in range(index) if i // 10 < layer]
        reads = rng.sample(earlier, min(len(earlier), rng.randint(1, 3))) if earlier else []
        lineage = {
            "columns": {
                c: [
                    source(
                        f"inter/{names[r]}",
                        rng.choice(cols),
                        rng.choice(["IDENTITY", "TRANSFORMATION"]),
                    )
                    for r in reads[:2]
                ]
                for c in cols
            },
            "dataset": [],
        }
        extra = {"format": "parquet", "rows": 1000, COLUMN_LINEAGE_KEY: lineage}
        for p, key in enumerate(keys):
            ref = f"inter/{name}/{key}"
            version = version_of(ref)
            node_id = f"{ref}@{version}"
            end = (base + dt.timedelta(minutes=index * partitions + p)).isoformat()
            run_id = f"run-{index:03d}-{p // 100:03d}"
            nodes[node_id] = GraphNode(
                id=node_id, ref=ref, version=version, step=name, run_id=run_id, end_time=end
            )
            records[node_id] = {
                "ref": ref,
                "version": version,
                "status": "ok",
                "step": {
                    "name": name,
                    "kind": "dagster-asset",
                    "run_id": run_id,
                    "partition": key,
                    "code_version": "1",
                },
                "parameters": {"dagster/partition": key, "threshold": 0.5},
                "inputs": [],
                "start_time": end,
                "end_time": end,
                "extra": extra,
            }
            for r in reads:
                upstream = f"inter/{names[r]}/{key}"
                edges.append(GraphEdge(f"{upstream}@{version_of(upstream)}", node_id))
    report = "results/report"
    focus = f"{report}@{version_of(report)}"
    nodes[focus] = GraphNode(
        id=focus, ref=report, version=version_of(report), step="report", run_id="run-report"
    )
    last = names[-1]
    records[focus] = {
        "ref": report,
        "version": version_of(report),
        "status": "ok",
        "step": {"name": "report", "kind": "dagster-asset", "run_id": "run-report"},
        "parameters": {"window": 28},
        "metrics": {"mae": 1.25},
        "inputs": [],
        "extra": {
            COLUMN_LINEAGE_KEY: {
                "columns": {"total": [source(f"inter/{last}", "col_0", "AGGREGATION")]}
            }
        },
    }
    for key in keys:
        upstream = f"inter/{last}/{key}"
        edges.append(GraphEdge(f"{upstream}@{version_of(upstream)}", focus))
    return LineageGraph(
        focus=focus,
        nodes=nodes,
        edges=edges,
        records=records,
        last_run=LastRun(
            step="report",
            status="ok",
            run_id="run-report",
            start_time=None,
            end_time=None,
            duration_seconds=None,
        ),
    )


#: The scratch folder a replay of the forecast's snapshot says it wrote into.
REPLAY_INTO = ".dataworkspace/replays/v1-20261125T015000Z"
#: What the replay of the forecast's snapshot says of the refs it could not reproduce.
FORECAST_DIFFERS = "the same 2016 rows, different content"
NON_DETERMINISTIC_DETAIL = "two replays of the step on the same inputs wrote different data"
NOT_REPLAYABLE_DETAIL = "its git commit 0123456789ab is not in the repository"
REPLAY_FAILED_DETAIL = "ValueError: station KJFK sent no rows"
#: A ref the replay judged that the forecast's lineage does not reach.
OUTSIDE_REF = "results/summary"


def verdict(
    ref: str,
    step: str,
    outcome: str,
    recorded: str,
    reproduced: str | None = None,
    detail: str | None = None,
    columns: list[str] | None = None,
) -> dict[str, Any]:
    """One ref of a replay record (`replay_record.report_json`)."""
    return {
        "ref": ref,
        "step": step,
        "verdict": outcome,
        "recorded": recorded,
        "reproduced": reproduced,
        "detail": detail,
        "columns": columns,
    }


def forecast_replay(snapshot: str) -> dict[str, Any]:
    """A replay of the snapshot of `forecast_lineage` with a verdict of every kind: the
    forecast differs in its `forecast` column, one month of rides is non-deterministic, the
    weather of FAILED_DAY failed again, the dashboard (a script) is not replayable, the rest
    reproduced; plus one ref the forecast's lineage does not reach."""
    refs: list[dict[str, Any]] = []
    for day in WEATHER_DAYS:
        ref = f"inter/weather_raw/{day}"
        version = version_of(ref, 1)
        if day == FAILED_DAY:
            refs.append(
                verdict(ref, f"weather_raw[{day}]", "failed", version, None, REPLAY_FAILED_DETAIL)
            )
        else:
            refs.append(verdict(ref, f"weather_raw[{day}]", "reproduced", version, version))
    for month in MONTHS:
        ref = f"inter/rides_hourly/{month[:7]}"
        version = version_of(ref, 1)
        if month == MONTHS[-1]:
            refs.append(
                verdict(
                    ref,
                    f"rides_hourly[{month}]",
                    "non-deterministic",
                    version,
                    version_of(ref, "replayed"),
                    NON_DETERMINISTIC_DETAIL,
                    ["rides"],
                )
            )
        else:
            refs.append(verdict(ref, f"rides_hourly[{month}]", "reproduced", version, version))
    training = version_of("inter/training_data", 1)
    refs.append(verdict("inter/training_data", "training_data", "reproduced", training, training))
    refs.append(
        verdict(
            FORECAST_REF,
            "forecast",
            "differs",
            version_of(FORECAST_REF, "run-forecast-2"),
            version_of(FORECAST_REF, "replayed"),
            FORECAST_DIFFERS,
            ["forecast"],
        )
    )
    refs.append(
        verdict(
            "results/dashboard",
            "publish",
            "not replayable",
            version_of("results/dashboard"),
            None,
            NOT_REPLAYABLE_DETAIL,
        )
    )
    summary = version_of(OUTSIDE_REF)
    refs.append(verdict(OUTSIDE_REF, "summary", "reproduced", summary, summary))
    return replay_document(*refs, snapshot=snapshot, into=REPLAY_INTO)


def replay_document(
    *refs: dict[str, Any],
    snapshot: str = "0" * 32,
    into: str = "scratch",
    replayed_at: str = "2026-11-25T01:50:00+00:00",
) -> dict[str, Any]:
    """A replay record of snapshot `v1` judging `refs` (`replay_record.report_json`)."""
    return {
        "format": 1,
        "snapshot": snapshot,
        "snapshot_name": "v1",
        "tags": ["v1"],
        "replayed_at": replayed_at,
        "into": into,
        "in_place": False,
        "reproduced": all(r["verdict"] == "reproduced" for r in refs),
        "refs": list(refs),
    }


def replayed_forecast(ws: Workspace) -> LineageGraph:
    """The forecast's lineage from its snapshot `v1`, as `dws-dagster lineage --snapshot v1`
    builds it: the replay (`forecast_replay`) kept in the workspace and read back checked."""
    ref = forecast_lineage(ws)
    info = take_snapshot(ws, "v1").info
    save_replay(ws, forecast_replay(info.hash), f"v1-{info.hash[:8]}")
    view = SnapshotView(snapshot_manifest(ws, info.hash), ws.store)
    roles = {name: res.role for name, res in ws.resources.items()}
    graph = build_graph(view, ref, roles, snapshot=info.name)
    graph.replay = latest_replay(ws, info.hash)
    assert graph.replay is not None
    return graph
