"""`status`: the workspace's resources and refs, what needs attention and what to run.

Read-only and run often, so it imports no dagster or pyspark: the views it renders are
imported when it runs (it only finishes a restore that was interrupted). `status --verify`
re-hashes every ref's data and exits `EXIT_ATTENTION` when refs need attention (data changed
outside steps, missing, failed or unknown refs), after printing what to run; 0 when the data
is what the lineage says.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dws_dagster.cli.command import EXIT_ATTENTION, Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace, remote_data
from dws_dagster.cli.output import print_json, progress_bar, say
from dws_dagster.workspace.definition import RESTORE_INTENT_FILE, Workspace


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "status",
        cmd_status,
        "resources, refs, versions, failed and unknown refs. The "
        "refs of a resource are every ref of it the lineage names: those a step wrote or "
        "that were observed, and those steps read that have no lineage of their own "
        "(source data read as found); code a step ran is recorded with the step, not as "
        "refs",
        formats=True,
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="re-hash the data of every ref and compare it with the version its "
        "lineage says (source data only read: the version read); then say "
        f"what needs attention and what to run. Exit code {EXIT_ATTENTION} "
        "when anything needs attention (drift, missing data, failed or "
        "unknown refs), 0 when nothing does",
    )
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref on its own line (by default the partitions one step "
        "wrote, or the files of one source folder, are one line)",
    )


def _status_rows(ws: Workspace, verify: bool) -> list[dict[str, Any]]:
    from dws_dagster.views.status.ref_rows import status_rows, verify_row

    rows = status_rows(ws)
    if verify:
        bar = progress_bar(len(rows), "verifying")
        try:
            for row in rows:
                verify_row(ws, row)
                bar.update(1)
        finally:
            bar.close()
    return rows


def cmd_status(args: argparse.Namespace) -> int:
    from dws_dagster.views.status.summary import StatusReport

    ws = open_workspace(args)
    if (ws.meta_dir / RESTORE_INTENT_FILE).exists():
        from dws_dagster.snapshots.restore import finish_interrupted_restore

        if finish_interrupted_restore(ws, remote_data()):
            say(
                "finished a restore that was interrupted (see 'dws-dagster history')",
                file=sys.stderr,
            )
    rows = _status_rows(ws, args.verify)
    report = StatusReport(rows, verified=args.verify)
    code = EXIT_ATTENTION if args.verify and report.verdict != "clean" else 0
    resources = []
    for res in ws.resources.values():
        count = sum(1 for row in rows if row["ref"].split("/", 1)[0] == res.name)
        resources.append({**res.to_json(), "refs": count})
    if args.format == "json":
        print_json(
            {
                "workspace": ws.name,
                "root": str(ws.root),
                "store": {"url": ws.store.shown, "from": ws.store_settings.origin},
                "resources": resources,
                "refs": rows,
                **report.to_json(),
                "exit_code": code,
            }
        )
        return code
    say(f"Workspace {ws.name} ({ws.root})")
    say(f"Lineage store: {ws.store.shown} (from {_origin(ws.store_settings.origin)})")
    say()
    say("Resources:")
    if not resources:
        say("  (none: add one with 'dws-dagster add')")
    for shown in resources:
        say(
            f"  {shown['name']:<20} {shown['role']:<18} {shown.get('path') or shown.get('uri')}"
            f"  [{shown['refs']} ref{'s' if shown['refs'] != 1 else ''}]"
        )
    say()
    say("Refs:")
    for line in report.refs_lines(expand=args.expand):
        say(line)
    lines = report.lines(expand=args.expand)
    if lines:
        say()
    for line in lines:
        say(line)
    return code


def _origin(origin: str) -> str:
    return {
        "default": "the default",
        "config.json": ".dataworkspace/config.json",
        "DWS_STORE_URL": "$DWS_STORE_URL",
    }.get(origin, origin)
