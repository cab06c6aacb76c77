"""What a command module gives the parser, and the options every command shares.

Each module of `cli/commands/` is one verb, as in DVC's `dvc/commands/<verb>.py`: its
`add_parser(subparsers, parents)` declares the verb's arguments and help and sets its handler
(`args.handler`), a function of the parsed arguments that returns the exit code; `main`
assembles the parser from the list of those modules and runs the handler. So adding a verb
touches its own module and one line of `main`'s list.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

#: What `ArgumentParser.add_subparsers` returns, a command's `add_parser` adds its parser to.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler = Callable[[argparse.Namespace], int]


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, writing its help and usage a line at a time.

    The command line's streams escape a newline inside one write (data printed to a terminal
    may hold any character); argparse writes a whole help text in one, so written as it is
    its layout would show as `\\n`. Its error messages stay one write, so the argument it
    refuses is still shown escaped. Subcommands' parsers are of the same class (argparse
    makes them with its parent's)."""

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        self._write_lines(self.format_help(), file)

    def print_usage(self, file: SupportsWrite[str] | None = None) -> None:
        self._write_lines(self.format_usage(), file)

    @staticmethod
    def _write_lines(text: str, file: SupportsWrite[str] | None) -> None:
        stream = file if file is not None else sys.stdout
        for line in text.splitlines(keepends=True):
            stream.write(line)


#: Refs need attention: `status --verify` found drift, missing data, failed or unknown refs,
#: or `replay` did not reproduce every ref.
EXIT_ATTENTION = 3


@dataclass(frozen=True)
class Parents:
    """The options commands share, as argparse parent parsers: `common` (`--workspace`, which
    every command accepts before and after its name) and `formats` (`--format text|json`).

    Made once per parser: argparse copies a parent's actions by reference, and `--workspace`
    relies on that (see `main`)."""

    common: argparse.ArgumentParser
    formats: argparse.ArgumentParser

    @classmethod
    def make(cls) -> Parents:
        common = argparse.ArgumentParser(add_help=False)
        common.add_argument(
            "--workspace",
            "-w",
            metavar="DIR",
            default=argparse.SUPPRESS,
            help="workspace folder (default: search upward from the current one)",
        )
        formats = argparse.ArgumentParser(add_help=False)
        formats.add_argument("--format", choices=("text", "json"), default="text")
        return cls(common, formats)


def add_command(
    subparsers: Subparsers,
    parents: Parents,
    name: str,
    handler: Handler,
    help_text: str,
    *,
    formats: bool = False,
) -> argparse.ArgumentParser:
    """The parser of command `name`, with `--workspace` (and `--format text|json` when
    `formats`), `help_text` as its help and description, and `handler` as what it runs."""
    shared = [parents.common, parents.formats] if formats else [parents.common]
    command = subparsers.add_parser(name, parents=shared, help=help_text, description=help_text)
    command.set_defaults(handler=handler)
    return command
