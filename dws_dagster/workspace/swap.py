"""Replace a local file or folder by a staged copy, and keep old data versions for restore.

A swap is two renames in one folder: target -> `.dws-old-<tag>-<id>`, staging -> target. A crash
between them leaves the old data under the `.dws-old-` name; `recover()` puts it back, so readers
only ever find the old or the new data whole. Kept versions live in the resource's hidden
`.dws/versions/` folder, which content versions skip.

Staging and set-aside names are of one fixed length (62 bytes), whatever the target's name:
`<tag>` is a 16-hex hash of the target's name (so `recover` finds what belongs to a target) and
`<id>` a random 32-hex id. A name that embedded the target's would not fit for a target whose
name is near the 255-byte limit, and data a snapshot accepted could then never be restored.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from pathlib import Path

import xxhash

from dws_dagster.errors import InvalidResourceRefError, SwapError
from dws_dagster.workspace.data_files import special_names
from dws_dagster.workspace.files import fsync_dir, write_error, writing
from dws_dagster.workspace.shapes import VERSION_PATTERN
from dws_dagster.workspace.trees import copy_tree, make_folders, remove_tree

OLD_PREFIX = ".dws-old-"
STAGING_PREFIX = ".dws-staging-"
KEPT_DIR = ".dws/versions"
#: Staging copies older than this are leftovers of a crashed write.
STALE_STAGING_SECONDS = 6 * 3600
#: Kept copies are named `@<version>` inside the folder of their subpath.
KEPT_MARK = "@"
_VERSION = re.compile(VERSION_PATTERN)
#: The random id that ends staging and set-aside names.
_ID = re.compile(r"-[0-9a-f]{32}")


def name_tag(name: str) -> str:
    """16 hex digits standing for the file name `name` in staging and set-aside names."""
    return xxhash.xxh3_64_hexdigest(os.fsencode(name))


def staging_name(name: str) -> str:
    """A fresh staging name for a target named `name` (62 bytes, whatever `name`)."""
    return f"{STAGING_PREFIX}{name_tag(name)}-{uuid.uuid4().hex}"


def old_name(name: str) -> str:
    """A fresh name to set the old data of a target named `name` aside under, in a swap."""
    return f"{OLD_PREFIX}{name_tag(name)}-{uuid.uuid4().hex}"


def staging_path(target: Path) -> Path:
    """A fresh staging location beside `target` (same filesystem, so rename is atomic)."""
    return target.parent / staging_name(target.name)


def is_staging_name(entry: str, name: str) -> bool:
    """Whether `entry` is a staging name of a target named `name` (as `staging_name` makes
    it, or as versions before fixed-length names did: `.dws-staging-<name>-<32 hex>`)."""
    return _belongs(entry, STAGING_PREFIX, name)


def _belongs(entry: str, prefix: str, name: str) -> bool:
    if not entry.startswith(prefix) or not _ID.fullmatch(entry[-33:]):
        return False
    middle = entry[len(prefix) : -33]
    return middle == name_tag(name) or middle == name


def _beside(target: Path, prefix: str) -> list[Path]:
    """Entries beside `target` named by `prefix` for it (see `_belongs`)."""
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    return [target.parent / n for n in names if _belongs(n, prefix, target.name)]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
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
    olds = sorted(_beside(target, OLD_PREFIX), key=lambda p: p.stat().st_mtime)
    if olds and not target.exists():
        os.replace(olds[-1], target)
        olds = olds[:-1]
        fsync_dir(parent)
    for old in olds:
        _remove(old)
    cutoff = time.time() - stale_after
    for leftover in _beside(target, STAGING_PREFIX):
        try:
            if leftover.stat().st_mtime < cutoff:
                _remove(leftover)
        except FileNotFoundError:
            pass


def swap_into_place(staging: Path, target: Path, *, keep_old_as: Path | None = None) -> None:
    """Atomically make `staging` the data at `target`; the old data is moved to `keep_old_as`
    (kept version) or deleted."""
    recover(target)
    old = target.parent / old_name(target.name)
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
            make_folders(keep_old_as.parent)
            os.replace(old, keep_old_as)
        else:
            _remove(old)


def copy_data(source: Path, destination: Path, *, shown: Path | None = None) -> None:
    """Copy a file or folder (real copies: a step that rewrites a file in place must never
    change a kept version or an archived result through a shared inode). A copy that fails
    (full or read-only disk) is removed, and `WorkspaceWriteError` names what was copied and
    where to (`shown`: the path the user knows, for a staging `destination`)."""
    try:
        if source.is_file():
            make_folders(destination.parent)
            shutil.copy2(source, destination)
            return
        copy_tree(source, destination, ignore=_not_copied)
    except OSError as exc:
        _remove_quietly(destination)
        raise write_error(shown or destination, exc, action=f"copy {source} to") from exc
    except BaseException:
        _remove_quietly(destination)
        raise


_BOOKKEEPING = shutil.ignore_patterns(".dws", f"{OLD_PREFIX}*", f"{STAGING_PREFIX}*")


def _not_copied(folder: str, names: list[str]) -> set[str]:
    """Bookkeeping, and what versions skip as not data (pipes, sockets, devices, broken
    links): copying a pipe would block or fail, and the copy keeps the version of the data."""
    return set(_BOOKKEEPING(folder, names)) | special_names(folder)


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
        make_folders(destination.parent)
    copy_data(data, staging, shown=destination)
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
