"""A machine-local cache of file hashes, keyed by what `stat` says of the file.

Snapshots version every ref's data to see drift and to retain what changed; reading every byte
of a large workspace for each snapshot would make them cost as much as copying it. Like git's
index and DVC's state database, a file's hash is reused while its identity and its change
stamps are what they were when it was hashed: device, inode, size, modification and change
time (`ctime` also moves on a rename over it, a `chmod` or a hard link, which no user can set).

A write in the same clock tick as the hash would leave every stamp unchanged (git's "racy"
files), so a hash is cached only for a file last modified well before hashing began. The cache
holds inode numbers, which mean nothing on another machine: it lives in `.dataworkspace/cache/`,
never in the shared store, and losing it only costs re-reading the data.

Reading the cache changes nothing (it is opened read-only, and not created when missing): what
was learned is written by `save`, which callers make only once their operation goes ahead, so
a refused snapshot or restore leaves `.dataworkspace/` as it found it. File names are bytes on
POSIX and need not be UTF-8, so the cache keys files by their path's bytes (`os.fsencode`).
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from contextlib import closing, suppress
from pathlib import Path

#: A file modified less than this before its hash was taken is not cached (see above); two
#: seconds covers the coarsest timestamps a filesystem here may keep (FAT).
RACY_SECONDS = 2.0
#: Paths are BLOBs (the bytes of the file's path): a name that is not UTF-8 is kept as it is.
#: (The table of earlier versions, `hashes`, keyed paths as text; it is dropped on a save.)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (path BLOB PRIMARY KEY, dev INTEGER, "
    "ino INTEGER, size INTEGER, mtime INTEGER, ctime INTEGER, digest TEXT)"
)

Stamp = tuple[int, int, int, int, int]


def stamp_of(info: os.stat_result) -> Stamp:
    """What must be unchanged for a cached hash to hold."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class FileHashCache:
    """Hashes of files under some folders, loaded once per folder, written back on `save`.

    Best effort by design: a cache that cannot be read or written (full disk, read-only
    workspace, a damaged file) is treated as empty, since every answer can be recomputed.
    """

    def __init__(self, path: Path | None, *, read_only: bool = False) -> None:
        self._path = path
        #: Only read the cache, never create or write it: for commands that only look at
        #: the workspace (`diff` against its current state), which must change nothing.
        self._read_only = read_only
        self._known: dict[str, tuple[Stamp, str]] = {}
        self._loaded: set[str] = set()
        self._new: dict[str, tuple[Stamp, str]] = {}
        self._stale: set[str] = set()
        self._seen: set[str] = set()

    @classmethod
    def of_workspace(cls, meta_dir: Path, *, read_only: bool = False) -> FileHashCache:
        return cls(meta_dir / "cache" / "file-hashes.sqlite", read_only=read_only)

    def _connect(self, *, write: bool) -> sqlite3.Connection | None:
        """The cache's database: read-only and never created for reading (a read changes
        nothing on disk), created with its folder for writing; None when it cannot be."""
        if self._path is None:
            return None
        try:
            if not write:
                if not self._path.is_file():
                    return None
                quoted = urllib.parse.quote(os.fsencode(self._path))
                return sqlite3.connect(f"file:{quoted}?mode=ro", uri=True, timeout=5.0)
            self._path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(os.fsencode(self._path), timeout=5.0)
            connection.execute(_SCHEMA)
            return connection
        except sqlite3.Error:
            return None
        except OSError:
            return None

    def load(self, folder: str | os.PathLike[str]) -> None:
        """Read the cached hashes of every file under `folder` (one range query)."""
        prefix = os.fspath(folder).rstrip(os.sep) + os.sep
        probe = prefix
        while probe:  # this folder or one above it loaded already: O(depth), not O(loaded)
            if probe in self._loaded:
                return
            probe = probe[:-1].rpartition(os.sep)[0] + os.sep if probe != os.sep else ""
        self._loaded.add(prefix)
        connection = self._connect(write=False)
        if connection is None:
            return
        low = os.fsencode(prefix)
        upper = low[:-1] + bytes([low[-1] + 1])
        with closing(connection), suppress(sqlite3.Error):
            for path, dev, ino, size, mtime, ctime, digest in connection.execute(
                "SELECT path, dev, ino, size, mtime, ctime, digest FROM files "
                "WHERE path >= ? AND path < ?",
                (low, upper),
            ):
                if isinstance(digest, str) and isinstance(path, bytes):
                    self._known[os.fsdecode(path)] = ((dev, ino, size, mtime, ctime), digest)

    def get(self, path: str, info: os.stat_result) -> str | None:
        """The cached hash of the file at `path` if `info` (its stat now) still matches."""
        self._seen.add(path)
        found = self._new.get(path) or self._known.get(path)
        if found is None:
            return None
        if found[0] != stamp_of(info):
            self._stale.add(path)
            return None
        return found[1]

    def put(self, path: str, info: os.stat_result, digest: str, hashed_at: float) -> None:
        """Remember `digest` for the file `info` describes, hashed from `hashed_at` on."""
        if info.st_mtime_ns / 1e9 > hashed_at - RACY_SECONDS:
            return
        self._new[path] = (stamp_of(info), digest)

    def forget(self, path: str) -> None:
        self._new.pop(path, None)
        self._stale.add(path)

    def save(self, *, prune: bool = False) -> None:
        """Write what was learned since loading; silently skipped when it cannot be. `prune`:
        the caller looked at every file it cares about under the folders loaded (a snapshot
        scans every ref), so entries not looked at (files deleted or replaced since: Spark
        names its files anew on every write) go, and the cache does not grow without end."""
        if self._read_only:
            return
        if prune:
            self._stale.update(path for path in self._known if path not in self._seen)
        if not self._new and not self._stale:
            return
        connection = self._connect(write=True)
        if connection is None:
            return
        with closing(connection), suppress(sqlite3.Error):
            with connection:
                connection.execute("DROP TABLE IF EXISTS hashes")
                gone = self._stale - set(self._new)
                connection.executemany(
                    "DELETE FROM files WHERE path = ?", ((os.fsencode(path),) for path in gone)
                )
                connection.executemany(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        (os.fsencode(path), *stamp, digest)
                        for path, (stamp, digest) in self._new.items()
                    ),
                )
            self._known.update(self._new)
            self._new.clear()
            self._stale.clear()
