"""Durable, atomic file writes and JSON encoding shared by the workspace store."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from filelock import FileLock
from filelock import Timeout as LockTimeout

from ..errors import DwsError, WorkspaceConfigError


class WorkspaceWriteError(DwsError):
    """The workspace's files cannot be written (read-only or full disk, no permission)."""


def canonical_json(value: Any) -> bytes:
    """Compact JSON with sorted keys: the byte form that hashes are taken over."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def pretty_json(value: Any) -> bytes:
    """Indented JSON with sorted keys and a final newline: diffable files fit for git."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that readers and crashes see the old or the new file, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    atomic_write_bytes(path, pretty_json(value), durable=durable)


def read_json_file(path: Path, *, what: str) -> Any:
    """Read a JSON file of the workspace, turning corruption into a WorkspaceConfigError."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkspaceConfigError(f"{what} {path} is missing") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise WorkspaceConfigError(
            f"{what} {path} is not valid JSON ({exc}); restore it from git or a backup"
        ) from None


def segment_path(journal_dir: Path, number: int) -> Path:
    """The file of segment `number` of an append-only JSONL journal."""
    return journal_dir / f"{number:08d}.jsonl"


def journal_segments(journal_dir: Path) -> list[int]:
    """The segment numbers of a JSONL journal folder (`NNNNNNNN.jsonl`), in order."""
    if not journal_dir.is_dir():
        return []
    numbers = []
    for entry in os.scandir(journal_dir):
        stem, dot, ext = entry.name.partition(".")
        if ext == "jsonl" and dot and stem.isdigit():
            numbers.append(int(stem))
    return sorted(numbers)


def append_durably(path: Path, payload: bytes, *, valid_bytes: int | None = None,
                   sync: bool = True) -> None:
    """Append `payload` to a journal file and fsync it (and its folder, for a new file).

    `valid_bytes` is how much of the file the caller has read as complete lines: anything past
    it is a torn line from a writer that crashed mid-append, and is cut before appending.
    `sync=False` leaves the fsync to the caller (`fsync_file`), who batches several appends.
    """
    with open(path, "ab") as handle:
        size = handle.tell()
        if valid_bytes is not None and size > valid_bytes:
            handle.truncate(valid_bytes)
            handle.seek(valid_bytes)
        handle.write(payload)
        handle.flush()
        if sync:
            os.fsync(handle.fileno())
    if size == 0:
        fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    """Make what was written to `path` (by this process or any other) durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextmanager
def held(lock: FileLock, *, folder: Path, on_timeout: Callable[[], Exception]
         ) -> Iterator[None]:
    """Hold an inter-process file lock over `folder` (created first); a lock not taken in time
    raises `on_timeout()`, an error naming what is locked and what to do."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except LockTimeout:
        raise on_timeout() from None
    except OSError as exc:  # a read-only or full disk, or no permission
        raise WorkspaceWriteError(
            f"cannot lock {lock.lock_file}: {exc.strerror or exc}; the workspace must be "
            "writable: remount it read-write, free space or fix its permissions, then re-run"
        ) from exc
    try:
        yield
    finally:
        lock.release()
