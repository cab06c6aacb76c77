"""Copying and removing folder trees without recursion.

A data folder may be nested deeper than Python's recursion limit (about a thousand frames):
`shutil.copytree`, `shutil.rmtree` (before Python 3.12), `os.walk` and `Path.rglob` recurse
once per level and fail with `RecursionError` there, which no caller expects. Every walk over a
workspace's data goes through an explicit stack instead (`data_files.walk` for versions, these
for copies and removals), so depth costs memory, not stack frames.

Symlinked folders are neither entered nor copied, as versions do not enter them (they are not
part of a ref's data); a symlink is removed as a link, never followed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

#: Told a folder and the names in it, returns the names not to copy (`shutil.ignore_patterns`'
#: shape).
Ignore = Callable[[str, list[str]], Iterable[str]]


def copy_tree(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    ignore: Ignore | None = None,
    exists_ok: bool = False,
) -> None:
    """Copy the folder `source` to `destination` (files with `shutil.copy2`: bytes, mode and
    times; folders made as found). The first error is raised as the `OSError` it is."""
    pending = [(os.fspath(source), os.fspath(destination))]
    while pending:
        src, dst = pending.pop()
        os.makedirs(dst, exist_ok=exists_ok or dst != os.fspath(destination))
        with os.scandir(src) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        skipped = set(ignore(src, [entry.name for entry in entries])) if ignore else set()
        folders = []
        for entry in entries:
            if entry.name in skipped:
                continue
            target = os.path.join(dst, entry.name)
            if entry.is_dir(follow_symlinks=False):
                folders.append((entry.path, target))
            elif entry.is_dir():
                continue  # a symlinked folder: not part of the data
            else:
                shutil.copy2(entry.path, target)
        pending.extend(reversed(folders))
    _copy_folder_stats(os.fspath(source), os.fspath(destination))


def _copy_folder_stats(source: str, destination: str) -> None:
    try:
        shutil.copystat(source, destination)
    except OSError:
        pass  # a folder's times and mode are not data


def remove_tree(path: str | os.PathLike[str], *, ignore_errors: bool = False) -> None:
    """Delete the folder `path` and all it holds (a symlink in it is removed, not followed).
    With `ignore_errors`, what cannot be removed stays and nothing is raised."""
    top = os.fspath(path)
    folders = [top]
    pending = [top]
    try:
        while pending:
            folder = pending.pop()
            try:
                listing = list(os.scandir(folder))
            except OSError:
                if not ignore_errors:
                    raise
                continue
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                    pending.append(entry.path)
                else:
                    _unlink(entry.path, ignore_errors)
        for folder in reversed(folders):
            try:
                os.rmdir(folder)
            except OSError:
                if not ignore_errors:
                    raise
    except FileNotFoundError:
        if not ignore_errors:
            raise


def _unlink(path: str, ignore_errors: bool) -> None:
    try:
        os.unlink(path)
    except OSError:
        if not ignore_errors:
            raise


def remove_path(path: Path) -> None:
    """Delete a file, a symlink or a folder tree at `path`, whichever it is (nothing there is
    fine)."""
    if path.is_dir() and not path.is_symlink():
        remove_tree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def make_folders(path: str | os.PathLike[str]) -> None:
    """`Path(path).mkdir(parents=True, exist_ok=True)` one level at a time, from the deepest
    folder that exists down (`Path.mkdir` and `os.makedirs` recurse once per missing level)."""
    missing = []
    folder = Path(path)
    while not folder.is_dir() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        each.mkdir(exist_ok=True)
