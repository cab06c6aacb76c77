"""`dws-dagster`: the command line's parser, assembled from the command modules, and dispatch
(`main`, the console script).

Each command is a module of `cli/commands/` that declares its own arguments and handler
(`command.py` says how); this module only puts them under one parser, in `COMMANDS`' order
(the order `--help` lists them), and runs the one the command line names. It and they import
only the workspace layer, never dagster or pyspark, so that lineage and status commands start
fast; the commands that need either import it when they run.

No failure prints a traceback: each is one line on stderr and an exit code: 1 for a refusal
(`DwsError`) or a file the system would not read or write (named, with what to do), 2 for a
command line argparse rejects, 130 for Ctrl-C, and 70 (EX_SOFTWARE) for an internal error,
a bug to report; `DWS_DEBUG=1` in the environment prints its traceback too. `status --verify`
and `replay` exit 3 (`EXIT_ATTENTION`) when refs need attention.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback
import warnings
from collections.abc import Sequence

from dws_dagster.cli.command import CommandParser, Parents
from dws_dagster.cli.commands import (
    add,
    delete_snapshot,
    demo,
    diff,
    forget,
    history,
    init,
    lineage,
    observe,
    openlineage,
    replay,
    restore,
    snapshot,
    status,
    version,
)
from dws_dagster.cli.commands import gc as gc_command
from dws_dagster.cli.failures import one_line, os_error_message, show_warning
from dws_dagster.cli.output import terminal_safe_output, utf8_tolerant_output
from dws_dagster.errors import DwsError
from dws_dagster.store.gc_pause import gc_paused

#: The commands, in the order `dws-dagster --help` lists them.
COMMANDS = [
    init,
    add,
    status,
    lineage,
    snapshot,
    restore,
    replay,
    gc_command,
    diff,
    history,
    delete_snapshot,
    forget,
    observe,
    demo,
    version,
    openlineage,
]

#: Exit codes besides 0, 1 (refused), 2 (bad command line, from argparse) and
#: `EXIT_ATTENTION` (`status --verify`, `replay`).
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parents = Parents.make()
    parser = CommandParser(
        prog="dws-dagster",
        parents=[parents.common],
        description="Data Workspaces lineage for Dagster and PySpark: resources, versions, "
        "lineage and snapshots.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub, parents)
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
