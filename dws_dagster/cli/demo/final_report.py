"""What the demo prints when it is done: the metrics of the forecast's two model iterations
and what `use_weather` changed in its lineage, that lineage as a grouped tree, where the
snapshot, the OpenLineage events and the HTML graph are, and the commands to try next.

Kept apart from running the demo: the report reads only what the run recorded (the lineage,
the snapshots, the OpenLineage outcome). The commands it suggests run as printed in a new
shell, from the folder the demo was run in: through `./dev` when the demo was started by
`./dev demo` (`DWS_DEV_SCRIPT`), else by the absolute path of the environment's script (an
activated virtualenv's PATH is not the next shell's).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dws_dagster.cli.output import say
from dws_dagster.views.graph_model import GraphNode, LineageGraph
from dws_dagster.workspace.versions import short

FORECAST_REF = "results/yellow_rides_hourly_forecast"
#: Set by `./dev` to how it was invoked (e.g. `./dev`): the prefix of the commands printed.
DEV_SCRIPT_ENV = "DWS_DEV_SCRIPT"
#: Where the printed `dg dev` command serves the Dagster UI.
UI_HOST, UI_PORT = "127.0.0.1", 3000


@dataclass
class Iteration:
    """One model iteration of the forecast, as the lineage sensor recorded it."""

    use_weather: bool
    run_id: str
    version: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    snapshot: str | None = None


def print_report(
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
    say(f"Workspace:  {root}")
    say(
        f"Data:       synthetic NYC yellow-taxi trips and weather, {example.size.describe()}"
        + (f"; landed {landed.trips:,} trips now" if landed.trips else "")
    )
    say(f"Dagster:    {runs} runs in {root / '.dagster'}")
    say()
    say(f"Forecast {FORECAST_REF} (seasonal naive: the same hour a week before):")
    say(f"  {'model iteration':<24}{'MAE':>9}{'RMSE':>9}{'hours':>8}  {'version':<14}snapshot")
    for item in iterations:
        name = "baseline" if not item.use_weather else "use_weather (rain)"
        metrics = item.metrics
        say(
            f"  {name:<24}{_num(metrics.get('mae')):>9}{_num(metrics.get('rmse')):>9}"
            f"{metrics.get('hours_scored', '-'):>8}  {short(item.version):<14}"
            f"{item.snapshot or '-'}"
        )
    if len(iterations) == 2:
        say()
        say("What use_weather changed in the forecast's lineage:")
        for line in _changes(*iterations):
            say(f"  {line}")
    say()
    say(f"Lineage of {FORECAST_REF} (partitions grouped):")
    for line in grouped_tree(graph):
        say(line)
    say()
    tags = outcome.info.tags
    latest = iterations[-1].snapshot if iterations else None
    snapshot = latest if latest in tags else (tags[-1] if tags else outcome.info.hash[:12])
    say(
        f"Snapshot:   {snapshot}"
        f"{'' if outcome.created else ' (the state the lineage sensor snapshotted last)'}"
    )
    say(_openlineage_line(ws, ol_outcome))
    say(f"Lineage graph:      {html_path}")
    say()
    say("Try:")
    for line in try_commands(root, iterations, pending=bool(ol_outcome and ol_outcome.pending)):
        say(f"  {line}")
    say()
    say(f"The Dagster UI on http://{UI_HOST}:{UI_PORT} (Ctrl-C stops it):")
    say(f"  {dg_dev_command(root)}")


def try_commands(root: Path, iterations: Sequence[Iteration], *, pending: bool) -> list[str]:
    """The commands the report suggests next, each as it runs in a new shell (`command`)."""
    dws, where = command("dws-dagster"), shlex.quote(str(root))
    lines = [f"{dws} status -w {where}", f"{dws} lineage {FORECAST_REF} -w {where}"]
    if len(iterations) == 2 and all(i.snapshot for i in iterations):
        lines.append(f"{dws} diff {iterations[0].snapshot} {iterations[1].snapshot} -w {where}")
    if pending:
        lines.append(f"{dws} openlineage deliver -w {where}")
    return lines


def command(name: str) -> str:
    """How a new shell, in the folder the user is in, runs the project's tool `name`
    (dws-dagster, dagster, dg): through `./dev` as it was invoked when the demo was started
    by it (`$DWS_DEV_SCRIPT ...`), else by the absolute path of this environment's script,
    quoted for the shell. Never the bare name: an activated virtualenv puts it on this
    shell's PATH, not on the next one's."""
    dev = os.environ.get(DEV_SCRIPT_ENV)
    if dev:
        return f"{shlex.quote(dev)} {name}"
    # The environment's bin folder as the interpreter was started from it (not resolved: a
    # virtualenv's python is a link to the base interpreter, whose folder holds no scripts).
    script = Path(os.path.abspath(sys.executable)).parent / name
    if script.exists():
        return shlex.quote(str(script))
    found = shutil.which(name)
    if found is not None:
        return shlex.quote(os.path.abspath(found))
    if name == "dws-dagster":  # not installed as a script: this interpreter runs the module
        return f"{shlex.quote(os.path.abspath(sys.executable))} -m dws_dagster.cli"
    return name


def dg_dev_command(root: Path) -> str:
    """`dg dev` serving the demo's Dagster instance and workspace: the code location of
    `root/workspace.yaml`, the instance in `root/.dagster`, loopback only."""
    home, where = shlex.quote(str(root / ".dagster")), shlex.quote(str(root))
    return (
        f"DAGSTER_HOME={home} DWS_EXAMPLE_WORKSPACE={where} {command('dg')} dev "
        f"-w {shlex.quote(str(root / 'workspace.yaml'))} -h {UI_HOST} -p {UI_PORT}"
    )


def _openlineage_line(ws: Any, outcome: Any) -> str:
    """Where the OpenLineage events went: the events file (the default transport, or any
    file transport), else the configured transport; and what is still pending."""
    from openlineage.client.transport.file import FileTransport

    from dws_dagster.ol.transport.factory import make_transport

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
