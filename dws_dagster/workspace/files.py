"""Durable, atomic file writes and JSON encoding for the workspace's files.

Every write here either completes or leaves the file as it was: a full or read-only disk, or a
missing permission, raises `WorkspaceWriteError` naming the file and what to do, with no temp
file left behind, so the next write succeeds once there is room.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from dws_dagster.errors import WorkspaceConfigError, WorkspaceWriteError
from dws_dagster.workspace.trees import make_folders


def _free_space(path: Path) -> str | None:
    """Free space on the disk holding `path` (its nearest existing folder), for a message."""
    for folder in (path, *path.parents):
        try:
            free = float(shutil.disk_usage(folder).free)
        except (OSError, ValueError):
            continue
        for unit in ("bytes", "KiB", "MiB", "GiB"):
            if free < 1024 or unit == "GiB":
                return f"{free:.0f} {unit}" if unit == "bytes" else f"{free:.1f} {unit}"
            free /= 1024
    return None


def write_error(
    path: str | os.PathLike[str], exc: OSError, *, action: str = "write", kept: bool = False
) -> WorkspaceWriteError:
    """`exc` from writing `path`, as an error that names the file and says what to do.
    `kept`: the write left the file's earlier contents as they were."""
    if isinstance(exc, WorkspaceWriteError):
        return exc
    exc = first_os_error(exc)
    target = Path(path)
    code = exc.errno
    reason = exc.strerror or str(exc)
    if code in (errno.ENOSPC, errno.EDQUOT):
        free = _free_space(target.parent)
        advice = (
            f"{free} free on its disk; " if free else ""
        ) + "free space (or raise the quota), then re-run"
    elif code == errno.EROFS:
        advice = "remount its file system read-write, then re-run"
    elif code in (errno.EACCES, errno.EPERM):
        advice = f"make {target.parent} writable for this user, then re-run"
    elif code in (errno.ENOTDIR, errno.EEXIST):
        advice = "a file stands where a folder is needed: move it away or choose another path"
    elif code == errno.ENOENT and not target.parent.is_dir():
        advice = f"the folder {target.parent} does not exist: create it first"
    elif code == errno.ENOENT:  # the folder is there: what went is a file the write used
        advice = "a file it was writing went away meanwhile (another program removed it): re-run"
    else:
        advice = "fix the cause, then re-run"
    unchanged = "; its earlier contents are unchanged" if kept else ""
    return WorkspaceWriteError(f"cannot {action} {target}: {reason}; {advice}{unchanged}", code)


def first_os_error(exc: OSError) -> OSError:
    """`exc`, or for `shutil.Error` (copytree gathers the errors of its files as text) the
    first file's error, its errno read back from the text so a message can say what to do."""
    if not isinstance(exc, shutil.Error):
        return exc
    for item in exc.args[0] if exc.args and isinstance(exc.args[0], list) else ():
        if isinstance(item, tuple) and len(item) == 3:
            found = re.match(r"\[Errno (\d+)\] ([^:]+)", str(item[2]))
            if found:
                return OSError(int(found.group(1)), found.group(2), item[1])
            return OSError(None, str(item[2]), item[1])
    return OSError(None, str(exc))


@contextmanager
def writing(
    path: str | os.PathLike[str], *, action: str = "write", kept: bool = False
) -> Iterator[None]:
    """Turn an OSError of the block into `write_error(path, ...)`."""
    try:
        yield
    except OSError as exc:
        raise write_error(path, exc, action=action, kept=kept) from exc


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
    """Replace `path` with `data` so that readers and crashes see the old or the new file, whole.
    A failed write (full or read-only disk) raises `WorkspaceWriteError` and leaves `path` as it
    was, with no temp file."""
    with writing(path, kept=True):
        make_folders(path.parent)
        # A name of fixed length, whatever the file's (one near the 255-byte limit included).
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".dws-tmp-", suffix=".tmp")
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp_name, path)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(tmp_name)
            except FileNotFoundError:
                pass
            raise
    if durable:
        fsync_dir(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` (an `os.write` may write part of it, then fail on the rest)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    try:
        data = pretty_json(value)
    except orjson.JSONEncodeError as exc:  # e.g. a file name that is not UTF-8
        raise WorkspaceConfigError(
            f"cannot write {path}: {exc}; a name in it is not valid text (a file name that is "
            "not UTF-8?): rename it"
        ) from None
    atomic_write_bytes(path, data, durable=durable)


def read_json_file(
    path: Path, *, what: str, advice: str = "restore it from git or a backup"
) -> Any:
    """Read a JSON file of the workspace, turning corruption into a WorkspaceConfigError."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkspaceConfigError(f"{what} {path} is missing") from None
    return parse_json(data, path, what=what, advice=advice)


def parse_json(
    data: bytes, path: Path, *, what: str, advice: str = "restore it from git or a backup"
) -> Any:
    """The JSON read from `path`, or a WorkspaceConfigError naming the file and what to do."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise WorkspaceConfigError(f"{what} {path} is not valid JSON ({exc}); {advice}") from None


@contextmanager
def stderr_to(path: Path | None) -> Iterator[None]:
    """This process's file descriptor 2 appended to `path` (None: discarded) for the block: a
    JVM or a process started in it keeps writing there, not on the user's terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        with open(path if path is not None else os.devnull, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
