"""The commands over snapshots: `snapshot`, `restore`, `delete-snapshot` and `gc`.

They are the ones that copy, bring back or free data, so they may need remote data (through
Spark, started only when a remote ref needs it) and show a bar while they work.
"""

from __future__ import annotations

import argparse
import sys

from dws_dagster.cli.context import open_workspace, remote_data
from dws_dagster.cli.output import print_json, progress_bar
from dws_dagster.workspace.versions import short


def cmd_snapshot(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.retention import describe as describe_retention
    from dws_dagster.workspace.snapshots.snapshots import take_snapshot

    ws = open_workspace(args)
    outcome = take_snapshot(ws, args.tag, args.message or "", remote=remote_data())
    info = outcome.info
    if args.format == "json":
        # `created` is the snapshot's time (from `to_json`): whether this call took it is
        # `new_snapshot`.
        retention = outcome.retention
        print_json(
            {
                **info.to_json(),
                "new_snapshot": outcome.created,
                "tag_added": outcome.tag_added,
                "warnings": outcome.warnings,
                "drift": outcome.drift,
                "retention": None if retention is None else vars(retention),
            }
        )
        return 0
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if outcome.created:
        tags = f" tagged {', '.join(info.tags)}" if info.tags else ""
        print(f"took snapshot {info.hash[:12]}{tags}")
        for entry in info.results:
            print(f"  archived results {entry['ref']} in {entry['folder']}/ (with lineage.json)")
        if info.metrics:
            print("  metrics: " + ", ".join(f"{k}={v}" for k, v in info.metrics.items()))
        if outcome.retention is not None:
            print(f"  data retained: {describe_retention(outcome.retention)}")
        for ref in outcome.drift:
            print(f"  drift: {ref} changed outside any step (recorded as found)")
    elif outcome.tag_added:
        print(f"nothing changed since snapshot {info.hash[:12]}; added tag {args.tag} to it")
    else:
        print(f"nothing changed since snapshot {info.name} ({info.hash[:12]}); nothing written")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.restore import restore_snapshot

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


def cmd_gc(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.garbage import collect_garbage

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


def cmd_delete_snapshot(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.history import delete_snapshot

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
