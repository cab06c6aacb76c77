"""Replace a local file or folder by a staged copy, and keep old data versions for restore.

A swap is two renames in one folder: target -> `.dws-old-<name>-<id>`, staging -> target. A crash
between them leaves the old data under the `.dws-old-` name; `recover()` puts it back, so readers
only ever find the old or the new data whole. Kept versions live in the resource's hidden
`.dws/versions/` folder, which content versions skip.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from pathlib import Path

from dws_dagster.errors import DwsError, InvalidResourceRefError
from dws_dagster.workspace.files import fsync_dir, write_error, writing
from dws_dagster.workspace.shapes import VERSION_PATTERN
from dws_dagster.workspace.versions import special_names

OLD_PREFIX = ".dws-old-"
STAGING_PREFIX = ".dws-staging-"
KEPT_DIR = ".dws/versions"
#: Staging copies older than this are leftovers of a crashed write.
STALE_STAGING_SECONDS = 6 * 3600
#: Kept copies are named `@<version>` inside the folder of their subpath.
KEPT_MARK = "@"
_VERSION = re.compile(VERSION_PATTERN)


class SwapError(DwsError):
    """Data could not be put in place; the previous data is still there."""


def staging_path(target: Path) -> Path:
    """A fresh staging location beside `target` (same filesystem, so rename is atomic)."""
    return target.parent / f"{STAGING_PREFIX}{target.name}-{uuid.uuid4().hex}"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def recover(target: Path, *, stale_after: float = STALE_STAGING_SECONDS) -> None:
    """Undo what a crash during a swap left beside `target`.

    Old data moved aside is put back if nothing replaced it; staging copies untouched for
    `stale_after` seconds are deleted (younger ones may belong to a write still running).
    """
    parent = target.parent
    if not parent.is_dir():
        return
    olds = sorted(parent.glob(f"{OLD_PREFIX}{target.name}-*"), key=lambda p: p.stat().st_mtime)
    if olds and not target.exists():
        os.replace(olds[-1], target)
        olds = olds[:-1]
        fsync_dir(parent)
    for old in olds:
        _remove(old)
    cutoff = time.time() - stale_after
    for leftover in parent.glob(f"{STAGING_PREFIX}{target.name}-*"):
        try:
            if leftover.stat().st_mtime < cutoff:
                _remove(leftover)
        except FileNotFoundError:
            pass


def swap_into_place(staging: Path, target: Path, *, keep_old_as: Path | None = None) -> None:
    """Atomically make `staging` the data at `target`; the old data is moved to `keep_old_as`
    (kept version) or deleted."""
    recover(target)
    old = target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex}"
    had_old = target.exists() or target.is_symlink()
    try:
        if had_old:
            os.replace(target, old)
        os.replace(staging, target)
    except OSError as exc:
        if had_old and not target.exists() and old.exists():
            os.replace(old, target)
        raise SwapError(
            f"could not put new data at {target}: {exc}; the previous data is unchanged"
        ) from exc
    fsync_dir(target.parent)
    if had_old:
        if keep_old_as is not None and not keep_old_as.exists():
            keep_old_as.parent.mkdir(parents=True, exist_ok=True)
            os.replace(old, keep_old_as)
        else:
            _remove(old)


def copy_data(source: Path, destination: Path) -> None:
    """Copy a file or folder (real copies: a step that rewrites a file in place must never
    change a kept version or an archived result through a shared inode). A copy that fails
    (full or read-only disk) is removed, and `WorkspaceWriteError` names what was copied."""
    try:
        if source.is_file():
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
            return
        shutil.copytree(source, destination, ignore=_not_copied)
    except OSError as exc:  # shutil.Error (copytree's errors of its files) is one too
        _remove_quietly(destination)
        raise write_error(_for_message(destination), exc, action=f"copy {source} to") from exc
    except BaseException:
        _remove_quietly(destination)
        raise


_BOOKKEEPING = shutil.ignore_patterns(".dws", f"{OLD_PREFIX}*", f"{STAGING_PREFIX}*")


def _not_copied(folder: str, names: list[str]) -> set[str]:
    """Bookkeeping, and what versions skip as not data (pipes, sockets, devices, broken
    links): copying a pipe would block or fail, and the copy keeps the version of the data."""
    return set(_BOOKKEEPING(folder, names)) | special_names(folder)


def _for_message(path: Path) -> Path:
    """A staging path as the path it stages (what the user knows)."""
    name = path.name
    if name.startswith(STAGING_PREFIX) and len(name) > len(STAGING_PREFIX) + 33:
        return path.with_name(name[len(STAGING_PREFIX) : -33])
    return path


def _remove_quietly(path: Path) -> None:
    try:
        _remove(path)
    except OSError:
        pass


def kept_version_path(resource_root: Path, subpath: str | None, version: str) -> Path:
    """Where a kept copy of `subpath@version` lives inside its resource.

    Versions reach here from files anyone can edit (lineage records, snapshot manifests, data
    markers), so one that is not a single file name is refused: `@../../x` must never lead a
    restore or a prune out of the resource. (`subpath` is a ref's, which cannot leave it.)
    """
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise InvalidResourceRefError(
            f"version {str(version)[:80]!r} cannot name a kept copy in {resource_root}: a "
            "version is one file name (no '/', backslash or control character); the lineage "
            "file it came from was edited: restore it from git or a backup"
        )
    folder = resource_root / KEPT_DIR
    return (folder / subpath if subpath else folder) / f"{KEPT_MARK}{version}"


def kept_versions(resource_root: Path, subpath: str | None) -> list[str]:
    """Versions kept for a ref, oldest first."""
    folder = resource_root / KEPT_DIR
    folder = folder / subpath if subpath else folder
    if not folder.is_dir():
        return []
    entries = [p for p in folder.iterdir() if p.name.startswith(KEPT_MARK)]
    return [
        p.name[len(KEPT_MARK) :]
        for p in sorted(entries, key=lambda p: (p.stat().st_mtime_ns, p.name))
    ]


def keep_copy(resource_root: Path, subpath: str | None, version: str, data: Path) -> Path:
    """Keep a copy of the data at `data` as `subpath@version` (no-op if already kept)."""
    destination = kept_version_path(resource_root, subpath, version)
    if destination.exists():
        return destination
    staging = staging_path(destination)
    with writing(destination.parent, action="create the folder"):
        destination.parent.mkdir(parents=True, exist_ok=True)
    copy_data(data, staging)
    with writing(destination, action="put in place"):
        try:
            os.replace(staging, destination)
        except OSError:
            _remove_quietly(staging)
            raise
    return destination


def prune_kept(resource_root: Path, subpath: str | None, keep: int) -> list[str]:
    """Delete all but the newest `keep` kept versions of a ref; returns the versions deleted."""
    versions = kept_versions(resource_root, subpath)
    doomed = versions[: max(0, len(versions) - keep)]
    for version in doomed:
        _remove(kept_version_path(resource_root, subpath, version))
    return doomed
