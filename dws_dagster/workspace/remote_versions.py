"""Retention of data in remote (object-store, HDFS) resources, which this layer cannot read.

Local versions are retained by copying their files into the object store; a remote version is
retained where it already is. When data at a remote ref is replaced (by the Spark IO manager,
or by a restore), the version it held is moved aside to
`<resource uri>/.dws/versions/<subpath>/@<version>` (a rename on HDFS, abfss and local
filesystems) and stays there while a snapshot references it or the writer's `keep_versions`
keeps it. A restore moves it back.

Reading and moving remote data needs Spark's Hadoop filesystems, which the workspace layer does
not import: callers pass a `RemoteData` (dws_dagster.spark.remote_data gives one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Protocol

from dws_dagster.errors import InvalidResourceRefError
from dws_dagster.workspace.shapes import VERSION_PATTERN
from dws_dagster.workspace.swap import KEPT_DIR, KEPT_MARK

_VERSION = re.compile(VERSION_PATTERN)
#: The lineage record's `extra` key under which the IO manager notes its `keep_versions` for a
#: remote ref, so that `gc` frees kept versions by the policy they were written under.
KEEP_VERSIONS_KEY = "keep_versions"


class RemoteData(Protocol):
    """What restore and gc need of remote data; implemented over Hadoop's FileSystem API."""

    def version(self, location: str) -> str | None:
        """The version of the data at `location` (its marker's, else a listing version), or
        None when nothing is there."""

    def kept(self, folder: str) -> list[tuple[str, int]]:
        """(name, modification time in ms) of each entry directly in `folder` (none if absent)."""

    def move(self, source: str, destination: str) -> None:
        """Rename `source` to `destination` (creating its parent); raises on failure."""

    def delete(self, location: str) -> None:
        """Delete `location` recursively (nothing if absent)."""


class LazyRemoteData:
    """A `RemoteData` made on first use by `factory`: commands over local data never start the
    JVM that remote data needs."""

    def __init__(self, factory: Callable[[], RemoteData]) -> None:
        self._factory = factory
        self._data: RemoteData | None = None

    def _get(self) -> RemoteData:
        if self._data is None:
            self._data = self._factory()
        return self._data

    def version(self, location: str) -> str | None:
        return self._get().version(location)

    def kept(self, folder: str) -> list[tuple[str, int]]:
        return self._get().kept(folder)

    def move(self, source: str, destination: str) -> None:
        self._get().move(source, destination)

    def delete(self, location: str) -> None:
        self._get().delete(location)


def kept_folder(uri: str, subpath: str | None) -> str:
    """The folder holding a remote ref's kept versions."""
    base = f"{uri.rstrip('/')}/{KEPT_DIR}"
    return f"{base}/{subpath}" if subpath else base


def kept_location(uri: str, subpath: str | None, version: str) -> str:
    """Where a remote ref's version is kept. The version comes from data markers and records
    anyone can edit: one that is not a single file name is refused, so that no move or delete
    can be led outside the resource."""
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise InvalidResourceRefError(
            f"version {str(version)[:80]!r} cannot name a kept copy in {uri}: a version is one "
            "file name; the record or marker it came from was edited: restore it from a backup"
        )
    return f"{kept_folder(uri, subpath)}/{KEPT_MARK}{version}"


def kept_versions(remote: RemoteData, uri: str, subpath: str | None) -> list[str]:
    """Versions kept for a remote ref, oldest first."""
    return versions_in(remote.kept(kept_folder(uri, subpath)))


def versions_in(entries: Iterable[tuple[str, int]]) -> list[str]:
    """The versions among a kept folder's entries (name, modification time), oldest first;
    names that are not versions are left alone: they are not ours."""
    found = [
        (mtime, name[len(KEPT_MARK) :])
        for name, mtime in entries
        if name.startswith(KEPT_MARK) and _VERSION.fullmatch(name[len(KEPT_MARK) :])
    ]
    return [version for _, version in sorted(found)]


def prunable(kept: list[str], referenced: Iterable[str], keep: int) -> list[str]:
    """Which of `kept` (oldest first) may go: not referenced by a snapshot, and not among the
    newest `keep` (the writer's policy for versions no snapshot references)."""
    policy = set(kept[max(0, len(kept) - keep) :]) if keep > 0 else set()
    needed = set(referenced) | policy
    return [version for version in kept if version not in needed]
