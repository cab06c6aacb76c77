"""The git commit of the code a step ran, when the workspace is a git repository."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


@functools.lru_cache(maxsize=32)
def git_commit(directory: Path) -> str | None:
    """HEAD's commit of the repository holding `directory`, or None outside git.

    Uncommitted edits are not flagged: the workspace's own lineage files change with every
    step, so a dirty flag would be set nearly always and tell nothing; code resources carry
    their own content versions instead.
    """
    try:
        head = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() or None if head.returncode == 0 else None


def _git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@functools.lru_cache(maxsize=32)
def git_remote_url(directory: Path) -> str | None:
    """The `origin` remote's URL without user-info (tokens in URLs never leave the machine)."""
    from .records import strip_userinfo

    url = _git(directory, "config", "--get", "remote.origin.url")
    return strip_userinfo(url) if url else None


@functools.lru_cache(maxsize=32)
def git_toplevel(directory: Path) -> Path | None:
    """The root folder of the repository holding `directory`."""
    top = _git(directory, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


@functools.lru_cache(maxsize=32)
def git_branch(directory: Path) -> str | None:
    branch = _git(directory, "rev-parse", "--abbrev-ref", "HEAD")
    return None if branch in (None, "HEAD") else branch
