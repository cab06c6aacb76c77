"""`add`: register a resource of the workspace, a local folder or a remote URI, with its role
and how its data is versioned."""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import say
from dws_dagster.workspace.resources import ROLES, VERSIONING_MODES


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(subparsers, parents, "add", cmd_add, "register a resource of the workspace")
    p.add_argument("name")
    p.add_argument("--role", required=True, choices=ROLES)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--path", help="local folder (stored relative to the workspace root)")
    where.add_argument("--uri", help="object-store or HDFS URI (s3a://, abfss://, hdfs://, ...)")
    p.add_argument(
        "--versioning",
        choices=VERSIONING_MODES,
        default="content",
        help="content: hash the bytes (default); listing: names, sizes and times",
    )
    p.add_argument("--description")


def cmd_add(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    resource = ws.add_resource(
        args.name,
        args.role,
        path=args.path,
        uri=args.uri,
        versioning=args.versioning,
        description=args.description or "",
    )
    say(f"added {resource.role} resource '{resource.name}' at {resource.location}")
    return 0
