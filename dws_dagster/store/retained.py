"""Which versions of a ref some snapshot retains, as the store's snapshot tables say: what
must stay retained, locally or where remote data keeps its versions.

A store query rather than part of `snapshots`, so that the write path, which prunes the
versions it keeps aside when it replaces remote data, asks it without depending on snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from dws_dagster.store import schema

if TYPE_CHECKING:
    from dws_dagster.store.lineage_store import LineageStore

_DATA = schema.snapshot_data


def referenced_versions(store: LineageStore, ref: str | None = None) -> dict[str, set[str]]:
    """The versions some snapshot's data rows name, by ref (of `ref` only, when given)."""
    query = select(_DATA.c.ref, _DATA.c.version).where(
        _DATA.c.workspace_id == store.workspace_id, _DATA.c.version.is_not(None)
    )
    if ref is not None:
        query = query.where(_DATA.c.ref == ref)
    found: dict[str, set[str]] = {}
    with store.reading() as connection:
        for row_ref, version in connection.execute(query.distinct()):
            found.setdefault(row_ref, set()).add(version)
    return found
