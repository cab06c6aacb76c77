"""`dws-dagster demo`: a small workspace run end to end with the script lineage API.

Generates three weeks of synthetic taxi pickups, aggregates them per zone and hour, forecasts
each hour from the same hour a week earlier (seasonal naive), snapshots the workspace and shows
the forecast's lineage. Uses the standard library only, so it runs anywhere in seconds.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import random
import sys
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from .workspace import render
from .workspace.config import Workspace
from .workspace.graph import build_graph
from .workspace.lineage_api import LineageBuilder
from .workspace.snapshots import take_snapshot

ZONES = (132, 138, 161, 186, 236, 237)
START = dt.datetime(2024, 1, 1)
DAYS = 21


def generate_trips(path: Path, seed: int = 7) -> int:
    """Synthetic TLC-style pickups with daily and weekly seasonality."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["tpep_pickup_datetime", "PULocationID", "trip_distance"])
        for hour in range(DAYS * 24):
            stamp = START + dt.timedelta(hours=hour)
            daily = 1 + math.sin((stamp.hour - 6) / 24 * 2 * math.pi)
            weekly = 0.8 if stamp.weekday() >= 5 else 1.0
            for zone in ZONES:
                for _ in range(rng.randint(0, int(6 * daily * weekly) + 1)):
                    minute = rng.randint(0, 59)
                    writer.writerow([(stamp + dt.timedelta(minutes=minute)).isoformat(" "),
                                     zone, round(rng.uniform(0.5, 12), 2)])
                    count += 1
    return count


def hourly_actuals(ws: Workspace) -> None:
    with LineageBuilder().with_step_name("hourly_actuals").with_parameters({"grain": "hour"}) \
            .with_input_path(ws.root / "data/source/yellow_trips.csv") \
            .with_output_path(ws.root / "data/intermediate/hourly_actuals") \
            .with_workspace_directory(ws.root).eval():
        counts: Counter[tuple[str, str]] = Counter()
        with open(ws.root / "data/source/yellow_trips.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                counts[(row["PULocationID"], row["tpep_pickup_datetime"][:13])] += 1
        out = ws.root / "data/intermediate/hourly_actuals"
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "rides.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["zone", "hour", "rides"])
            for (zone, hour), rides in sorted(counts.items()):
                writer.writerow([zone, hour, rides])


def forecast(ws: Workspace, season_hours: int = 168) -> dict[str, float]:
    actuals_dir = ws.root / "data/intermediate/hourly_actuals"
    with LineageBuilder().with_step_name("yellow_rides_hourly_forecast") \
            .with_parameters({"model": "seasonal_naive", "season_hours": season_hours}) \
            .with_input_path(actuals_dir).with_workspace_directory(ws.root) \
            .as_results_step(ws.root / "results/hourly_forecast", "seasonal naive baseline") \
            .eval() as lineage:
        actual: dict[tuple[str, str], int] = {}
        with open(actuals_dir / "rides.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                actual[(row["zone"], row["hour"])] = int(row["rides"])
        errors = []
        for (zone, hour), rides in actual.items():
            when = dt.datetime.strptime(hour, "%Y-%m-%d %H")
            before = (when - dt.timedelta(hours=season_hours)).strftime("%Y-%m-%d %H")
            if when >= START + dt.timedelta(hours=season_hours):
                errors.append(rides - actual.get((zone, before), 0))
        metrics = {"mae": round(sum(abs(e) for e in errors) / len(errors), 4),
                   "rmse": round(math.sqrt(sum(e * e for e in errors) / len(errors)), 4),
                   "hours_scored": len(errors)}
        lineage.write_results(metrics)
    return metrics


def run_demo(directory: Path) -> int:
    """Build the demo workspace in `directory`, run it, snapshot it, show the lineage."""
    steps = tqdm(total=5, desc="demo", unit="step", file=sys.stderr, disable=None)
    ws = Workspace.init(directory, exist_ok=True)
    for name, role, path in (("source", "source-data", "data/source"),
                             ("intermediate", "intermediate-data", "data/intermediate"),
                             ("results", "results", "results")):
        if name not in ws.resources:
            ws.add_resource(name, role, path=path)
    steps.set_postfix_str("generating trips")
    trips = generate_trips(ws.root / "data/source/yellow_trips.csv")
    steps.update()
    steps.set_postfix_str("hourly_actuals")
    hourly_actuals(ws)
    steps.update()
    steps.set_postfix_str("forecast")
    metrics = forecast(ws)
    steps.update()
    steps.set_postfix_str("snapshot")
    outcome = take_snapshot(ws, message="demo run")
    steps.update()
    graph = build_graph(ws.store, "results/hourly_forecast",
                        {n: r.role for n, r in ws.resources.items()})
    html_path = ws.root / "lineage.html"
    html_path.write_text(render.render_html(graph), encoding="utf-8")
    steps.update()
    steps.close()
    print(f"Workspace: {ws.root} ({trips} synthetic trips)")
    print(f"Snapshot:  {outcome.info.hash[:12]}"
          f"{'' if outcome.created else ' (nothing changed since the last run)'}")
    print("Metrics:   " + ", ".join(f"{k}={v}" for k, v in metrics.items()))
    print()
    print(render.render_text(graph))
    print(f"\nLineage graph: {html_path}")
    print(f"Try: dws-dagster status -w {ws.root}")
    return 0
