"""`snapshot`: take a snapshot of the workspace: its lineage, every ref's data (retained as
the resources say), the code's state and the results, tagged.

It may copy remote data (through Spark, started only when a remote ref needs it).
"""

from __future__ import annotations

import argparse
import sys

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace, remote_data
from dws_dagster.cli.output import print_json


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "snapshot",
        cmd_snapshot,
        "snapshot the workspace: lineage, every ref's data (retained), code, results",
        formats=True,
    )
    p.add_argument("tag", nargs="?", metavar="TAG")
    p.add_argument("-m", "--message", default="")


def cmd_snapshot(args: argparse.Namespace) -> int:
    from dws_dagster.snapshots.retention import describe as describe_retention
    from dws_dagster.snapshots.take import take_snapshot

    ws = open_workspace(args)
    outcome = take_snapshot(ws, args.tag, args.message or "", remote=remote_data())
    info = outcome.info
    if args.format == "json":
        # `created` is the snapshot's time (from `to_json`): whether this call took it is
        # `new_snapshot`.
        retention = outcome.retention
        print_json(
            {
                **info.to_json(),
                "new_snapshot": outcome.created,
                "tag_added": outcome.tag_added,
                "warnings": outcome.warnings,
                "drift": outcome.drift,
                "retention": None if retention is None else vars(retention),
            }
        )
        return 0
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if outcome.created:
        tags = f" tagged {', '.join(info.tags)}" if info.tags else ""
        print(f"took snapshot {info.hash[:12]}{tags}")
        for entry in info.results:
            print(f"  archived results {entry['ref']} in {entry['folder']}/ (with lineage.json)")
        if info.metrics:
            print("  metrics: " + ", ".join(f"{k}={v}" for k, v in info.metrics.items()))
        if outcome.retention is not None:
            print(f"  data retained: {describe_retention(outcome.retention)}")
        for ref in outcome.drift:
            print(f"  drift: {ref} changed outside any step (recorded as found)")
    elif outcome.tag_added:
        print(f"nothing changed since snapshot {info.hash[:12]}; added tag {args.tag} to it")
    else:
        print(f"nothing changed since snapshot {info.name} ({info.hash[:12]}); nothing written")
    return 0
