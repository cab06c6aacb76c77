"""The git commit of the code a step ran, when the workspace is a git repository.

A step in a notebook or a long-lived process must record the commit checked out *now*, so
HEAD's commit is not cached for the process's life: it is kept only while git's files that
decide it are unchanged (`HEAD`, the branch's loose ref, `packed-refs`). Checking those costs a
few `stat`/`read` calls (microseconds); asking git costs a process start (milliseconds), paid
again only after a commit, checkout or reset.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

#: A ref name HEAD may point to that is safe to open under the repository's git folder.
_REF_NAME = re.compile(r"refs/[A-Za-z0-9._/+-]+")
#: What HEAD holds in a repository whose refs are in a reftable (no files to watch).
_REFTABLE_HEAD = "refs/heads/.invalid"
_MAX_CACHED = 64
#: directory -> (what git's files looked like, commit) at the last look.
_COMMITS: dict[Path, tuple[tuple[object, ...], str | None]] = {}
_BRANCHES: dict[Path, tuple[tuple[object, ...], str | None]] = {}


def git_commit(directory: Path) -> str | None:
    """HEAD's commit of the repository holding `directory`, or None outside git.

    Uncommitted edits are not flagged: the workspace's own lineage files change with every
    step, so a dirty flag would be set nearly always and tell nothing; code resources carry
    their own content versions instead.
    """
    return _while_head_unchanged(_COMMITS, directory, lambda: _git(directory, "rev-parse", "HEAD"))


def git_branch(directory: Path) -> str | None:
    """The branch checked out now (None when HEAD is detached, or outside git)."""

    def ask() -> str | None:
        branch = _git(directory, "rev-parse", "--abbrev-ref", "HEAD")
        return None if branch in (None, "HEAD") else branch

    return _while_head_unchanged(_BRANCHES, directory, ask)


def clear_cache() -> None:
    """Forget every cached answer (tests; never needed for correctness)."""
    _COMMITS.clear()
    _BRANCHES.clear()
    _git_dirs.cache_clear()


git_commit.cache_clear = clear_cache  # type: ignore[attr-defined]  # the lru_cache API it had


def _while_head_unchanged(
    cache: dict[Path, tuple[tuple[object, ...], str | None]],
    directory: Path,
    ask: Callable[[], str | None],
) -> str | None:
    dirs = _git_dirs(directory, _discovery_key(directory))
    if dirs is None:
        return None
    key = _head_key(*dirs)
    if key is not None:
        cached = cache.get(directory)
        if cached is not None and cached[0] == key:
            return cached[1]
    answer = ask()
    if key is not None:
        if len(cache) >= _MAX_CACHED:
            cache.clear()
        cache[directory] = (key, answer)
    return answer


def _discovery_key(directory: Path) -> tuple[str | None, str | None]:
    """What decides whether (and where) `directory` lies in a repository: the nearest folder
    holding a `.git` entry, and $GIT_DIR. A repository created later changes it."""
    env = os.environ.get("GIT_DIR")
    current = os.path.abspath(directory)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current, env
        parent = os.path.dirname(current)
        if parent == current:
            return None, env
        current = parent


@functools.lru_cache(maxsize=32)
def _git_dirs(directory: Path, _key: tuple[str | None, str | None]) -> tuple[str, str] | None:
    """(git folder, common git folder) of the repository holding `directory` (they differ in
    a linked worktree: HEAD is its own, branches are shared), or None outside git."""
    found = _git(directory, "rev-parse", "--absolute-git-dir", "--git-common-dir")
    lines = found.splitlines() if found is not None else []
    if len(lines) != 2:
        return None
    common = os.path.normpath(os.path.join(directory, lines[1]))  # relative to `directory`
    return lines[0], common


def _read(path: str) -> bytes | None:
    """The start of a small file (a ref: 41 bytes); None if it does not exist (other errors
    propagate). Unbuffered: a third of the cost of `open().read()`."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _head_key(git_dir: str, common: str) -> tuple[object, ...] | None:
    """What git's files that decide HEAD's commit look like now; None when they cannot be
    watched this way (reftable storage, an odd HEAD): then git is asked every time.
    Plain `os` calls: this runs for every record a step writes."""
    try:
        head = _read(os.path.join(git_dir, "HEAD"))
        if head is None or not head.startswith(b"ref: "):
            return (head,)  # detached: the commit is in HEAD itself
        name = head[5:].strip().decode("utf-8", "replace")
        if not _REF_NAME.fullmatch(name) or ".." in name or name == _REFTABLE_HEAD:
            return None
        loose = _read(os.path.join(common, name))  # rewritten by every commit to the branch
        try:  # rewritten (renamed into place) when refs are packed
            info = os.stat(os.path.join(common, "packed-refs"))
            packed: tuple[int, int, int] | None = (info.st_ino, info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            packed = None
    except OSError:
        return None
    return head, loose, packed


def run_git(directory: Path, *args: str, timeout: float = 10) -> str | None:
    """git's output in `directory` (empty when it says nothing), or None when it failed."""
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _git(directory: Path, *args: str) -> str | None:
    """git's answer, or None when it failed or had nothing to say."""
    return run_git(directory, *args) or None


@functools.lru_cache(maxsize=32)
def git_remote_url(directory: Path) -> str | None:
    """The `origin` remote's URL without user-info (tokens in URLs never leave the machine)."""
    from dws_dagster.workspace.redaction import redact_text

    url = _git(directory, "config", "--get", "remote.origin.url")
    return redact_text(url) if url else None


@functools.lru_cache(maxsize=32)
def git_toplevel(directory: Path) -> Path | None:
    """The root folder of the repository holding `directory`."""
    top = _git(directory, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def git_state(directory: Path) -> dict[str, object] | None:
    """What git says of the code under `directory` for a snapshot: HEAD's commit and whether
    the files under `directory` differ from it (untracked files count; ignored ones do not);
    None outside git. Scoped to the folder, so the workspace's own files elsewhere in the
    repository do not make every snapshot dirty."""
    commit = git_commit(directory)
    if commit is None:
        return None
    status = subprocess.run(
        ["git", "-C", str(directory), "status", "--porcelain", "--", "."],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    dirty = status.returncode != 0 or bool(status.stdout.strip())
    return {"git_commit": commit, "dirty": dirty}
