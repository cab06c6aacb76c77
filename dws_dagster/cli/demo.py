"""`dws-dagster demo`: the example project (hourly NYC taxi ride forecast) run end to end.

Everything runs in this process on embedded defaults, so the demo needs no server: local Spark,
a SQLite Dagster instance in `DIR/.dagster`, OpenLineage to its configured transport (by
default the workspace's `events.jsonl`). It lands the synthetic data, materializes every
partition through the example's own jobs, does the lineage sensor's work after each run
(`process_events`: lineage, `results.json`, a snapshot per forecast run, OpenLineage events),
then shows the forecast's lineage and the metrics of its two model iterations.

Progress goes to stderr: a bar on a terminal, else a line per step as it starts (so a log or a
pipe shows the demo working). Spark's own console output (its start-up warnings) goes to
`DIR/.dagster/spark.log`, never into the bar. The commands it suggests run as printed: through
`./dev` when the demo was started by `./dev demo` (`DWS_DEV_SCRIPT`), else as installed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from dws_dagster.errors import DwsError
from dws_dagster.workspace.versions import short
from dws_dagster.workspace.views import render
from dws_dagster.workspace.views.graph import build_graph
from dws_dagster.workspace.views.graph_model import GraphNode, LineageGraph

FORECAST_REF = "results/yellow_rides_hourly_forecast"
DAGSTER_YAML = "telemetry:\n  enabled: false\n"
#: Set by `./dev` to how it was invoked (e.g. `./dev`): the prefix of the commands printed.
DEV_SCRIPT_ENV = "DWS_DEV_SCRIPT"
#: Where the printed `dg dev` command serves the Dagster UI.
UI_HOST, UI_PORT = "127.0.0.1", 3000
WORKSPACE_YAML = """\
# Written by `dws-dagster demo`: the example's code location, served by `dg dev -w THIS_FILE`.
load_from:
  - python_module:
      module_name: example_project.definitions
      working_directory: {directory}
"""


class DemoError(DwsError):
    """The demo cannot run as asked."""


@dataclass
class Iteration:
    """One model iteration of the forecast, as the lineage sensor recorded it."""

    use_weather: bool
    run_id: str
    version: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    snapshot: str | None = None


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
    with _stderr_to(log_path):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """This process's file descriptor 2 appended to `path` for the block: processes started
    in it keep writing there."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


class _Progress:
    """The demo's progress on stderr: a bar on a terminal; else a line per step as it starts,
    flushed at once (a log file or a pipe shows the demo working, not a minute of silence)."""

    def __init__(self, total: int | None = None) -> None:
        self.interactive = sys.stderr.isatty()
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar = (
            tqdm(
                total=total or 1,
                desc="demo",
                unit="step",
                file=sys.stderr,
                disable=not self.interactive,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]{postfix}",
            )
            if self.interactive
            else None
        )

    def step(self, label: str) -> None:
        """Step `label` starts."""
        if self.bar is not None:
            self.bar.set_postfix_str(label)
            return
        elapsed = int(time.monotonic() - self.started)
        count = f"{self.done + 1}/{self.total} " if self.total else ""
        print(
            f"demo [{elapsed // 60:02d}:{elapsed % 60:02d}] {count}{label}",
            file=sys.stderr,
            flush=True,
        )

    def set_total(self, total: int) -> None:
        self.total = total
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def advance(self) -> None:
        """The current step is done."""
        self.done += 1
        if self.bar is not None:
            self.bar.update()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


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
    from dws_dagster.sensor.definition import process_events
    from dws_dagster.workspace.snapshots.history import list_snapshots
    from dws_dagster.workspace.snapshots.snapshots import take_snapshot

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
    progress = _Progress()  # the number of steps is known once the data has landed
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
    html_path.write_text(render.render_html(graph), encoding="utf-8")
    _write_workspace_yaml(root, project)
    _report(root, example, runs, iterations, outcome, graph, html_path, ol_outcome)
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


def _report(
    root: Path,
    example: Any,
    runs: int,
    iterations: list[Iteration],
    outcome: Any,
    graph: LineageGraph,
    html_path: Path,
    ol_outcome: Any,
) -> None:
    ws = example.workspace
    landed = example.landed
    print(f"Workspace:  {root}")
    print(
        f"Data:       synthetic NYC yellow-taxi trips and weather, {example.size.describe()}"
        + (f"; landed {landed.trips:,} trips now" if landed.trips else "")
    )
    print(f"Dagster:    {runs} runs in {root / '.dagster'}")
    print()
    print(f"Forecast {FORECAST_REF} (seasonal naive: the same hour a week before):")
    print(f"  {'model iteration':<24}{'MAE':>9}{'RMSE':>9}{'hours':>8}  {'version':<14}snapshot")
    for item in iterations:
        name = "baseline" if not item.use_weather else "use_weather (rain)"
        metrics = item.metrics
        print(
            f"  {name:<24}{_num(metrics.get('mae')):>9}{_num(metrics.get('rmse')):>9}"
            f"{metrics.get('hours_scored', '-'):>8}  {short(item.version):<14}"
            f"{item.snapshot or '-'}"
        )
    if len(iterations) == 2:
        print()
        print("What use_weather changed in the forecast's lineage:")
        for line in _changes(*iterations):
            print(f"  {line}")
    print()
    print(f"Lineage of {FORECAST_REF} (partitions grouped):")
    for line in grouped_tree(graph):
        print(line)
    print()
    tags = outcome.info.tags
    latest = iterations[-1].snapshot if iterations else None
    snapshot = latest if latest in tags else (tags[-1] if tags else outcome.info.hash[:12])
    print(
        f"Snapshot:   {snapshot}"
        f"{'' if outcome.created else ' (the state the lineage sensor snapshotted last)'}"
    )
    print(_openlineage_line(ws, ol_outcome))
    print(f"Lineage graph:      {html_path}")
    print()
    dws, where = command("dws-dagster"), shlex.quote(str(root))
    print("Try:")
    print(f"  {dws} status -w {where}")
    print(f"  {dws} lineage {FORECAST_REF} -w {where}")
    if len(iterations) == 2 and all(i.snapshot for i in iterations):
        print(f"  {dws} diff {iterations[0].snapshot} {iterations[1].snapshot} -w {where}")
    if ol_outcome is not None and ol_outcome.pending:
        print(f"  {dws} openlineage deliver -w {where}")
    print()
    print(f"The Dagster UI on http://{UI_HOST}:{UI_PORT} (Ctrl-C stops it):")
    print(f"  {dg_dev_command(root)}")


def command(name: str) -> str:
    """How the user's shell runs the project's tool `name` (dws-dagster, dagster, dg): through
    `./dev` as it was invoked when the demo was started by it (`$DWS_DEV_SCRIPT ...`), else
    bare when PATH finds this environment's script (installed, or an activated virtualenv),
    else that script's path."""
    dev = os.environ.get(DEV_SCRIPT_ENV)
    if dev:
        return f"{shlex.quote(dev)} {name}"
    script = Path(sys.executable).parent / name
    found = shutil.which(name)
    if not script.exists() or (found is not None and Path(found).resolve() == script.resolve()):
        return name
    return shlex.quote(str(script))


def dg_dev_command(root: Path) -> str:
    """`dg dev` serving the demo's Dagster instance and workspace: the code location of
    `root/workspace.yaml`, the instance in `root/.dagster`, loopback only."""
    home, where = shlex.quote(str(root / ".dagster")), shlex.quote(str(root))
    return (
        f"DAGSTER_HOME={home} DWS_EXAMPLE_WORKSPACE={where} {command('dg')} dev "
        f"-w {shlex.quote(str(root / 'workspace.yaml'))} -h {UI_HOST} -p {UI_PORT}"
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


def _openlineage_line(ws: Any, outcome: Any) -> str:
    """Where the OpenLineage events went: the events file (the default transport, or any
    file transport), else the configured transport; and what is still pending."""
    from openlineage.client.transport.file import FileTransport

    from dws_dagster.ol.transport import make_transport

    transport, description = make_transport(ws)
    transport.close()
    pending = outcome.pending if outcome is not None else 0
    if isinstance(transport, FileTransport) and not pending:
        events = Path(transport.config.log_file_path)
        count = 0
        if events.is_file():
            with open(events, "rb") as handle:
                count = sum(1 for _ in handle)
        return f"OpenLineage events: {events} ({count} events)"
    if not pending:
        return f"OpenLineage events: sent to {description}"
    error = f"; {outcome.last_delivery_error}" if outcome.last_delivery_error else ""
    return (
        f"OpenLineage events: {pending} pending in the outbox for {description}{error} "
        "(the openlineage deliver command below sends them)"
    )


def _num(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else "-"


def _changes(before: Iteration, after: Iteration) -> list[str]:
    lines = [
        f"parameter use_weather: {str(before.use_weather).lower()} -> "
        f"{str(after.use_weather).lower()}",
        f"version {short(before.version)} -> {short(after.version)}",
    ]
    added = sorted(set(after.inputs) - set(before.inputs))
    removed = sorted(set(before.inputs) - set(after.inputs))
    for sign, refs in (("+", added), ("-", removed)):
        for label in _group_labels(refs):
            lines.append(f"input {sign} {label}")
    if "rain_multiplier" in after.metrics:
        lines.append(
            f"rain multiplier fitted on the training weeks: {after.metrics['rain_multiplier']}"
        )
    return lines


def _group_labels(refs: Sequence[str]) -> list[str]:
    groups: dict[str, list[str]] = {}
    for ref in refs:
        parent, _, leaf = ref.rpartition("/")
        groups.setdefault(parent, []).append(leaf)
    return [_span(parent, sorted(leaves)) for parent, leaves in groups.items()]


def _span(parent: str, leaves: list[str]) -> str:
    if len(leaves) == 1:
        return f"{parent}/{leaves[0]}"
    return f"{parent}/{{{leaves[0]} … {leaves[-1]}}} ({len(leaves)})"


# ---------------------------------------------------------------------- grouped tree


def grouped_tree(graph: LineageGraph) -> list[str]:
    """The upstream tree of the focus with the partitions (or files) one step made, or one
    folder holds, on a single line: the shape of the lineage at a glance. The full tree is
    `dws-dagster lineage REF`; the HTML graph shows every node."""
    parents: dict[str, list[str]] = {}
    for edge in graph.edges:
        parents.setdefault(edge.target, []).append(edge.source)
    lines: list[str] = []
    seen: set[tuple[str | None, str]] = set()

    def group_key(node: GraphNode) -> tuple[str | None, str]:
        return node.step, node.ref.rpartition("/")[0]

    def walk(group: list[GraphNode], guides: str, last: bool, depth: int) -> None:
        branch = "" if depth == 0 else ("└── " if last else "├── ")
        key = group_key(group[0])
        repeated = depth > 0 and key in seen
        seen.add(key)
        lines.append(f"  {guides}{branch}{_group_line(group)}{' (see above)' if repeated else ''}")
        if repeated:
            return
        ids = {node.id for node in group}
        found: dict[tuple[str | None, str], dict[str, GraphNode]] = {}
        for node_id in sorted(ids):
            for source in parents.get(node_id, ()):
                node = graph.nodes.get(source)
                if node is not None:
                    found.setdefault(group_key(node), {})[node.id] = node
        children = [
            sorted(nodes.values(), key=lambda n: n.ref)
            for _, nodes in sorted(found.items(), key=lambda kv: kv[0][1])
        ]
        inner = guides + ("" if depth == 0 else ("    " if last else "│   "))
        for index, child in enumerate(children):
            walk(child, inner, index == len(children) - 1, depth + 1)

    focus = graph.nodes[graph.focus]
    walk([focus], "", True, 0)
    return lines


def _group_line(group: list[GraphNode]) -> str:
    first = group[0]
    if len(group) == 1:
        text = f"{first.ref}@{short(first.version)}"
    else:
        parent = first.ref.rpartition("/")[0]
        what = "files" if first.step is None else "partitions"
        leaves = [node.ref.rpartition("/")[2] for node in group]
        text = f"{parent}/{{{leaves[0]} … {leaves[-1]}}} ({len(group)} {what})"
    if first.step is not None:
        text += f"  <- {first.step}"
    statuses = sorted({node.status for node in group})
    return f"{text}  [{', '.join(statuses)}]"
