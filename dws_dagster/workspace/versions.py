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

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

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
#: Spark: part-00000-<uuid>[_00000][-c000].<ext>; the UUID changes on every write.
_SPARK_PART = re.compile(
    r"^part-\d{5,}-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}(?:_\d+)?(?:[.-]c\d{3,})?"
    r"(?P<ext>\..*)?$"
)


class DataNotFoundError(DwsError, FileNotFoundError):
    """A ref names data that does not exist, so it has no version."""


@dataclass(frozen=True)
class FileEntry:
    """One data file of a ref: its path relative to the ref and what the version hashes."""

    relpath: str
    size: int
    digest: str


def is_ignored_name(name: str) -> bool:
    """Files and folders Spark and Hadoop ignore when reading, so versions ignore them too."""
    return name.startswith((".", "_")) or name.endswith(".crc")


def stable_name(name: str) -> str:
    """Spark's part-file name without its per-write UUID and part number."""
    match = _SPARK_PART.match(name)
    return f"part-*{match.group('ext') or ''}" if match else name


def iter_data_files(path: Path, *, exclude_top: Iterable[str] = ()) -> list[tuple[str, Path]]:
    """(relative path, absolute path) of every data file under `path`, sorted, symlinks followed
    only for files."""
    if path.is_file():
        return [("", path)]
    if not path.is_dir():
        raise DataNotFoundError(f"{path} does not exist, so it has no version")
    excluded = set(exclude_top)
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(path):
        rel_dir = os.path.relpath(dirpath, path)
        top = rel_dir == "."
        dirnames[:] = sorted(d for d in dirnames
                             if not is_ignored_name(d) and not (top and d in excluded))
        for filename in sorted(filenames):
            if is_ignored_name(filename) or (top and filename in excluded):
                continue
            rel = filename if top else f"{Path(rel_dir).as_posix()}/{filename}"
            found.append((rel, Path(dirpath) / filename))
    return found


def hash_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """xxh3-128 of a file's bytes, read in 1 MiB chunks into one reused buffer."""
    hasher = xxhash.xxh3_128()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            count = handle.readinto(buffer)
            if not count:
                break
            hasher.update(view[:count])
            if progress is not None:
                progress(count)
    return hasher.hexdigest()


def content_manifest(path: Path, *, exclude_top: Iterable[str] = (),
                     progress: Callable[[int], None] | None = None) -> list[FileEntry]:
    """The hashed entries a content version is made of."""
    entries = []
    for rel, absolute in iter_data_files(path, exclude_top=exclude_top):
        digest = hash_file(absolute, progress)
        entries.append(FileEntry(rel, absolute.stat().st_size, digest))
    return entries


def version_of_manifest(entries: Iterable[FileEntry], *, single_file: bool) -> str:
    lines = []
    for entry in entries:
        directory, _, name = entry.relpath.rpartition("/")
        stable = f"{directory}/{stable_name(name)}" if directory else stable_name(name)
        # fsencode keeps file names that are not valid UTF-8 (surrogate-escaped) hashable.
        lines.append(os.fsencode(stable) + f"\0{entry.size}\0{entry.digest}\n".encode())
    lines.sort()
    hasher = xxhash.xxh3_128(b"file\n" if single_file else b"dir\n")
    for line in lines:
        hasher.update(line)
    return CONTENT_PREFIX + hasher.hexdigest()


def content_version(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = (),
                    progress: Callable[[int], None] | None = None) -> str:
    """The content version of the file or folder at `path`."""
    target = Path(path)
    entries = content_manifest(target, exclude_top=exclude_top, progress=progress)
    return version_of_manifest(entries, single_file=target.is_file())


def effective_version(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = (),
                      progress: Callable[[int], None] | None = None) -> str:
    """The version of the data at `path`: the version recorded in its marker while the files
    are byte for byte those the marker describes, else the byte content version."""
    target = Path(path)
    marker = target / MARKER_NAME
    if target.is_dir() and marker.is_file():
        # results.json / lineage.json describe Spark-written data (the lineage sensor and
        # snapshots put them beside it); they are not part of it.
        exclude_top = (*exclude_top, *DESCRIPTION_FILES)
    version = content_version(target, exclude_top=exclude_top, progress=progress)
    if target.is_dir() and marker.is_file():
        try:
            data = orjson.loads(marker.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return version
        if isinstance(data, dict) and data.get("scheme") == MARKER_SCHEME \
                and data.get("content") == version and isinstance(data.get("version"), str):
            return data["version"]
    return version


def listing_version(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = ()) -> str:
    """A cheaper version from names, sizes and modification times only (no bytes read).

    Meant for object stores where reading everything is costly; any rewrite changes it, even of
    identical data, and an in-place edit that keeps size and mtime would go unseen.
    """
    target = Path(path)
    hasher = xxhash.xxh3_128(b"listing\n")
    for rel, absolute in iter_data_files(target, exclude_top=exclude_top):
        stat = absolute.stat()
        hasher.update(os.fsencode(rel) + f"\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return LISTING_PREFIX + hasher.hexdigest()


def data_size(path: str | os.PathLike[str], *, exclude_top: Iterable[str] = ()) -> int:
    """Bytes of data under `path` that a version covers."""
    return sum(absolute.stat().st_size
               for _, absolute in iter_data_files(Path(path), exclude_top=exclude_top))


def short(version: str | None) -> str:
    """Version shortened for display."""
    if not version:
        return "-"
    return version[: len(LISTING_PREFIX) + 12] if version.startswith(LISTING_PREFIX) \
        else version[:12]
