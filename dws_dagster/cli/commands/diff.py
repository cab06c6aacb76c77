"""`diff`: what changed in the lineage between two snapshots, or a snapshot and now.

Read-only: imports no dagster or pyspark, and the views it renders only when it runs.
"""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import print_json, say


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers, parents, "diff", cmd_diff, "what changed between two snapshots", formats=True
    )
    p.add_argument("a", metavar="A", help="snapshot tag, hash or prefix")
    p.add_argument(
        "b", metavar="B", nargs="?", default="current", help="snapshot, or 'current' (default)"
    )
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref and input on its own line (by default the partitions "
        "of one step that changed alike are one entry)",
    )


def cmd_diff(args: argparse.Namespace) -> int:
    from dws_dagster.snapshots.diff import diff_lineage
    from dws_dagster.snapshots.index import CURRENT, resolve_snapshot
    from dws_dagster.views.diff_text import diff_text

    ws = open_workspace(args)
    changes = diff_lineage(ws, args.a, args.b)
    if args.format == "json":
        print_json([{"ref": c.ref, "kind": c.kind, "changes": c.changes} for c in changes])
        return 0
    if not changes:
        say(f"no differences between {args.a} and {args.b}")
        return 0

    def owners(name: str) -> list[tuple[str, str | None]]:
        return ws.store.owners(None if name == CURRENT else resolve_snapshot(ws, name).hash)

    for line in diff_text(changes, owners(args.a), owners(args.b), expand=args.expand):
        say(line)
    return 0
