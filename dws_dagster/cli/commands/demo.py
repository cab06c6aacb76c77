"""`demo`: the example NYC taxi forecast (Dagster + Spark) run end to end in a folder, then its
lineage and metrics shown.

The demo itself (`cli/demo/`) is imported when the command runs: it loads the example
project, a progress bar and the lineage page, which no other command needs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dws_dagster.cli.command import Parents, Subparsers, add_command


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "demo",
        cmd_demo,
        "run the example NYC taxi forecast (Dagster + Spark) end to end "
        "in DIR, then show its lineage and metrics",
    )
    p.add_argument("directory", nargs="?", default="dws-demo", metavar="DIR")
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--small", action="store_true", help="the smallest run: 15 days, 12 zones (about a minute)"
    )
    size.add_argument(
        "--months", type=int, metavar="N", help="months of synthetic data (default: 2)"
    )
    p.add_argument(
        "--trips-per-month",
        type=int,
        metavar="N",
        help="synthetic trips per month (default: 100000)",
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from dws_dagster.cli.demo.pipeline import run_demo

    return run_demo(
        Path(args.directory),
        small=args.small,
        months=args.months,
        trips_per_month=args.trips_per_month,
    )
