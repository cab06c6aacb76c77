"""`history`: the workspace's snapshots, newest first, with their tags, messages and results
metrics. Read-only."""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import print_json, say


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    add_command(
        subparsers, parents, "history", cmd_history, "list snapshots, newest first", formats=True
    )


def cmd_history(args: argparse.Namespace) -> int:
    from dws_dagster.snapshots.index import list_snapshots

    ws = open_workspace(args)
    infos = list(reversed(list_snapshots(ws)))
    if args.format == "json":
        print_json([info.to_json() for info in infos])
        return 0
    if not infos:
        say("no snapshots yet: take one with 'dws-dagster snapshot TAG'")
    for info in infos:
        tags = ",".join(info.tags) or "-"
        metrics = " ".join(f"{k}={v}" for k, v in (info.metrics or {}).items())
        say(
            f"{info.hash[:12]}  {info.created:<25}  {tags:<16}  {info.message}"
            f"{'  ' + metrics if metrics else ''}"
        )
    return 0
