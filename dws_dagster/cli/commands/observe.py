"""`observe`: record source data's version now as its lineage, by hand, outside any step (how
a source ref left unknown by a partial restore recovers)."""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import print_json, say
from dws_dagster.workspace.versions import short


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "observe",
        cmd_observe,
        "record source data's version now as its lineage (clears "
        "unknown after a partial restore); refs a step writes recover by re-running it",
        formats=True,
    )
    p.add_argument("ref", metavar="REF")


def cmd_observe(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef

    ws = open_workspace(args)
    outcome = ws.store.observe_source(ResourceRef.parse(args.ref))
    if args.format == "json":
        print_json(
            {
                "ref": outcome.ref,
                "version": outcome.version,
                "recorded": outcome.recorded,
                "was_unknown": outcome.was_unknown,
            }
        )
    elif outcome.recorded:
        cleared = "; it is no longer unknown" if outcome.was_unknown else ""
        say(
            f"recorded {outcome.ref}@{short(outcome.version)} as the lineage of that source "
            f"data{cleared}"
        )
    else:
        say(
            f"{outcome.ref}@{short(outcome.version)} is already its recorded lineage; "
            "nothing written"
        )
    return 0
