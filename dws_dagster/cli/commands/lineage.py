"""`lineage`: upstream, downstream and last run of a ref, now or in a snapshot, as text, JSON,
DOT, Mermaid or the offline HTML page.

Read-only and run often, so it imports no dagster or pyspark: the views it renders are
imported when it runs. Each format is written the way that keeps data from driving the
terminal: JSON and HTML escape what they hold, text goes line by line, DOT and Mermaid put a
value's newlines in their own syntax.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import json_text, say, say_lines, say_text, write_exact
from dws_dagster.workspace.files import writing


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    p = add_command(
        subparsers, parents, "lineage", cmd_lineage, "upstream, downstream and last run of a ref"
    )
    p.add_argument("ref", metavar="REF", help="RESOURCE or RESOURCE/SUBPATH")
    p.add_argument("--snapshot", metavar="S", help="from a snapshot instead of the current state")
    p.add_argument("--format", choices=("text", "json", "dot", "mermaid", "html"), default="text")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref on its own line (by default the partitions one step "
        "wrote, or the files of one source folder, are one line)",
    )


def cmd_lineage(args: argparse.Namespace) -> int:
    from dws_dagster.replay.record import latest_replay
    from dws_dagster.snapshots.index import resolve_snapshot, snapshot_manifest
    from dws_dagster.views.diagrams import render_dot, render_html, render_mermaid
    from dws_dagster.views.graph import SnapshotView, build_graph
    from dws_dagster.views.lineage_text import grouped_text_lines, render_grouped_text
    from dws_dagster.views.report import render_json, render_text, text_lines
    from dws_dagster.workspace.refs import ResourceRef

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
