"""The commands that set a workspace up or correct its lineage by hand: `init`, `add`,
`forget` and `observe`.

Each changes the workspace's configuration or one ref's lineage, outside any step, and says
what it did in one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import print_json, say
from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace.versions import short
from dws_dagster.workspace.workspace import Workspace


def cmd_init(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.store.database import database_for
    from dws_dagster.workspace.store.settings import resolve, store_entry

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


def cmd_forget(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef

    ws = open_workspace(args)
    ref = ws.check_ref(ResourceRef.parse(args.ref))
    if ws.store.forget(ref):
        say(f"forgot the lineage of {ref}; its data is untouched")
    else:
        say(f"{ref} has no lineage; nothing to forget")
    return 0


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
