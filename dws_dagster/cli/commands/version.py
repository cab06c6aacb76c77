"""`version`: the content version of a ref's data now, hashed with a progress bar, and whether
it matches what its lineage says. Read-only."""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import print_json, progress_bar, say


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers,
        parents,
        "version",
        cmd_version,
        "content version of a ref's data now",
        formats=True,
    )
    p.add_argument("ref", metavar="REF")


def cmd_version(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef
    from dws_dagster.workspace.versions import data_size

    ws = open_workspace(args)
    ref = ws.check_ref(ResourceRef.parse(args.ref))
    path = ws.local_path(ref)
    # Files that are not data are told once, by the version below.
    total = data_size(path, on_skip=lambda message: None) if path.exists() else None
    bar = progress_bar(total, f"hashing {ref}", unit="B", unit_scale=True)
    try:
        version = ws.version_of(ref, progress=bar.update)
    finally:
        bar.close()
    state = ws.store.get(ref)
    recorded = state.version if state is not None else None
    if args.format == "json":
        print_json({"ref": str(ref), "version": version, "recorded": recorded})
    else:
        note = (
            ""
            if recorded is None
            else (
                " (matches its lineage)" if recorded == version else f" (lineage says {recorded})"
            )
        )
        say(f"{ref}@{version}{note}")
    return 0
