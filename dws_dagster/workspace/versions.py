"""Content versions of a ref's files.

A version is an xxh3-128 hash (python-xxhash) over a manifest of the data files under a ref:
each file's directory, its name with Spark's random part-file UUID removed, its size and the
xxh3-128 hash of its bytes, sorted. Hidden and bookkeeping files (`.*`, `_*` such as `_SUCCESS`,
`*.crc`) are skipped, as Spark and Hadoop skip them when reading. So identical content gives an
identical version whatever Spark named the files, and any byte change gives a new one.

xxh3-128 is not a cryptographic hash: it guards against accidental collisions (about 2^-64 for
a pair even across billions of versions), not against someone crafting two datasets to collide.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import xxhash

from ..errors import DwsError

CONTENT_PREFIX = ""
#: Written beside Spark output by the storage layer: the version Spark computed for the data
#: and the byte version of the files it describes (ignored by Spark and by byte versions).
MARKER_NAME = "_dws_version.json"
MARKER_SCHEME = "spark-logical-2"
#: Files beside Spark-written data that describe it (metrics, lineage) rather than hold it.
DESCRIPTION_FILES = ("results.json", "lineage.json")
LISTING_PREFIX = "ls-"
_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
#: What `Path.is_file()` treats as "not there" rather than an error.
_MISSING_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
#: Spark: part-00000-<uuid>[_00000][-c000].<ext>; the UUID changes on every write.
_SPARK_PART = re.compile(
    r"^part-\d{5,}-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}(?:_\d+)?(?:[.-]c\d{3,})?"
    r"(?P<ext>\..*)?$"
)


class DataNotFoundError(DwsError, FileNotFoundError):
    """A ref names data that does not exist, so it has no version."""


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


def iter_data_files(path: Path, *, exclude_top: Iterable[str] = ()) -> list[tuple[str, Path]]:
    """(relative path, absolute path) of every data file under `path`, sorted, symlinks followed
    only for files."""
    return [(rel, Path(absolute)) for rel, absolute in _data_files(path, exclude_top)]


def _kind(path: Path) -> str | None:
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


def _data_files(path: Path, exclude_top: Iterable[str], kind: str | None = "?"
                ) -> list[tuple[str, str]]:
    """`iter_data_files` on plain strings: a walk of many small files spends its time on
    per-file overhead, so no Path object is made per file. `kind` is `_kind(path)` if known."""
    if kind == "?":
        kind = _kind(path)
    if kind == "file":
        return [("", str(path))]
    if kind != "dir":
        raise DataNotFoundError(f"{path} does not exist, so it has no version")
    found: list[tuple[str, str]] = []
    _walk(os.fspath(path), "", frozenset(exclude_top), found)
    return found


def _walk(folder: str, prefix: str, excluded: frozenset[str],
          found: list[tuple[str, str]]) -> None:
    """Files of `folder` (sorted), then its subfolders in name order, as `os.walk` visits
    them: unreadable folders are skipped and symlinked folders are not entered."""
    try:
        with os.scandir(folder) as scan:
            entries = list(scan)
    except OSError:
        return
    files: list[str] = []
    folders: list[str] = []
    for entry in entries:
        name = entry.name
        if is_ignored_name(name) or (not prefix and name in excluded):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if not is_dir:
            files.append(name)
        elif not entry.is_symlink():
            folders.append(name)
    base = folder + os.sep
    for name in sorted(files):
        found.append((prefix + name, base + name))
    for name in sorted(folders):
        _walk(base + name, f"{prefix}{name}/", excluded, found)


def _hash_and_size(path: str, progress: Callable[[int], None] | None) -> tuple[str, int]:
    """xxh3-128 of a file's bytes and how many bytes that was, in one pass.

    `os.read` of 1 MiB chunks: cheaper per file than a file object and a preallocated
    buffer, which matters for many small files, and a file read whole in one call is hashed in
    one call. Big files are bound by the copy out of the page cache plus the hash. Hashing
    from a memory map skips the copy (faster on big cached files) but was not taken: a file
    truncated by another process while mapped kills this process with SIGBUS, and files
    written in small pieces and still cached hash slower that way (see README, Performance).
    """
    fd = os.open(path, _OPEN_FLAGS)
    try:
        chunk = os.read(fd, _CHUNK)
        if len(chunk) < _CHUNK:
            following = os.read(fd, _CHUNK)
            if not following:  # read whole at once, as most small files are: one-shot hash
                if chunk and progress is not None:
                    progress(len(chunk))
                return xxhash.xxh3_128_hexdigest(chunk), len(chunk)
            hasher = xxhash.xxh3_128(chunk)
            size = len(chunk)
            if progress is not None:
                progress(size)
            chunk = following
        else:
            hasher, size = xxhash.xxh3_128(), 0
        while chunk:
            hasher.update(chunk)
            size += len(chunk)
            if progress is not None:
                progress(len(chunk))
            chunk = os.read(fd, _CHUNK)
    finally:
        os.close(fd)
    return hasher.hexdigest(), size


def hash_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """xxh3-128 of a file's bytes (as `_hash_and_size` reads them)."""
    return _hash_and_size(os.fspath(path), progress)[0]


def content_manifest(path: Path, *, exclude_top: Iterable[str] = (),
                     progress: Callable[[int], None] | None = None,
                     kind: str | None = "?") -> list[FileEntry]:
    """The hashed entries a content version is made of (the size is the bytes hashed)."""
    entries = []
    for rel, absolute in _data_files(path, exclude_top, kind):
        digest, size = _hash_and_size(absolute, progress)
        entries.append(FileEntry(rel, size, digest))
    return entries


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


def content_version(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = (),
                    progress: Callable[[int], None] | None = None) -> str:
    """The content version of the file or folder at `path`."""
    target = Path(path)
    kind = _kind(target)
    entries = content_manifest(target, exclude_top=exclude_top, progress=progress, kind=kind)
    return version_of_manifest(entries, single_file=kind == "file")


def effective_version(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = (),
                      progress: Callable[[int], None] | None = None) -> str:
    """The version of the data at `path`: the version recorded in its marker while the files
    are byte for byte those the marker describes, else the byte content version."""
    target = Path(path)
    kind = _kind(target)
    marker = target / MARKER_NAME
    has_marker = kind == "dir" and _kind(marker) == "file"
    if has_marker:
        # results.json / lineage.json describe Spark-written data (the lineage sensor and
        # snapshots put them beside it); they are not part of it.
        exclude_top = (*exclude_top, *DESCRIPTION_FILES)
    entries = content_manifest(target, exclude_top=exclude_top, progress=progress, kind=kind)
    version = version_of_manifest(entries, single_file=kind == "file")
    if has_marker:
        try:
            data = orjson.loads(marker.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return version
        marker = checked_marker(data)
        if marker is not None and marker.get("content") == version:
            return marker["version"]
    return version


def checked_marker(data: Any) -> dict[str, Any] | None:
    """A parsed `_dws_version.json` if it matches `formats.MarkerFile` and this scheme, else
    None: a damaged or foreign marker is ignored, so the data is versioned by its bytes. Its
    version names kept copies, so it must be a version as dws_dagster makes them."""
    from . import shapes  # shapes -> snapshots -> ... -> versions: imported when needed

    try:
        marker = shapes.checked("marker", data, MARKER_NAME)
    except DwsError:
        return None
    if marker["scheme"] != MARKER_SCHEME:
        return None
    lineage = marker.get("lineage")
    if lineage is not None and not shapes.record_ok(lineage):
        try:
            shapes.checked("record", lineage, MARKER_NAME)
        except DwsError:  # a damaged record: the data's version still counts, the record not
            return {**marker, "lineage": None}
    return marker


def listing_version(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = ()) -> str:
    """A cheaper version from names, sizes and modification times only (no bytes read).

    Meant for object stores where reading everything is costly; any rewrite changes it, even of
    identical data, and an in-place edit that keeps size and mtime would go unseen.
    """
    target = Path(path)
    hasher = xxhash.xxh3_128(b"listing\n")
    for rel, absolute in _data_files(target, exclude_top):
        info = os.stat(absolute)
        hasher.update(os.fsencode(rel) + f"\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return LISTING_PREFIX + hasher.hexdigest()


def data_size(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = ()) -> int:
    """Bytes of data under `path` that a version covers."""
    return sum(os.stat(absolute).st_size
               for _, absolute in _data_files(Path(path), exclude_top))


def short(version: str | None) -> str:
    """Version shortened for display."""
    if not version:
        return "-"
    return version[: len(LISTING_PREFIX) + 12] if version.startswith(LISTING_PREFIX) \
        else version[:12]
