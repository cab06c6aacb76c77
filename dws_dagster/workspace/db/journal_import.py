"""Import of a workspace written in the journal format (before the database store)."""

from __future__ import annotations

from typing import Any


def import_journal_files(store: Any) -> None:
    """Placeholder while the importer is written: refuses workspaces that have journal files."""
    lineage = store.workspace.meta_dir / "lineage"
    if lineage.exists():
        raise NotImplementedError("journal import not written yet")
