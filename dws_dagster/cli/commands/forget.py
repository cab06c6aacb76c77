"""`forget`: drop a ref's lineage by hand, outside any step, so another step may write it;
its data is left as it is."""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import say


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "forget",
        cmd_forget,
        "drop a ref's lineage so another step may write it",
    )
    p.add_argument("ref", metavar="REF")


def cmd_forget(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef

    ws = open_workspace(args)
    ref = ws.check_ref(ResourceRef.parse(args.ref))
    if ws.store.forget(ref):
        say(f"forgot the lineage of {ref}; its data is untouched")
    else:
        say(f"{ref} has no lineage; nothing to forget")
    return 0
