"""The read-only commands: `status`, `lineage`, `diff`, `history` and `version`.

They show the lineage and the data as they are and change neither (`status` only finishes a
restore that was interrupted). They are the ones run often and interactively, so nothing
here imports dagster or pyspark: each command imports the views it renders when it runs.
`status --verify` exits `EXIT_ATTENTION` when refs need attention (data changed outside
steps, missing, failed or unknown refs), after printing what to run; 0 when the data is what
the lineage says.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dws_dagster.cli.context import open_workspace, remote_data
from dws_dagster.cli.output import (
    json_text,
    print_json,
    progress_bar,
    say,
    say_lines,
    say_text,
    write_exact,
)
from dws_dagster.workspace.files import writing
from dws_dagster.workspace.workspace import RESTORE_INTENT_FILE, Workspace

#: `status --verify` found refs that need attention (drift, missing data, failed, unknown).
EXIT_ATTENTION = 3


def _status_rows(ws: Workspace, verify: bool) -> list[dict[str, Any]]:
    from dws_dagster.workspace.views.status_rows import status_rows, verify_row

    rows = status_rows(ws)
    if verify:
        bar = progress_bar(len(rows), "verifying")
        try:
            for row in rows:
                verify_row(ws, row)
                bar.update(1)
        finally:
            bar.close()
    return rows


def cmd_status(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.views.status_report import StatusReport

    ws = open_workspace(args)
    if (ws.meta_dir / RESTORE_INTENT_FILE).exists():
        from dws_dagster.workspace.snapshots.restore import finish_interrupted_restore

        if finish_interrupted_restore(ws, remote_data()):
            say(
                "finished a restore that was interrupted (see 'dws-dagster history')",
                file=sys.stderr,
            )
    rows = _status_rows(ws, args.verify)
    report = StatusReport(rows, verified=args.verify)
    code = EXIT_ATTENTION if args.verify and report.verdict != "clean" else 0
    resources = []
    for res in ws.resources.values():
        count = sum(1 for row in rows if row["ref"].split("/", 1)[0] == res.name)
        resources.append({**res.to_json(), "refs": count})
    if args.format == "json":
        print_json(
            {
                "workspace": ws.name,
                "root": str(ws.root),
                "store": {"url": ws.store.shown, "from": ws.store_settings.origin},
                "resources": resources,
                "refs": rows,
                **report.to_json(),
                "exit_code": code,
            }
        )
        return code
    say(f"Workspace {ws.name} ({ws.root})")
    say(f"Lineage store: {ws.store.shown} (from {_origin(ws.store_settings.origin)})")
    say()
    say("Resources:")
    if not resources:
        say("  (none: add one with 'dws-dagster add')")
    for shown in resources:
        say(
            f"  {shown['name']:<20} {shown['role']:<18} {shown.get('path') or shown.get('uri')}"
            f"  [{shown['refs']} ref{'s' if shown['refs'] != 1 else ''}]"
        )
    say()
    say("Refs:")
    for line in report.refs_lines(expand=args.expand):
        say(line)
    lines = report.lines(expand=args.expand)
    if lines:
        say()
    for line in lines:
        say(line)
    return code


def _origin(origin: str) -> str:
    return {
        "default": "the default",
        "config.json": ".dataworkspace/config.json",
        "DWS_STORE_URL": "$DWS_STORE_URL",
    }.get(origin, origin)


def cmd_lineage(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef
    from dws_dagster.workspace.snapshots.history import resolve_snapshot, snapshot_manifest
    from dws_dagster.workspace.snapshots.replay_record import latest_replay
    from dws_dagster.workspace.views.graph import SnapshotView, build_graph
    from dws_dagster.workspace.views.lineage_text import grouped_text_lines, render_grouped_text
    from dws_dagster.workspace.views.render_diagram import render_dot, render_html, render_mermaid
    from dws_dagster.workspace.views.render_report import render_json, render_text, text_lines

    ws = open_workspace(args)
    ref = ws.check_ref(ResourceRef.parse(args.ref))
    roles = {name: res.role for name, res in ws.resources.items()}
    if args.snapshot:
        info = resolve_snapshot(ws, args.snapshot)
        view: Any = SnapshotView(snapshot_manifest(ws, info.hash), ws.store)
        graph = build_graph(view, ref, roles, snapshot=info.name)
        graph.replay = latest_replay(ws, info.hash)
    else:
        graph = build_graph(ws.store, ref, roles)
    renderers: dict[str, Callable[[Any], Any]] = {
        "text": render_text if args.expand else render_grouped_text,
        "dot": render_dot,
        "mermaid": render_mermaid,
        "html": render_html,
    }
    if args.format == "json":
        output = json_text(render_json(graph))
    else:
        output = renderers[args.format](graph)
    if args.output:
        with writing(args.output):
            Path(args.output).write_text(
                output + ("" if output.endswith("\n") else "\n"), encoding="utf-8"
            )
        say(f"wrote {args.format} lineage of {ref} to {args.output}")
    elif args.format in ("json", "html"):  # formats that escape what they hold
        write_exact(output + ("" if output.endswith("\n") else "\n"))
    elif args.format == "text":  # line by line: a newline in a value is data, escaped
        say_lines(text_lines(graph) if args.expand else grouped_text_lines(graph))
    else:  # DOT and Mermaid put a value's newlines in their own syntax
        say_text(output)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.diff import diff_lineage
    from dws_dagster.workspace.snapshots.history import CURRENT, resolve_snapshot
    from dws_dagster.workspace.views.diff_text import diff_text

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


def cmd_history(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.history import list_snapshots

    ws = open_workspace(args)
    infos = list(reversed(list_snapshots(ws)))
    if args.format == "json":
        print_json([info.to_json() for info in infos])
        return 0
    if not infos:
        say("no snapshots yet: take one with 'dws-dagster snapshot TAG'")
    for info in infos:
        tags = ",".join(info.tags) or "-"
        metrics = " ".join(f"{k}={v}" for k, v in (info.metrics or {}).items())
        say(
            f"{info.hash[:12]}  {info.created:<25}  {tags:<16}  {info.message}"
            f"{'  ' + metrics if metrics else ''}"
        )
    return 0


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
