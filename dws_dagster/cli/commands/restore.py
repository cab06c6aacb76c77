"""`restore`: bring back a snapshot's lineage and data (all or nothing, or `--partial`), and
the code's files kept in git only when asked, with a bar while it copies.

It may bring back remote data (through Spark, started only when a remote ref needs it).
"""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace, remote_data
from dws_dagster.cli.output import print_json, progress_bar


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "restore",
        cmd_restore,
        "bring back a snapshot's lineage and data, or change nothing",
        formats=True,
    )
    p.add_argument("snapshot", metavar="TAG|HASH|PREFIX")
    p.add_argument(
        "--partial",
        action="store_true",
        help="when some refs' data cannot be brought back, restore the rest and mark "
        "those unknown (by default nothing is changed)",
    )
    p.add_argument(
        "--code",
        action="store_true",
        help="also put back the files of code resources kept in git (by default "
        "git's checkout is left alone and the commit to check out is named)",
    )


def cmd_restore(args: argparse.Namespace) -> int:
    from dws_dagster.snapshots.restore import restore_snapshot

    ws = open_workspace(args)
    bar = progress_bar(None, "restoring", unit="ref")
    try:
        report = restore_snapshot(
            ws,
            args.snapshot,
            progress=lambda ref: bar.update(1),
            partial=args.partial,
            code=args.code,
            remote=remote_data(),
        )
    finally:
        bar.close()
    if args.format == "json":
        print_json(
            {
                "snapshot": report.info.to_json(),
                "lineage_restored": report.lineage_restored,
                "lineage_removed": report.lineage_removed,
                "data_unchanged": report.data_unchanged,
                "data_restored": report.data_restored,
                "not_restored": [{"ref": r, "reason": why} for r, why in report.not_restored],
                "code_left": [{"ref": r, "reason": why} for r, why in report.code_left],
            }
        )
        return 0
    print(
        f"restored snapshot {report.info.name} ({report.info.hash[:12]}): lineage of "
        f"{len(report.lineage_restored)} ref(s); data of {len(report.data_restored)} "
        f"brought back, {len(report.data_unchanged)} already as it was"
    )
    for ref in report.data_restored:
        print(f"  data restored:  {ref}")
    for ref in report.data_unchanged:
        print(f"  data unchanged: {ref}")
    for ref in report.lineage_removed:
        print(f"  lineage removed (not in snapshot): {ref}")
    for ref, why in report.not_restored:
        print(f"  NOT restored:   {ref}: marked unknown: {why}")
    for ref, why in report.code_left:
        print(f"  code left as is: {ref}: {why}")
    return 0
