"""`gc`: free the retained data no snapshot references, local and remote (beyond each
writer's `keep_versions`), and the leftovers of interrupted work; `--dry-run` only reports.

It reaches every remote resource, so it is refused on Spark Connect before it frees anything.
"""

from __future__ import annotations

import argparse

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace, remote_data
from dws_dagster.cli.output import print_json
from dws_dagster.workspace.versions import short


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers, parents, "gc", cmd_gc, "free retained data no snapshot references", formats=True
    )
    p.add_argument("--dry-run", action="store_true", help="report what would be freed")


def cmd_gc(args: argparse.Namespace) -> int:
    from dws_dagster.snapshots.garbage import collect_garbage

    ws = open_workspace(args)
    remote_uris = [str(res.uri) for res in ws.resources.values() if not res.is_local]
    if remote_uris:  # gc reaches every remote resource: refused before it frees anything
        from dws_dagster.spark.remote_data import refuse_remote_on_connect

        refuse_remote_on_connect(remote_uris[0])
    report = collect_garbage(ws, dry_run=args.dry_run, remote=remote_data())
    if args.format == "json":
        print_json(
            {
                "dry_run": report.dry_run,
                "versions": [{"ref": r, "version": v} for r, v in report.versions],
                "objects": report.objects,
                "bytes_freed": report.bytes_freed,
                "still_linked": report.still_linked,
                "leftovers": [str(p) for p in report.leftovers],
                "unnamed_results_copies": [str(p) for p in report.results_copies],
                "remote_versions": [{"ref": r, "version": v} for r, v in report.remote_versions],
            }
        )
        return 0
    verb = "would free" if report.dry_run else "freed"
    print(
        f"{verb} {len(report.versions)} retained version(s) no snapshot references: "
        f"{report.objects} file(s), {_bytes(report.bytes_freed)}"
        + (
            f" ({report.still_linked} still hard-linked from the workspace free nothing)"
            if report.still_linked
            else ""
        )
    )
    for ref, version in report.versions[:20]:
        print(f"  {ref}@{short(version)}")
    if len(report.versions) > 20:
        print(f"  ... and {len(report.versions) - 20} more")
    if report.leftovers:
        print(
            f"{'would remove' if report.dry_run else 'removed'} {len(report.leftovers)} "
            "leftover(s) of interrupted work"
        )
    for path in report.results_copies:
        print(
            f"not named by any snapshot (left by an interrupted snapshot?): {path}; delete "
            "it if it is not yours"
        )
    if report.remote_versions:
        print(
            f"{verb} {len(report.remote_versions)} kept remote version(s) no snapshot "
            "references (beyond each writer's keep_versions):"
        )
        for ref, version in report.remote_versions[:20]:
            print(f"  {ref}@{short(version)}")
        if len(report.remote_versions) > 20:
            print(f"  ... and {len(report.remote_versions) - 20} more")
    return 0


def _bytes(size: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} bytes"
