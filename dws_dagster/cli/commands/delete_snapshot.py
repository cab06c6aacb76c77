"""`delete-snapshot`: delete a snapshot, or remove one of its tags when it has others; its
results copies only when asked. The data it retained is freed by `gc`."""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers, parents, "delete-snapshot", cmd_delete_snapshot, "delete a snapshot"
    )
    p.add_argument("snapshot", metavar="TAG|HASH|PREFIX")
    p.add_argument(
        "--remove-results", action="store_true", help="also delete the snapshot's results copies"
    )


def cmd_delete_snapshot(args: argparse.Namespace) -> int:
    from dws_dagster.snapshots.index import delete_snapshot

    ws = open_workspace(args)
    done = delete_snapshot(ws, args.snapshot, remove_results=args.remove_results)
    info = done.info
    if done.removed_tag is not None:
        kept = " (its results copies stay with it)" if args.remove_results else ""
        print(
            f"removed tag {done.removed_tag} from snapshot {info.hash[:12]} (still tagged "
            f"{', '.join(info.tags)}){kept}"
        )
    else:
        print(f"deleted snapshot {info.name} ({info.hash[:12]})")
    return 0
