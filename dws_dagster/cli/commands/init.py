"""`init`: create a workspace (`.dataworkspace/`), its lineage in SQLite there or in a
PostgreSQL store named by URL, reached before anything is written."""

from __future__ import annotations

import argparse
from pathlib import Path

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.output import say
from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace.definition import Workspace


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers, parents, "init", cmd_init, "create .dataworkspace/ in DIR (default: here)"
    )
    p.add_argument("directory", nargs="?", default=".", metavar="DIR")
    p.add_argument("--name", help="workspace name (default: the folder's name)")
    p.add_argument(
        "--store",
        metavar="URL",
        help="a PostgreSQL store for the lineage (postgresql://user@host:port/db, "
        "no password; default: SQLite in .dataworkspace/)",
    )
    p.add_argument(
        "--store-password-env",
        metavar="VAR",
        help="environment variable holding the store's password",
    )
    p.add_argument(
        "--store-schema",
        metavar="NAME",
        help="PostgreSQL schema for the store's tables (default: the user's)",
    )


def cmd_init(args: argparse.Namespace) -> int:
    from dws_dagster.store.database import database_for
    from dws_dagster.store.settings import resolve, store_entry

    entry = None
    if args.store:
        entry = store_entry(
            args.store, password_env=args.store_password_env, schema=args.store_schema
        )
        # Reached before anything is written: a wrong URL or password leaves no workspace.
        root = Path(args.directory).absolute()
        database_for(resolve(root / ".dataworkspace", entry)).ensure_schema()
    elif args.store_password_env or args.store_schema:
        raise WorkspaceConfigError("--store-password-env and --store-schema go with --store URL")
    ws = Workspace.init(args.directory, name=args.name, store=entry)
    ws.store.workspace_id  # noqa: B018  (registers the workspace in its store now)
    say(f"initialised workspace '{ws.name}' in {ws.root}")
    say(f"lineage store: {ws.store.shown}")
    return 0
