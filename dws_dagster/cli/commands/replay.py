"""`dws-dagster replay`: reproduce a snapshot's results from their lineage, in a scratch copy of
the workspace, and say ref by ref whether they reproduced.

Script steps need nothing more than the lineage; Dagster asset steps need the code location's
definitions, named by `--definitions` or found where Dagster's own tools look for them (the
workspace's `pyproject.toml`, then its `workspace.yaml`). Dagster is imported only when the
plan has Dagster steps.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from dws_dagster.cli.command import EXIT_ATTENTION, Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace, remote_data
from dws_dagster.cli.failures import one_line
from dws_dagster.cli.output import print_json
from dws_dagster.errors import DwsError
from dws_dagster.workspace.versions import short

if TYPE_CHECKING:
    from dws_dagster.replay.planning import ReplayStep
    from dws_dagster.replay.run import ReplayReport, StepRunner
    from dws_dagster.snapshots.restore_plan import RestoreReport


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "replay",
        cmd_replay,
        "reproduce a snapshot's results from their lineage in a scratch workspace, and say "
        "which reproduced (exit 3 when any did not)",
        formats=True,
    )
    p.add_argument("snapshot", metavar="TAG|HASH|PREFIX")
    p.add_argument("refs", nargs="*", metavar="REF", help="default: the snapshot's results")
    p.add_argument(
        "--into",
        metavar="DIR",
        help="the scratch workspace, a new or empty folder (default: under "
        ".dataworkspace/replays/)",
    )
    p.add_argument(
        "--definitions",
        metavar="MODULE",
        help="the Dagster code location's definitions, as `dg dev -m` takes them (default: "
        "from pyproject.toml or workspace.yaml)",
    )
    p.add_argument(
        "--in-place",
        action="store_true",
        help="then make the snapshot current in this workspace with the replay's data, as "
        "restore does (all or nothing; only when every ref reproduced)",
    )


def cmd_replay(args: argparse.Namespace) -> int:
    from dws_dagster.errors import ReplayNotLandedError
    from dws_dagster.replay.compare import name_differing_columns
    from dws_dagster.replay.in_place import land_replay
    from dws_dagster.replay.planning import DAGSTER_ASSET, plan_replay
    from dws_dagster.replay.record import replays_dir, report_json, save_replay
    from dws_dagster.replay.run import DIFFERS, NON_DETERMINISTIC, run_plan
    from dws_dagster.replay.scratch import prepare_scratch

    ws = open_workspace(args)
    plan = plan_replay(ws, args.snapshot, args.refs)
    started = dt.datetime.now(dt.UTC)
    name = f"{plan.snapshot.name}-{started.strftime('%Y%m%dT%H%M%SZ')}"
    into = Path(args.into) if args.into else replays_dir(ws) / name
    runners: dict[str, StepRunner] = {}
    if any(step.kind == DAGSTER_ASSET and step.replayable for step in plan.steps):
        definitions = args.definitions or definitions_of(ws.root)
        if definitions is not None:
            from dws_dagster.replay.dagster_runner import DagsterRunner

            runners[DAGSTER_ASSET] = DagsterRunner(definitions)
    scratch = prepare_scratch(ws, plan, into, chosen_by_replay=not args.into)
    quiet = args.format == "json"
    report = run_plan(
        plan, scratch, runners, progress=None if quiet else lambda s: _say_step(s, len(plan.steps))
    )
    if any(v.outcome in (DIFFERS, NON_DETERMINISTIC) for v in report.verdicts):
        from dws_dagster.spark.column_diff import SparkColumnComparer

        # Spark's console output goes to the scratch workspace's log, not the terminal.
        comparer = SparkColumnComparer(scratch.meta_dir / "spark-compare.log")
        name_differing_columns(ws, report, scratch, comparer)
    landed: RestoreReport | None = None
    refused: DwsError | None = None
    if args.in_place:
        try:
            landed = land_replay(ws, report, scratch, remote_data())
        except DwsError as exc:  # nothing changed: said after the verdicts
            refused = exc
    document = report_json(report, replayed_at=started.isoformat(), in_place=landed is not None)
    save_replay(ws, document, name)
    if args.format == "json":
        if landed is not None:
            document["landed"] = {
                "data_replayed": landed.data_replayed,
                "data_restored": landed.data_restored,
                "data_unchanged": landed.data_unchanged,
                "code_left": [{"ref": r, "reason": why} for r, why in landed.code_left],
            }
        print_json(document)
    else:
        _print_table(report, ws.root)
        if landed is not None:
            _print_landed(landed)
    if isinstance(refused, ReplayNotLandedError):
        print(one_line(str(refused)), file=sys.stderr)
        return EXIT_ATTENTION
    if refused is not None:
        raise refused
    return 0 if report.reproduced else EXIT_ATTENTION


def definitions_of(root: Path) -> str | None:
    """The code location's definitions module as Dagster's tools find it for the workspace's
    folder: `[tool.dagster] module_name` or `[tool.dg.project] root_module` (its
    `definitions` module) in `pyproject.toml`, else the first `python_module` of
    `workspace.yaml`."""
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        project = {}
    tool = project.get("tool", {}) if isinstance(project, dict) else {}
    dagster = tool.get("dagster", {}) if isinstance(tool, dict) else {}
    if isinstance(dagster, dict) and isinstance(dagster.get("module_name"), str):
        return str(dagster["module_name"])
    dg = tool.get("dg", {}) if isinstance(tool, dict) else {}
    dg_project = dg.get("project", {}) if isinstance(dg, dict) else {}
    if isinstance(dg_project, dict) and isinstance(dg_project.get("root_module"), str):
        return f"{dg_project['root_module']}.definitions"
    import yaml

    try:
        workspace = yaml.safe_load((root / "workspace.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    for entry in (workspace or {}).get("load_from", []) if isinstance(workspace, dict) else []:
        module = entry.get("python_module") if isinstance(entry, dict) else None
        if isinstance(module, dict):
            module = module.get("module_name")
        if isinstance(module, str):
            return module
    return None


def _print_landed(landed: RestoreReport) -> None:
    info = landed.info
    from_snapshot = sorted(set(landed.data_restored) - set(landed.data_replayed))
    print(
        f"replayed in place: snapshot {info.name} ({info.hash[:12]}) is current again; data "
        f"of {len(landed.data_replayed)} ref(s) from the replay, {len(from_snapshot)} brought "
        f"back from the snapshot, {len(landed.data_unchanged)} already as it was"
    )
    for ref in landed.data_replayed:
        print(f"  data replayed:  {ref}")
    for ref in from_snapshot:
        print(f"  data restored:  {ref}")
    for ref, why in landed.code_left:
        print(f"  code left as is: {ref}: {why}")


def _say_step(step: ReplayStep, total: int) -> None:
    print(f"replaying {step.key} ({step.kind}; {total} steps in all)", file=sys.stderr)


def _print_table(report: ReplayReport, root: Path) -> None:
    from dws_dagster.replay.run import REPRODUCED

    rows = [
        (
            v.ref,
            v.outcome,
            short(v.recorded) if v.recorded else "-",
            short(v.reproduced) if v.reproduced else "-",
            v.detail or "",
        )
        for v in report.verdicts
    ]
    header = ("REF", "VERDICT", "RECORDED", "REPRODUCED", "WHY")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip())
    done = sum(v.outcome == REPRODUCED for v in report.verdicts)
    snapshot = report.plan.snapshot.name
    if report.reproduced:
        print(f"\nevery ref of snapshot {snapshot} reproduced exactly ({done} refs)")
    else:
        print(f"\n{done} of {len(report.verdicts)} refs of snapshot {snapshot} reproduced exactly")
    first = report.plan.requested[0]
    look = shlex.join(["dws-dagster", "lineage", first, "-w", str(report.scratch)])
    print(f"replayed in {report.scratch}, a workspace of its own: {look}")
    page = shlex.join(
        [
            "dws-dagster", "lineage", first, "--snapshot", snapshot, "-w", str(root),
            "--format", "html", "-o", f"replay-{snapshot}.html",
        ]
    )  # fmt: skip
    print(f"the verdicts on the snapshot's lineage page: {page}")
