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
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
import xxhash

from dws_dagster.errors import DataNotFoundError
from dws_dagster.workspace import formats
from dws_dagster.workspace.data_files import (
    MISSING_ERRNOS,
    FileEntry,
    SkipReporter,
    data_file_entries,
    describe_special,
    file_kind,
    open_data,
    open_regular,
    read_error,
    report_skipped,
    stable_name,
)

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
_CHUNK = 1 << 20


def hash_and_size(path: str, progress: Callable[[int], None] | None) -> tuple[str, int] | None:
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
    fd = open_data(path)
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
        raise read_error(path, exc) from None
    finally:
        os.close(fd)
    return hasher.hexdigest(), size


def hash_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """xxh3-128 of a file's bytes (as `hash_and_size` reads them)."""
    got = hash_and_size(os.fspath(path), progress)
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
    for rel, absolute in data_file_entries(path, exclude_top, kind, skipped=skipped):
        got = hash_and_size(absolute, progress)
        if got is None:
            skipped.append((rel, describe_special(absolute)))
            continue
        entry = FileEntry(rel, got[1], got[0])
        entries.append(untimed_entry(entry, absolute) if results else entry)
    report_skipped(path, skipped, on_skip)
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
    kind = file_kind(target)
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
    kind = file_kind(target)
    marker = target / MARKER_NAME
    has_marker = kind == "dir" and file_kind(marker) == "file"
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
    fd = open_regular(path)
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
    for rel, absolute in data_file_entries(path, exclude_top, skipped=skipped):
        try:
            info = os.stat(absolute)
        except OSError as exc:
            if exc.errno not in MISSING_ERRNOS:
                raise read_error(absolute, exc) from None
            skipped.append((rel, describe_special(absolute)))
            continue
        if not stat.S_ISREG(info.st_mode):
            skipped.append((rel, describe_special(absolute)))
            continue
        stats.append((rel, info))
    report_skipped(path, skipped, on_skip)
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
