"""Content versions of a ref's files.

A version is an xxh3-128 hash (python-xxhash) over a manifest of the data files under a ref:
each file's directory, its name with Spark's random part-file UUID removed, its size and the
xxh3-128 hash of its bytes, sorted. Hidden and bookkeeping files (`.*`, `_*` such as `_SUCCESS`,
`*.crc`) are skipped, as Spark and Hadoop skip them when reading. So identical content gives an
identical version whatever Spark named the files, and any byte change gives a new one.

Only regular files (also through a symlink) are data. Named pipes, sockets, devices, dangling
symlinks and symlink loops are skipped with one `SpecialFileWarning` naming them: opening a
named pipe would block until someone writes to it, so anyone able to create one in a source
folder could stall every step reading it; Spark does not read them as data either. Each file is
checked before it is opened and again, on the open descriptor, after (it may be swapped for a
pipe in between); it is opened non-blocking, so that check cannot hang.

xxh3-128 is not a cryptographic hash: it guards against accidental collisions (about 2^-64 for
a pair even across billions of versions), not against someone crafting two datasets to collide.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import xxhash

from dws_dagster.errors import DataNotFoundError, DataReadError
from dws_dagster.workspace import formats

CONTENT_PREFIX = ""
#: Written beside Spark output by the storage layer: the version Spark computed for the data
#: and the byte version of the files it describes (ignored by Spark and by byte versions).
MARKER_NAME = "_dws_version.json"
MARKER_SCHEME = "spark-logical-2"
#: Files beside Spark-written data that describe it (metrics, lineage) rather than hold it.
DESCRIPTION_FILES = ("results.json", "lineage.json")
#: The metrics file of a results step (Data Workspaces' layout: step, start_time,
#: execution_time_seconds, parameters, run_description, metrics).
RESULTS_FILE = "results.json"
#: Keys of a results file that say when its step ran, not what it wrote. A results file that
#: names them in `VERSION_LEAVES_OUT` (as the lineage API's `write_results` does) is versioned
#: without them, so that a step run again on the same inputs has the same version
#: (docs/files.md); the file keeps them, as Data Workspaces writes and reads them. A results
#: file without that key is versioned by its bytes, as every earlier release versioned it.
RUN_TIMING_KEYS = ("start_time", "execution_time_seconds")
VERSION_LEAVES_OUT = "version_leaves_out"
#: Results files larger than this are versioned by their bytes (metrics are small).
_MAX_TIMED_RESULTS_BYTES = 1 << 20
LISTING_PREFIX = "ls-"
#: dws_dagster's own bookkeeping beside data (`.dws/`, `.dws-old-*`, `.dws-staging-*`).
BOOKKEEPING_PREFIX = ".dws"
_CHUNK = 1 << 20
#: Non-blocking: a file swapped for a named pipe after it was checked must not block the open.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
#: Names shown in one skip warning; the rest are counted.
_SHOWN_SKIPPED = 10
#: What `Path.is_file()` treats as "not there" rather than an error.
_MISSING_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
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


#: Told what versioning skipped (one message naming the files); default: a SpecialFileWarning.
SkipReporter = Callable[[str], None]


def warn_skipped(message: str) -> None:
    """The default `SkipReporter`: Python's warnings, shown once per message by default."""
    warnings.warn(SpecialFileWarning(message), stacklevel=4)


def _report_skipped(
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


def _describe_special(path: str) -> str:
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


def _read_error(path: str, exc: OSError) -> DataReadError:
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
    found = _data_files(path, exclude_top, skipped=skipped)
    _report_skipped(path, skipped, on_skip)
    return [(rel, Path(absolute)) for rel, absolute in found]


def _kind(path: str | os.PathLike[str]) -> str | None:
    """'file', 'dir', 'other' or None (missing) from one stat call, following symlinks, where
    `is_file()` then `is_dir()` took two (versioning many small refs is bound by such calls)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno in _MISSING_ERRNOS:
            return None
        raise
    except ValueError:
        return None
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def _data_files(
    path: str | os.PathLike[str],
    exclude_top: Iterable[str],
    kind: str | None = "?",
    *,
    skipped: list[tuple[str, str]],
    sidecars: list[tuple[str, str]] | None = None,
) -> list[tuple[str, str]]:
    """`iter_data_files` on plain strings: a walk of many small files spends its time on
    per-file overhead, so no Path object is made per file. `kind` is `_kind(path)` if known.
    What is not data is added to `skipped` as (relative path, what it is); `sidecars`, if
    given, collects the files versions skip by name (`_SUCCESS`, `.crc`, `_dws_version.json`)
    in the folders they do enter: not data, but part of what a restore must bring back."""
    if kind == "?":
        kind = _kind(path)
    if kind == "file":
        return [("", str(path))]
    if kind == "other":
        raise DataNotFoundError(
            f"{path} is a {_describe_special(os.fspath(path))}, not a data file or folder, so "
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
                skipped.append((prefix + name, _describe_special(entry.path)))
            elif not entry.is_symlink():
                folders.append(name)
        base = folder + os.sep
        for name in sorted(files):
            found.append((prefix + name, base + name))
        # Pushed last-first, so the first subfolder (by name) is walked next, whole.
        pending.extend((base + name, f"{prefix}{name}/") for name in sorted(folders, reverse=True))


def _open_data(path: str) -> int | None:
    """A non-blocking descriptor of the file at `path`, None if it is gone (or a broken link)."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno in _MISSING_ERRNOS:
            return None
        raise _read_error(path, exc) from None


def _open_regular(path: str) -> int | None:
    """A descriptor of the regular file at `path`, or None if it is no longer one (swapped for
    a pipe or a device since it was checked: opened non-blocking, so that cannot hang)."""
    fd = _open_data(path)
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


def _hash_and_size(path: str, progress: Callable[[int], None] | None) -> tuple[str, int] | None:
    """xxh3-128 of a file's bytes and how many bytes that was, in one pass; None if `path` is
    not a regular file when opened.

    `os.read` of 1 MiB chunks: cheaper per file than a file object and a preallocated
    buffer, which matters for many small files, and a file read whole in one call is hashed in
    one call. Big files are bound by the copy out of the page cache plus the hash. Hashing
    from a memory map skips the copy (faster on big cached files) but was not taken: a file
    truncated by another process while mapped kills this process with SIGBUS, and files
    written in small pieces and still cached hash slower that way (bench/versioning_throughput.py).

    The file was a regular one when listed, but may have been swapped for a pipe or a device
    since. Opened non-blocking, a pipe cannot block the reads; whatever is not read whole in
    one call (empty, big, endless like /dev/zero, or a pipe with nothing in it) is checked with
    `fstat` before it is read further. A small file read whole needs no check: the check would
    cost a fifth of versioning many tiny files, and such bytes are data whatever held them.
    """
    fd = _open_data(path)
    if fd is None:
        return None
    try:
        chunk = os.read(fd, _CHUNK)
        following = b""
        if chunk and len(chunk) < _CHUNK:
            following = os.read(fd, _CHUNK)
            if not following:  # read whole at once, as most small files are: one-shot hash
                if progress is not None:
                    progress(len(chunk))
                return xxhash.xxh3_128_hexdigest(chunk), len(chunk)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        hasher, size = xxhash.xxh3_128(), 0
        while chunk:
            hasher.update(chunk)
            size += len(chunk)
            if progress is not None:
                progress(len(chunk))
            if following:
                chunk, following = following, b""
            else:
                chunk = os.read(fd, _CHUNK)
    except BlockingIOError:  # only a pipe, socket or device would block, never a data file
        return None
    except OSError as exc:
        raise _read_error(path, exc) from None
    finally:
        os.close(fd)
    return hasher.hexdigest(), size


def hash_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """xxh3-128 of a file's bytes (as `_hash_and_size` reads them)."""
    got = _hash_and_size(os.fspath(path), progress)
    if got is None:
        raise DataNotFoundError(f"{path} is not a regular file, so it has no hash")
    return got[0]


def content_manifest(
    path: Path,
    *,
    exclude_top: Iterable[str] = (),
    progress: Callable[[int], None] | None = None,
    kind: str | None = "?",
    on_skip: SkipReporter | None = None,
    results: bool = False,
) -> list[FileEntry]:
    """The hashed entries a content version is made of (the size is the bytes hashed).
    `results`: the data of a results resource, whose results files are versioned without
    their run timing (`untimed_entry`)."""
    entries = []
    skipped: list[tuple[str, str]] = []
    for rel, absolute in _data_files(path, exclude_top, kind, skipped=skipped):
        got = _hash_and_size(absolute, progress)
        if got is None:
            skipped.append((rel, _describe_special(absolute)))
            continue
        entry = FileEntry(rel, got[1], got[0])
        entries.append(untimed_entry(entry, absolute) if results else entry)
    _report_skipped(path, skipped, on_skip)
    return entries


def untimed_entry(entry: FileEntry, absolute: str) -> FileEntry:
    """What a version hashes of one file of a results ref: for a results file whose
    `VERSION_LEAVES_OUT` names keys of its run's timing (`RUN_TIMING_KEYS`; no other key can
    be left out), its JSON without them (keys sorted), so the version says what the step
    wrote, not when; any other file as its bytes.

    Only the file's version entry changes: the file, and the copy snapshots retain of it,
    keep every byte."""
    name = os.path.basename(absolute)  # a ref may be the file itself: relpath ""
    if name != RESULTS_FILE or entry.size > _MAX_TIMED_RESULTS_BYTES:
        return entry
    try:
        data = orjson.loads(_read_regular(absolute))
    except (OSError, orjson.JSONDecodeError):
        return entry
    if type(data) is not dict or type(data.get(VERSION_LEAVES_OUT)) is not list:
        return entry
    left_out = {key for key in data[VERSION_LEAVES_OUT] if key in RUN_TIMING_KEYS}
    if not left_out:
        return entry
    kept = {key: value for key, value in data.items() if key not in left_out}
    body = orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)
    return FileEntry(entry.relpath, len(body), "untimed-" + xxhash.xxh3_128_hexdigest(body))


def version_of_manifest(entries: Iterable[FileEntry], *, single_file: bool) -> str:
    lines = []
    for entry in entries:
        directory, _, name = entry.relpath.rpartition("/")
        stable = f"{directory}/{stable_name(name)}" if directory else stable_name(name)
        # fsencode keeps file names that are not valid UTF-8 (surrogate-escaped) hashable.
        lines.append(os.fsencode(stable) + f"\0{entry.size}\0{entry.digest}\n".encode())
    lines.sort()
    # One call over the joined lines hashes the same bytes as one call per line.
    head = b"file\n" if single_file else b"dir\n"
    return CONTENT_PREFIX + xxhash.xxh3_128_hexdigest(head + b"".join(lines))


def content_version(
    path: str | os.PathLike[str],
    *,
    exclude_top: Iterable[str] = (),
    progress: Callable[[int], None] | None = None,
    on_skip: SkipReporter | None = None,
) -> str:
    """The content version of the file or folder at `path`."""
    target = Path(path)
    kind = _kind(target)
    entries = content_manifest(
        target, exclude_top=exclude_top, progress=progress, kind=kind, on_skip=on_skip
    )
    return version_of_manifest(entries, single_file=kind == "file")


def effective_version(
    path: str | os.PathLike[str],
    *,
    exclude_top: Iterable[str] = (),
    progress: Callable[[int], None] | None = None,
    on_skip: SkipReporter | None = None,
    results: bool = False,
) -> str:
    """The version of the data at `path`: the version recorded in its marker while the files
    are byte for byte those the marker describes, else the byte content version (`results`:
    data of a results resource, its results files without their run timing)."""
    target = Path(path)
    kind = _kind(target)
    marker = target / MARKER_NAME
    has_marker = kind == "dir" and _kind(marker) == "file"
    if has_marker:
        # results.json / lineage.json describe Spark-written data (the lineage sensor and
        # snapshots put them beside it); they are not part of it.
        exclude_top = (*exclude_top, *DESCRIPTION_FILES)
    entries = content_manifest(
        target,
        exclude_top=exclude_top,
        progress=progress,
        kind=kind,
        on_skip=on_skip,
        results=results and not has_marker,
    )
    version = version_of_manifest(entries, single_file=kind == "file")
    return marked_version(target, version) if has_marker else version


def marked_version(folder: Path, content: str) -> str:
    """The version `folder`'s marker records while `content` (the byte version of its data
    files) is the one it describes, else `content`."""
    try:
        data = orjson.loads(_read_regular(os.fspath(folder / MARKER_NAME)))
    except (OSError, orjson.JSONDecodeError):
        return content
    marker = checked_marker(data)
    if marker is not None and marker.get("content") == content:
        return marker["version"]
    return content


def _read_regular(path: str) -> bytes:
    """The bytes of a small regular file; OSError if it is not one (never blocks)."""
    fd = _open_regular(path)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "not a regular file", path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def _stat_files(
    path: Path, exclude_top: Iterable[str], on_skip: SkipReporter | None
) -> list[tuple[str, os.stat_result]]:
    """(relative path, stat) of the data files under `path`; a file gone or no longer regular
    since the listing is skipped like any other non-data file."""
    skipped: list[tuple[str, str]] = []
    stats = []
    for rel, absolute in _data_files(path, exclude_top, skipped=skipped):
        try:
            info = os.stat(absolute)
        except OSError as exc:
            if exc.errno not in _MISSING_ERRNOS:
                raise _read_error(absolute, exc) from None
            skipped.append((rel, _describe_special(absolute)))
            continue
        if not stat.S_ISREG(info.st_mode):
            skipped.append((rel, _describe_special(absolute)))
            continue
        stats.append((rel, info))
    _report_skipped(path, skipped, on_skip)
    return stats


def checked_marker(data: Any) -> dict[str, Any] | None:
    """A parsed `_dws_version.json` if it matches `formats.MarkerFile` and this scheme, else
    None: a damaged or foreign marker is ignored, so the data is versioned by its bytes. Its
    version names kept copies, so it must be a version as dws_dagster makes them."""
    if not formats.MARKER.ok(data) or data["scheme"] != MARKER_SCHEME:
        return None
    lineage = data.get("lineage")
    if lineage is not None and not formats.RECORD.ok(lineage):
        # A damaged record: the data's version still counts, the record not.
        return {**data, "lineage": None}
    return data


def listing_version(
    path: str | os.PathLike[str],
    *,
    exclude_top: Iterable[str] = (),
    on_skip: SkipReporter | None = None,
) -> str:
    """A cheaper version from names, sizes and modification times only (no bytes read).

    Meant for object stores where reading everything is costly; any rewrite changes it, even of
    identical data, and an in-place edit that keeps size and mtime would go unseen.
    """
    hasher = xxhash.xxh3_128(b"listing\n")
    for rel, info in _stat_files(Path(path), exclude_top, on_skip):
        hasher.update(os.fsencode(rel) + f"\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return LISTING_PREFIX + hasher.hexdigest()


def data_size(
    path: str | os.PathLike[str],
    *,
    exclude_top: Iterable[str] = (),
    on_skip: SkipReporter | None = None,
) -> int:
    """Bytes of data under `path` that a version covers."""
    return sum(info.st_size for _, info in _stat_files(Path(path), exclude_top, on_skip))


def short(version: str | None) -> str:
    """Version shortened for display."""
    if not version:
        return "-"
    return (
        version[: len(LISTING_PREFIX) + 12] if version.startswith(LISTING_PREFIX) else version[:12]
    )
