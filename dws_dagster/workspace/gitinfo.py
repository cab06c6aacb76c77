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
