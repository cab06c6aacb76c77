"""Which files under a ref are its data, found without following anything dangerous.

Hidden and bookkeeping files (`.*`, `_*` such as `_SUCCESS`, `*.crc`) are skipped, as Spark
and Hadoop skip them when reading. Only regular files (also through a symlink) are data: named
pipes, sockets, devices, dangling symlinks and symlink loops are skipped with one
`SpecialFileWarning` naming them, since opening a named pipe would block until someone writes
to it, so anyone able to create one in a source folder could stall every step reading it. Each
file is checked before it is opened and again, on the open descriptor, after (it may be swapped
for a pipe in between); it is opened non-blocking, so that check cannot hang. The walk keeps an
explicit stack, so a folder deeper than Python's recursion limit is walked too.

The content versions (`versions`) hash what this module finds.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from dws_dagster.errors import DataNotFoundError, DataReadError

#: dws_dagster's own bookkeeping beside data (`.dws/`, `.dws-old-*`, `.dws-staging-*`).
BOOKKEEPING_PREFIX = ".dws"

#: Told what versioning skipped (one message naming the files); default: a SpecialFileWarning.
SkipReporter = Callable[[str], None]

#: Non-blocking: a file swapped for a named pipe after it was checked must not block the open.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


#: Names shown in one skip warning; the rest are counted.
_SHOWN_SKIPPED = 10


#: What `Path.is_file()` treats as "not there" rather than an error.
MISSING_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


#: Spark: part-00000-<uuid>[_00000][-c000].<ext>; the UUID changes on every write.
_SPARK_PART = re.compile(
    r"^part-\d{5,}-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}(?:_\d+)?(?:[.-]c\d{3,})?"
    r"(?P<ext>\..*)?$"
)


class SpecialFileWarning(UserWarning):
    """Versioning skipped files under a ref that are not data: pipes, sockets, devices,
    dangling symlinks, symlink loops.

    Examples:
        .. code-block:: python

            import warnings

            from dws_dagster import SpecialFileWarning, Workspace

            ws = Workspace.open()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", SpecialFileWarning)
                version = ws.version_of("source-data/trips")  # a named pipe there is skipped
            skipped = [w for w in caught if issubclass(w.category, SpecialFileWarning)]

        To refuse such folders instead, make it an error:
        `warnings.simplefilter("error", SpecialFileWarning)`.
    """


def warn_skipped(message: str) -> None:
    """The default `SkipReporter`: Python's warnings, shown once per message by default."""
    warnings.warn(SpecialFileWarning(message), stacklevel=4)


def report_skipped(
    path: Path, skipped: list[tuple[str, str]], on_skip: SkipReporter | None
) -> None:
    if not skipped:
        return
    shown = ", ".join(
        f"{printable_path(rel or path.name)} ({what})" for rel, what in skipped[:_SHOWN_SKIPPED]
    )
    more = len(skipped) - _SHOWN_SKIPPED
    message = (
        f"skipped {len(skipped)} file(s) under {printable_path(path)} that are not data: {shown}"
        f"{f' and {more} more' if more > 0 else ''}; they are not part of its version "
        "(move or delete them to silence this)"
    )
    (on_skip or warn_skipped)(message)


def printable_path(path: str | os.PathLike[str]) -> str:
    """A path for a message: a name that is not UTF-8 (bytes on POSIX) shown with its bytes
    escaped (`\\xe9`), so the message can be printed, logged and put in JSON as it is."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _special_kind(mode: int) -> str:
    """What a non-regular, non-folder file is, for a message."""
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "special file"


def describe_special(path: str) -> str:
    """Why `path` (not a regular file nor a folder, following links) is not data."""
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return "vanished"
    try:
        kind = _special_kind(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "dangling symlink" if link else "vanished"
        return f"unreadable: {exc.strerror or exc}"
    return f"symlink to a {kind}" if link else kind


def special_names(folder: str | os.PathLike[str]) -> set[str]:
    """Names in `folder` that are neither regular files nor folders (following links): what
    versions skip as not data. From the listing's file types: no call per plain file."""
    found = set()
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                try:
                    if entry.is_file() or entry.is_dir():
                        continue
                except OSError:
                    pass
                found.add(entry.name)
    except OSError:
        pass
    return found


def read_error(path: str, exc: OSError) -> DataReadError:
    return DataReadError(
        f"cannot read data file {printable_path(path)}: {exc.strerror or exc}; fix its "
        "permissions or move it out of the data folder, then re-run"
    )


class FileEntry(NamedTuple):
    """One data file of a ref: its path relative to the ref and what the version hashes
    (a named tuple: made once per file, and a frozen dataclass takes twice as long)."""

    relpath: str
    size: int
    digest: str


def is_ignored_name(name: str) -> bool:
    """Files and folders Spark and Hadoop ignore when reading, so versions ignore them too."""
    return name.startswith((".", "_")) or name.endswith(".crc")


def stable_name(name: str) -> str:
    """Spark's part-file name without its per-write UUID and part number."""
    if not name.startswith("part-"):
        return name
    match = _SPARK_PART.match(name)
    return f"part-*{match.group('ext') or ''}" if match else name


def iter_data_files(
    path: Path, *, exclude_top: Iterable[str] = (), on_skip: SkipReporter | None = None
) -> list[tuple[str, Path]]:
    """(relative path, absolute path) of every data file under `path`, sorted, symlinks followed
    only for files."""
    skipped: list[tuple[str, str]] = []
    found = data_file_entries(path, exclude_top, skipped=skipped)
    report_skipped(path, skipped, on_skip)
    return [(rel, Path(absolute)) for rel, absolute in found]


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """'file', 'dir', 'other' or None (missing) from one stat call, following symlinks, where
    `is_file()` then `is_dir()` took two (versioning many small refs is bound by such calls)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno in MISSING_ERRNOS:
            return None
        raise
    except ValueError:
        return None
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def data_file_entries(
    path: str | os.PathLike[str],
    exclude_top: Iterable[str],
    kind: str | None = "?",
    *,
    skipped: list[tuple[str, str]],
    sidecars: list[tuple[str, str]] | None = None,
) -> list[tuple[str, str]]:
    """`iter_data_files` on plain strings: a walk of many small files spends its time on
    per-file overhead, so no Path object is made per file. `kind` is `file_kind(path)` if known.
    What is not data is added to `skipped` as (relative path, what it is); `sidecars`, if
    given, collects the files versions skip by name (`_SUCCESS`, `.crc`, `_dws_version.json`)
    in the folders they do enter: not data, but part of what a restore must bring back."""
    if kind == "?":
        kind = file_kind(path)
    if kind == "file":
        return [("", str(path))]
    if kind == "other":
        raise DataNotFoundError(
            f"{path} is a {describe_special(os.fspath(path))}, not a data file or folder, so "
            "it has no version; replace it with the data"
        )
    if kind != "dir":
        raise DataNotFoundError(f"{path} does not exist, so it has no version")
    found: list[tuple[str, str]] = []
    _walk(os.fspath(path), "", frozenset(exclude_top), found, skipped, sidecars)
    return found


def _walk(
    folder: str,
    prefix: str,
    excluded: frozenset[str],
    found: list[tuple[str, str]],
    skipped: list[tuple[str, str]],
    sidecars: list[tuple[str, str]] | None = None,
) -> None:
    """Files of `folder` (sorted), then its subfolders in name order, as `os.walk` visits
    them: unreadable folders are skipped and symlinked folders are not entered; what is
    neither a regular file nor a folder (following links) goes to `skipped`. Entries of a
    plain folder know their type from the listing, so this costs no call per file.

    An explicit stack, not recursion: data nested deeper than Python's recursion limit is
    versioned like any other (see `trees`)."""
    pending = [(folder, prefix)]
    while pending:
        folder, prefix = pending.pop()
        try:
            with os.scandir(folder) as scan:
                entries = list(scan)
        except OSError:
            continue
        files: list[str] = []
        folders: list[str] = []
        for entry in entries:
            name = entry.name
            if is_ignored_name(name) or (not prefix and name in excluded):
                if sidecars is not None and not name.startswith(BOOKKEEPING_PREFIX):
                    try:
                        if entry.is_file(follow_symlinks=False):
                            sidecars.append((prefix + name, entry.path))
                    except OSError:
                        pass
                continue
            try:
                if entry.is_file():
                    files.append(name)
                    continue
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if not is_dir:
                skipped.append((prefix + name, describe_special(entry.path)))
            elif not entry.is_symlink():
                folders.append(name)
        base = folder + os.sep
        for name in sorted(files):
            found.append((prefix + name, base + name))
        # Pushed last-first, so the first subfolder (by name) is walked next, whole.
        pending.extend((base + name, f"{prefix}{name}/") for name in sorted(folders, reverse=True))


def open_data(path: str) -> int | None:
    """A non-blocking descriptor of the file at `path`, None if it is gone (or a broken link)."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno in MISSING_ERRNOS:
            return None
        raise read_error(path, exc) from None


def open_regular(path: str) -> int | None:
    """A descriptor of the regular file at `path`, or None if it is no longer one (swapped for
    a pipe or a device since it was checked: opened non-blocking, so that cannot hang)."""
    fd = open_data(path)
    if fd is None:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return fd
