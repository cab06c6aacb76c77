"""Failures as the user reads them: one line on stderr, never a traceback.

`main` catches what a command raises and prints it with these: a refusal (`DwsError`) as its
message, an `OSError` no layer converted as the file it concerns and what to do, a warning
as one `warning:` line; every message on one line with unprintable characters escaped.
"""

from __future__ import annotations

import errno
import sys
from typing import Any

from dws_dagster.cli.output import terminal_text
from dws_dagster.workspace.files import first_os_error, write_error


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Warnings (files skipped as not data, ...) as one `warning:` line, not Python's two."""
    print(f"warning: {one_line(str(message))}", file=sys.stderr)


def os_error_message(exc: OSError) -> str:
    """An OSError nobody converted, as one line naming the file and what to do."""
    exc = first_os_error(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) and exc.filename is not None:
        return str(write_error(exc.filename, exc))  # with the free space and what to do
    names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
    reason = exc.strerror or str(exc)
    advice = {
        errno.ENOSPC: "free space, then re-run",
        errno.EDQUOT: "free space, then re-run",
        errno.EROFS: "remount it read-write, then re-run",
        errno.EACCES: "fix its permissions, then re-run",
        errno.EPERM: "fix its permissions, then re-run",
        errno.ENOENT: "check the path",
        errno.ENOTDIR: "check the path",
        errno.EISDIR: "name a file, not a folder",
        errno.EEXIST: "move it away or choose another path",
    }.get(exc.errno or 0, "fix the cause, then re-run")
    return f"{names}: {reason}; {advice}" if names else f"{reason}; {advice}"


def one_line(text: str) -> str:
    """A message on one line: a newline becomes a space, and any other character that could
    drive a terminal (in a file name, a tag: a line separator, a terminal escape) is shown
    escaped, as the CLI's writer shows it everywhere (`output.terminal_text`)."""
    return terminal_text(text.replace("\n", " "))
