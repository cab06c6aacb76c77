"""Content-addressed storage of retained data files (`.dataworkspace/objects/`).

A snapshot must restore while it exists, whoever wrote its data; keeping a copy per snapshot
would cost the workspace's size each time. Files are stored once per content hash (xxh3-128 of
their bytes, the hash versions are made of), so data that did not change between snapshots
costs nothing more, and a file is brought in the cheapest safe way, as DVC's cache does:

- **hard link**, for files that are only ever replaced, never rewritten in place: what the
  Spark IO manager writes (it writes a new folder and renames it over the old). The object and
  the workspace file are one inode, so it costs no space; both are made read-only, so an
  in-place write fails instead of changing a kept version (never for root, whom read-only
  files do not stop);
- **reflink** (copy-on-write clone) where the filesystem has it (btrfs, XFS): no space, and
  a later in-place write gets its own blocks;
- **copy** otherwise: space once per distinct content.

Every object's bytes are hashed as it is stored, so a file that changed while it was being
retained is refused rather than kept under a hash it does not have.

An object is built under `tmp/` and renamed into place. Each `ObjectStore` that builds one
works in a session folder of its own (`tmp/<id>/`) and holds an exclusive `flock` on it until
it is closed (or its process ends, killed or not): `gc` deletes only the session folders whose
lock it can take, so it never removes a copy a snapshot is still making, whatever the
interleaving, and still frees what a killed snapshot left.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dws_dagster.errors import RetentionError
from dws_dagster.workspace.data_files import printable_path
from dws_dagster.workspace.files import write_error
from dws_dagster.workspace.trees import make_folders
from dws_dagster.workspace.versions import hash_file

OBJECTS_DIR = "objects"
_TMP = "tmp"
_DIGEST = re.compile(r"^[0-9a-f]{32}$")
#: Linux's FICLONE ioctl: _IOW(0x94, 9, int).
_FICLONE = 0x40049409
_READ_ONLY = ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


@dataclass
class Stored:
    """How one file went into the object store: bytes it newly takes on disk (0 when it was
    there already, linked or cloned)."""

    added_bytes: int
    how: str  # "present" | "hardlink" | "reflink" | "copy"
    digest: str = ""
    source: str = ""
    #: For a hard link: the source's mode before it was made read-only (to give it back).
    previous_mode: int | None = None


class ObjectStore:
    """The objects of one workspace, named `<first 2 hex>/<other 30 hex>`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._session: Path | None = None
        self._session_fd: int | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @classmethod
    def of_workspace(cls, meta_dir: Path) -> ObjectStore:
        return cls(meta_dir / OBJECTS_DIR)

    def path_of(self, digest: str) -> Path:
        """Where the object `digest` lives. Digests come from stored manifests, which anyone
        with the database can edit: one that is not 32 hex digits names no file here."""
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise RetentionError(
                f"{str(digest)[:40]!r} is not a file hash (32 hex digits): the retained "
                "manifest holding it was edited; restore the store from a backup"
            )
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return self.path_of(digest).is_file()

    def add(self, source: str, digest: str, *, link: bool) -> Stored:
        """Keep the bytes of the file at `source`, whose hash is `digest`."""
        final = self.path_of(digest)
        if final.is_file():
            return Stored(0, "present")
        tmp = self._tmp_path()
        named = printable_path(source)
        how = "copy"
        previous: int | None = None
        try:
            if link and protection_holds() and _try_hardlink(source, tmp):
                how = "hardlink"
                previous = stat.S_IMODE(os.stat(tmp).st_mode)
            else:
                how = _clone_or_copy(source, tmp)
            # Read-only first, then checked: from here an in-place write is refused, so
            # the bytes hashed are the bytes kept.
            _make_read_only(tmp)
            if hash_file(tmp) != digest:
                raise RetentionError(
                    f"{named} changed while it was being retained (its bytes no longer have "
                    "the hash just read); nothing was kept: take the snapshot again once "
                    "nothing writes there"
                )
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)
        except OSError as exc:
            if previous is not None:
                _chmod_quietly(source, previous)
            _unlink_quietly(tmp)
            if exc.errno == errno.ENOENT and not tmp.exists() and os.path.exists(source):
                raise RetentionError(
                    f"the copy of {named} being retained was removed from {tmp.parent} "
                    "while it was made (by something other than dws_dagster, which leaves a "
                    "snapshot's copies alone); nothing was kept: take the snapshot again"
                ) from exc
            raise write_error(final, exc, action=f"retain a copy of {named} as") from exc
        except BaseException:
            if previous is not None:
                _chmod_quietly(source, previous)
            _unlink_quietly(tmp)
            raise
        added = 0 if how in ("hardlink", "reflink") else os.stat(final).st_size
        return Stored(added, how, digest, source, previous)

    def take_back(self, stored: list[Stored]) -> None:
        """Remove objects `add` stored for work that did not go ahead (the caller holds the
        store's lock and checked that no retained version names them), giving a hard-linked
        source its mode back. Best effort: what stays is freed by `gc`."""
        for item in stored:
            path = self.path_of(item.digest)
            try:
                info = os.stat(path)
                path.unlink()
            except OSError:
                continue
            if item.previous_mode is not None and info.st_nlink == 2:
                try:
                    now = os.stat(item.source)
                except OSError:
                    continue
                if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
                    _chmod_quietly(item.source, item.previous_mode)
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # only if empty: a bucket this work made

    def checkout(self, digest: str, destination: Path, *, link: bool) -> None:
        """Put object `digest` at `destination` (which must not exist): linked when `link`
        (read-only, as retained), else a writable clone or copy of its own."""
        source = self.path_of(digest)
        if not source.is_file():
            raise RetentionError(f"retained file {digest} is missing from {self.root}")
        make_folders(destination.parent)
        if link and protection_holds() and _try_hardlink(os.fspath(source), destination):
            return
        _clone_or_copy(os.fspath(source), destination)
        mode = os.stat(destination).st_mode
        os.chmod(destination, stat.S_IMODE(mode) | stat.S_IWUSR)

    def remove(self, digest: str) -> int:
        """Delete object `digest`; returns the bytes that freed (0 while a workspace file is
        still a hard link to it)."""
        path = self.path_of(digest)
        try:
            info = os.stat(path)
            path.unlink()
        except FileNotFoundError:
            return 0
        return info.st_size if info.st_nlink <= 1 else 0

    def digests(self) -> Iterator[tuple[str, os.stat_result]]:
        """Every object stored (digest, stat), and no leftovers of interrupted adds."""
        if not self.root.is_dir():
            return
        for bucket in sorted(self.root.iterdir()):
            if len(bucket.name) != 2 or not bucket.is_dir():
                continue
            for entry in os.scandir(bucket):
                digest = bucket.name + entry.name
                if _DIGEST.fullmatch(digest) and entry.is_file(follow_symlinks=False):
                    yield digest, entry.stat(follow_symlinks=False)

    def clear_leftovers(self, *, dry_run: bool = False) -> list[Path]:
        """Delete (unless `dry_run`) what interrupted `add`s left behind, which nothing names:
        session folders no live `ObjectStore` holds (see the module's docstring), each
        deleted while holding its lock, and loose copies of earlier versions. Returns them.
        A session folder whose lock is held is some snapshot's work in progress, never a
        leftover."""
        folder = self.root / _TMP
        if not folder.is_dir():
            return []
        found = []
        for entry in sorted(folder.iterdir()):
            if entry == self._session:
                continue
            if not entry.is_dir() or entry.is_symlink():
                found.append(entry)
                if not dry_run:
                    _unlink_quietly(entry)
                continue
            try:
                fd = os.open(entry, os.O_RDONLY)
            except OSError:
                continue
            try:
                if not _lock(fd, blocking=False):
                    continue  # in use
                found.append(entry)
                if not dry_run:
                    for item in list(os.scandir(entry)):
                        _unlink_quietly(Path(item.path))
                    with contextlib.suppress(OSError):
                        entry.rmdir()
            finally:
                os.close(fd)  # lets go of the lock
        return found

    def close(self) -> None:
        """End this store's session: its (empty) session folder goes and its lock is let go."""
        if self._session_fd is None:
            return
        if self._session is not None:
            with contextlib.suppress(OSError):
                self._session.rmdir()
        if self._finalizer is not None:
            self._finalizer()  # closes the descriptor, once
        self._session_fd = None
        self._session = None

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _tmp_path(self) -> Path:
        return self._session_folder() / uuid.uuid4().hex

    def _session_folder(self) -> Path:
        """This store's session folder under `tmp/`, made and locked on first use. Made, then
        locked, then checked still there: a `gc` that took the lock in between (the folder
        looked abandoned) removed it, and another one is made."""
        if self._session is not None:
            return self._session
        parent = self.root / _TMP
        parent.mkdir(parents=True, exist_ok=True)
        while True:
            folder = parent / uuid.uuid4().hex
            folder.mkdir()
            fd = os.open(folder, os.O_RDONLY)
            try:
                _lock(fd, blocking=True)
                if os.fstat(fd).st_nlink > 0:
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        self._session, self._session_fd = folder, fd
        # A store dropped without `close()` lets go of its lock with its descriptor.
        self._finalizer = weakref.finalize(self, _close_fd, fd)
        return folder


def protection_holds() -> bool:
    """Whether a read-only file refuses this process's writes: not for root, whom file modes
    do not stop, so root never hard-links data into retention (it clones or copies)."""
    return not hasattr(os, "geteuid") or os.geteuid() != 0


def _try_hardlink(source: str, destination: Path) -> bool:
    """Hard-link, or say why not by returning False: another filesystem, a filesystem without
    links, or a file with too many links already."""
    try:
        os.link(source, destination)
        return True
    except OSError as exc:
        if exc.errno in (
            errno.EXDEV,
            errno.EPERM,
            errno.EMLINK,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.EACCES,
        ):
            return False
        raise


def _clone_or_copy(source: str, destination: Path) -> str:
    """A copy-on-write clone where the filesystem makes one, else a byte copy; the mode and
    times go with it."""
    how = "copy"
    with open(source, "rb") as src, open(destination, "wb") as dst:
        try:
            import fcntl

            fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
            how = "reflink"
        except (OSError, ImportError):
            shutil.copyfileobj(src, dst, 1 << 20)
    shutil.copystat(source, destination)
    return how


def _make_read_only(path: Path) -> None:
    mode = os.stat(path).st_mode
    os.chmod(path, stat.S_IMODE(mode) & _READ_ONLY)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _chmod_quietly(path: str, mode: int) -> None:
    with contextlib.suppress(OSError):
        os.chmod(path, mode)


def _lock(fd: int, *, blocking: bool) -> bool:
    """An exclusive `flock` on `fd`; False when another holds it (and not `blocking`). Where
    there is no `flock`, nothing is locked and every session counts as in use."""
    try:
        import fcntl
    except ImportError:
        return blocking
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
