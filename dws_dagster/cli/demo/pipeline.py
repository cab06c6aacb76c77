"""`dws-dagster demo`: the example project (hourly NYC taxi ride forecast) run end to end.

Everything runs in this process on embedded defaults, so the demo needs no server: local Spark,
a SQLite Dagster instance in `DIR/.dagster`, OpenLineage to its configured transport (by
default the workspace's `events.jsonl`). It lands the synthetic data, materializes every
partition through the example's own jobs, does the lineage sensor's work after each run
(`process_events`: lineage, `results.json`, a snapshot per forecast run, OpenLineage events),
then hands what it recorded to `final_report`, with the progress shown by `progress`.

Spark's own console output (its start-up warnings) goes to `DIR/.dagster/spark.log`, never
into the progress bar; Dagster's and py4j's Python logging is kept down to warnings.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dws_dagster.cli.demo.final_report import FORECAST_REF, Iteration, print_report
from dws_dagster.cli.demo.progress import Progress
from dws_dagster.errors import DemoError, DwsError
from dws_dagster.views.diagrams import render_html
from dws_dagster.views.graph import build_graph
from dws_dagster.workspace.files import stderr_to

DAGSTER_YAML = "telemetry:\n  enabled: false\n"
WORKSPACE_YAML = """\
# Written by `dws-dagster demo`: the example's code location, served by `dg dev -w THIS_FILE`.
load_from:
  - python_module:
      module_name: example_project.definitions
      working_directory: {directory}
"""


def _example() -> Any:
    try:
        from example_project import project, setup_workspace
    except ImportError as exc:
        raise DemoError(
            f"the demo runs the example project (example_project/), which cannot be imported "
            f"({exc}); install the repository with 'pip install -e .' (./dev does), or run "
            "from its root"
        ) from None
    return project, setup_workspace


def _instance(home: Path) -> Any:
    """A SQLite Dagster instance in `home`, telemetry off (the one `dg dev` uses with
    DAGSTER_HOME=home)."""
    from dagster import DagsterInstance

    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML, encoding="utf-8")
    return DagsterInstance.from_config(str(home))


def _start_spark(config: dict[str, str], log_path: Path) -> None:
    """Start the session the runs reuse (PySparkResource's getOrCreate), with Spark's own
    console logging down to errors. The JVM writes its console output (the start-up warnings
    come before any log level can be set) to its standard error, which it inherits when it
    starts: it starts with this process's standard error pointing at `log_path`, so none of
    it lands in the progress bar, ever."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in {**config, "spark.ui.showConsoleProgress": "false"}.items():
        builder = builder.config(key, value)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with stderr_to(log_path):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")


@contextmanager
def _quiet_python_logging() -> Iterator[None]:
    """Dagster's and py4j's Python loggers say every step at INFO/DEBUG; the bar says enough."""
    import logging

    names = ("dagster", "py4j", "pyspark")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _dws_cause(exc: BaseException) -> DwsError | None:
    """The DwsError behind a failed Dagster run, if any (Dagster wraps user errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, DwsError):
            return current
        seen.add(id(current))
        current = (
            current.__cause__ or getattr(current, "user_exception", None) or current.__context__
        )
    return None


def run_demo(
    directory: Path,
    *,
    small: bool = False,
    months: int | None = None,
    trips_per_month: int | None = None,
) -> int:
    """Build the example in `directory`, run all of it, and report its lineage and metrics."""
    project, setup = _example()
    from dws_dagster.sensor.lineage_sensor import process_events
    from dws_dagster.snapshots.index import list_snapshots
    from dws_dagster.snapshots.take import take_snapshot

    if small:
        size = (
            setup.SMALL
            if trips_per_month is None
            else dataclasses.replace(setup.SMALL, trips_per_month=trips_per_month)
        )
    else:
        defaults = setup.ExampleSize()
        size = setup.ExampleSize(
            months=defaults.months if months is None else months,
            trips_per_month=(
                defaults.trips_per_month if trips_per_month is None else trips_per_month
            ),
        )
    root = directory.expanduser().absolute()
    spark_log = root / ".dagster" / "spark.log"
    progress = Progress()  # the number of steps is known once the data has landed
    try:
        progress.step("landing data")
        example = setup.ensure_workspace(root, size)
        defs = project.definitions_for(example)
        ws = example.workspace
        steps = project.plan(defs)
        progress.set_total(len(steps) + 2)
        progress.advance()
        progress.step("starting Spark")
        _start_spark(project.SPARK_CONFIG, spark_log)
        progress.advance()
        repository = defs.get_repository_def()
        iterations: list[Iteration] = []
        instance = _instance(root / ".dagster")
        cursor = 0
        ol_outcome = None
        try:
            with _quiet_python_logging():
                for step in steps:
                    progress.step(f"run {step.label}")
                    try:
                        result = project.run_step(defs, instance, step)
                    except Exception as exc:
                        cause = _dws_cause(exc)
                        if cause is not None:
                            raise cause from None
                        raise DemoError(
                            f"run '{step.label}' failed: {type(exc).__name__}: {exc}; its "
                            f"events are in the Dagster instance {instance.root_directory}, "
                            f"Spark's console output in {spark_log}"
                        ) from exc
                    # What the lineage sensor does on its next tick.
                    tick = process_events(
                        instance,
                        ws,
                        after_storage_id=cursor,
                        repository_def=repository,
                        snapshot_on_results=True,
                    )
                    cursor, ol_outcome = tick.cursor, tick
                    if step.job == project.FORECAST_JOB:
                        iterations.append(_iteration(ws, step, result.run_id))
                    progress.advance()
            runs = len(instance.get_run_records())
        finally:
            instance.dispose()
    finally:
        progress.close()

    tags = {tag: info.hash for info in list_snapshots(ws) for tag in info.tags}
    for item in iterations:
        tag = f"run-{item.run_id[:8]}"
        item.snapshot = tag if tag in tags else None
    outcome = take_snapshot(ws, message="dws-dagster demo")
    graph = build_graph(ws.store, FORECAST_REF, {n: r.role for n, r in ws.resources.items()})
    html_path = root / "lineage.html"
    html_path.write_text(render_html(graph), encoding="utf-8")
    _write_workspace_yaml(root, project)
    print_report(root, example, runs, iterations, outcome, graph, html_path, ol_outcome)
    return 0


def _iteration(ws: Any, step: Any, run_id: str) -> Iteration:
    config = step.run_config["ops"]["yellow_rides_hourly_forecast"]["config"]
    state = ws.store.get(FORECAST_REF)
    record = (state.record if state is not None else None) or {}
    return Iteration(
        use_weather=bool(config["use_weather"]),
        run_id=run_id,
        version=record.get("version"),
        metrics=dict(record.get("metrics") or {}),
        inputs=[item["ref"] for item in record.get("inputs", ())],
    )


def _write_workspace_yaml(root: Path, project: Any) -> None:
    """`root/workspace.yaml`: the example's code location, loadable from any folder (its
    working directory is the folder the example project was imported from)."""
    directory = Path(project.__file__).resolve().parent.parent
    (root / "workspace.yaml").write_text(
        WORKSPACE_YAML.format(directory=_yaml_string(str(directory))), encoding="utf-8"
    )


def _yaml_string(text: str) -> str:
    """`text` as a YAML scalar (a JSON string is one)."""
    return json.dumps(text)
