"""`dws-dagster`: the command line's parser and dispatch (`main`, the console script).

The commands live by job in the modules `build_parser` takes their handlers from. This module
and those import only the workspace layer, never dagster or pyspark, so that lineage and
status commands start fast; the commands that need either import it when they run.

No failure prints a traceback: each is one line on stderr and an exit code: 1 for a refusal
(`DwsError`) or a file the system would not read or write (named, with what to do), 2 for a
command line argparse rejects, 130 for Ctrl-C, and 70 (EX_SOFTWARE) for an internal error,
a bug to report; `DWS_DEBUG=1` in the environment prints its traceback too. `status --verify`
exits 3 (`EXIT_ATTENTION`) when refs need attention.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dws_dagster.cli.failures import one_line, os_error_message, show_warning
from dws_dagster.cli.openlineage_commands import cmd_ol_deliver, cmd_ol_replay, cmd_ol_status
from dws_dagster.cli.output import terminal_safe_output, utf8_tolerant_output
from dws_dagster.cli.replay_command import cmd_replay
from dws_dagster.cli.snapshot_commands import cmd_delete_snapshot, cmd_gc, cmd_restore, cmd_snapshot
from dws_dagster.cli.view_commands import (
    EXIT_ATTENTION,
    cmd_diff,
    cmd_history,
    cmd_lineage,
    cmd_status,
    cmd_version,
)
from dws_dagster.cli.workspace_commands import cmd_add, cmd_forget, cmd_init, cmd_observe
from dws_dagster.errors import DwsError
from dws_dagster.workspace.resources import ROLES, VERSIONING_MODES
from dws_dagster.workspace.store.gc_pause import gc_paused

Handler = Callable[[argparse.Namespace], int]

#: Exit codes besides 0, 1 (refused), 2 (bad command line, from argparse) and
#: `EXIT_ATTENTION` (`status --verify`).
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


def cmd_demo(args: argparse.Namespace) -> int:
    """`demo`, imported when it runs: its modules load the example project, a progress bar and
    the lineage page, which no other command needs."""
    from dws_dagster.cli.demo import run_demo

    return run_demo(
        Path(args.directory),
        small=args.small,
        months=args.months,
        trips_per_month=args.trips_per_month,
    )


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace",
        "-w",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="workspace folder (default: search upward from the current one)",
    )
    fmt = argparse.ArgumentParser(add_help=False)
    fmt.add_argument("--format", choices=("text", "json"), default="text")

    parser = argparse.ArgumentParser(
        prog="dws-dagster",
        parents=[common],
        description="Data Workspaces lineage for Dagster and PySpark: resources, versions, "
        "lineage and snapshots.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(
        name: str, handler: Handler, help_text: str, *, formats: bool = False, group: Any = sub
    ) -> argparse.ArgumentParser:
        parents = [common, fmt] if formats else [common]
        command = group.add_parser(name, parents=parents, help=help_text, description=help_text)
        command.set_defaults(handler=handler)
        return command

    p = add("init", cmd_init, "create .dataworkspace/ in DIR (default: here)")
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

    p = add("add", cmd_add, "register a resource of the workspace")
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

    p = add(
        "status",
        cmd_status,
        "resources, refs, versions, failed and unknown refs. The "
        "refs of a resource are every ref of it the lineage names: those a step wrote or "
        "that were observed, and those steps read that have no lineage of their own "
        "(source data read as found); code a step ran is recorded with the step, not as "
        "refs",
        formats=True,
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="re-hash the data of every ref and compare it with the version its "
        "lineage says (source data only read: the version read); then say "
        f"what needs attention and what to run. Exit code {EXIT_ATTENTION} "
        "when anything needs attention (drift, missing data, failed or "
        "unknown refs), 0 when nothing does",
    )
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref on its own line (by default the partitions one step "
        "wrote, or the files of one source folder, are one line)",
    )

    p = add("lineage", cmd_lineage, "upstream, downstream and last run of a ref")
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

    p = add(
        "snapshot",
        cmd_snapshot,
        "snapshot the workspace: lineage, every ref's data (retained), code, results",
        formats=True,
    )
    p.add_argument("tag", nargs="?", metavar="TAG")
    p.add_argument("-m", "--message", default="")

    p = add(
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

    p = add(
        "replay",
        cmd_replay,
        "reproduce a snapshot's results from their lineage in a scratch workspace, and say "
        "which reproduced (exit 3 when any did not)",
        formats=True,
    )
    p.add_argument("snapshot", metavar="TAG|HASH|PREFIX")
    p.add_argument("refs", nargs="*", metavar="REF", help="default: the snapshot's results")
    p.add_argument(
        "--into",
        metavar="DIR",
        help="the scratch workspace, a new or empty folder (default: under "
        ".dataworkspace/replays/)",
    )
    p.add_argument(
        "--definitions",
        metavar="MODULE",
        help="the Dagster code location's definitions, as `dg dev -m` takes them (default: "
        "from pyproject.toml or workspace.yaml)",
    )
    p.add_argument(
        "--in-place",
        action="store_true",
        help="then make the snapshot current in this workspace with the replay's data, as "
        "restore does (all or nothing; only when every ref reproduced)",
    )

    p = add("gc", cmd_gc, "free retained data no snapshot references", formats=True)
    p.add_argument("--dry-run", action="store_true", help="report what would be freed")

    p = add("diff", cmd_diff, "what changed between two snapshots", formats=True)
    p.add_argument("a", metavar="A", help="snapshot tag, hash or prefix")
    p.add_argument(
        "b", metavar="B", nargs="?", default="current", help="snapshot, or 'current' (default)"
    )
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref and input on its own line (by default the partitions "
        "of one step that changed alike are one entry)",
    )

    add("history", cmd_history, "list snapshots, newest first", formats=True)

    p = add("delete-snapshot", cmd_delete_snapshot, "delete a snapshot")
    p.add_argument("snapshot", metavar="TAG|HASH|PREFIX")
    p.add_argument(
        "--remove-results", action="store_true", help="also delete the snapshot's results copies"
    )

    p = add("forget", cmd_forget, "drop a ref's lineage so another step may write it")
    p.add_argument("ref", metavar="REF")

    p = add(
        "observe",
        cmd_observe,
        "record source data's version now as its lineage (clears "
        "unknown after a partial restore); refs a step writes recover by re-running it",
        formats=True,
    )
    p.add_argument("ref", metavar="REF")

    p = add(
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

    p = add("version", cmd_version, "content version of a ref's data now", formats=True)
    p.add_argument("ref", metavar="REF")

    ol_help = "OpenLineage events for catalogs: outbox status, deliver now, replay the archive"
    p = sub.add_parser("openlineage", help=ol_help, description=ol_help)
    ol = p.add_subparsers(dest="ol_command", metavar="ACTION", required=True)

    def add_ol(
        name: str, handler: Handler, help_text: str, *, formats: bool = False
    ) -> argparse.ArgumentParser:
        return add(name, handler, help_text, formats=formats, group=ol)

    add_ol(
        "status", cmd_ol_status, "pending and delivered events, last error, transport", formats=True
    )
    q = add_ol(
        "deliver",
        cmd_ol_deliver,
        "send pending events now (ignores the backoff wait)",
        formats=True,
    )
    q.add_argument(
        "--budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="start no event after this long (default: 60)",
    )
    q.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="give up on an event the catalog has not fully answered after this long, "
        "however slowly it answers; it stays pending (default: 30)",
    )
    q = add_ol("replay", cmd_ol_replay, "send archived events again, e.g. to a new catalog")
    q.add_argument(
        "--since",
        metavar="WHEN",
        help="only events whose eventTime is at or after WHEN (ISO-8601 date or "
        "datetime; UTC unless it names a zone)",
    )
    q.add_argument("--dry-run", action="store_true", help="only count the events")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        utf8_tolerant_output()
    parser = build_parser()
    # Whatever the command, its renderers and argparse print, stdout and stderr escape what
    # could drive the terminal (data holds escapes, bidi overrides, newlines; a usage error
    # repeats the argument it refuses); see `output`.
    with terminal_safe_output():
        try:
            args = parser.parse_args(argv)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        # `--workspace` is accepted before and after the command; its action is shared by all
        # the parsers (parents=), so no parser may give it a default, or that default would
        # override a value given before the command.
        if not hasattr(args, "workspace"):
            args.workspace = None
        return _run(args, argv)


def _run(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """The command `args` names, each failure as one line on stderr with its exit code."""
    try:
        # A command lives for seconds and builds large acyclic structures from JSON; the
        # cyclic garbage collector would only walk them again and again.
        with gc_paused(), warnings.catch_warnings():
            warnings.showwarning = show_warning
            code = int(args.handler(args))
        if argv is None:
            # Run as the command (arguments from sys.argv), the process exits next: freezing
            # spares it the full collection Python makes at exit. Frozen objects are still
            # freed when unused.
            gc.freeze()
        return code
    except DwsError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file the system refused that no layer named: still the user's
        print(f"error: {one_line(os_error_message(exc))}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: one line, not a traceback, and a distinct exit code
        if os.environ.get("DWS_DEBUG"):
            for line in traceback.format_exc().splitlines():
                print(line, file=sys.stderr)
        print(
            f"internal error: {type(exc).__name__}: {one_line(str(exc))}; please report "
            "it (DWS_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
