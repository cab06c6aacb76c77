"""The store's side of snapshots: a snapshot's lineage kept, read, compared with another or
with the current lineage, dropped, and made current again (restore).

A snapshot keeps references to the records of its refs (`dws_snapshot_refs`), not copies, so
taking one costs a row per ref and comparing two compares record ids without reading records.
The data of a snapshot, its index and retention are `workspace/snapshots/`'s; this module is
only the tables the lineage store holds for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, insert, literal, or_, select, update

from dws_dagster.store import schema
from dws_dagster.store.current import CurrentLineage
from dws_dagster.store.gc_pause import gc_paused
from dws_dagster.store.ref_state import RefState, status_from_columns
from dws_dagster.store.rows import StoreRows
from dws_dagster.store.statements import CHUNK, REFS, SNAP
from dws_dagster.store.transactions import StoreTransactions
from dws_dagster.store.writes import Writes


class SnapshotTables:
    """Snapshots' lineage in the store, and comparisons of it with the current lineage."""

    def __init__(
        self, tx: StoreTransactions, rows: StoreRows, current: CurrentLineage, writes: Writes
    ) -> None:
        self._tx = tx
        self._rows = rows
        self._current = current
        self._writes = writes

    def _side(self, snapshot_hash: str | None) -> Any:
        """The rows of the current lineage (None) or of a snapshot, as one selectable."""
        if snapshot_hash is None:
            return (
                select(
                    REFS.c.ref,
                    REFS.c.owner,
                    REFS.c.record_id,
                    REFS.c.attempt_id,
                    REFS.c.unknown,
                )
                .where(REFS.c.workspace_id == self._tx.workspace_id)
                .subquery()
            )
        return (
            select(SNAP.c.ref, SNAP.c.owner, SNAP.c.record_id, SNAP.c.attempt_id, SNAP.c.unknown)
            .where(SNAP.c.workspace_id == self._tx.workspace_id, SNAP.c.hash == snapshot_hash)
            .subquery()
        )

    def identity_rows(self, snapshot_hash: str | None = None) -> list[tuple[str, str, str | None]]:
        """(ref, status, identity digest of its record) of every ref, sorted: what a snapshot
        hash covers, read from indexed columns without parsing any record."""
        side = self._side(snapshot_hash)
        records = schema.records
        query = (
            select(side.c.ref, side.c.owner, records.c.identity, side.c.attempt_id, side.c.unknown)
            .select_from(side.outerjoin(records, records.c.id == side.c.record_id))
            .order_by(side.c.ref)
        )
        where = "current lineage" if snapshot_hash is None else f"snapshot {snapshot_hash[:12]}"
        with self._tx.reading() as connection, gc_paused():
            return [
                (
                    self._rows.checked_ref(ref, where),
                    status_from_columns(
                        self._rows.owner(ref, owner, where),
                        identity is not None,
                        attempt is not None,
                        bool(unknown),
                    ),
                    self._rows.column(ref, "record identity", identity, where),
                )
                for ref, owner, identity, attempt, unknown in connection.execute(query)
            ]

    def owners(self, snapshot_hash: str | None = None) -> list[tuple[str, str | None]]:
        """(ref, step that writes it or None) of every ref of the current lineage (None) or
        of a snapshot, sorted, from indexed columns: what groups a diff's partitions."""
        side = self._side(snapshot_hash)
        where = "current lineage" if snapshot_hash is None else f"snapshot {snapshot_hash[:12]}"
        with self._tx.reading() as connection:
            return [
                (self._rows.checked_ref(ref, where), self._rows.owner(ref, owner, where))
                for ref, owner in connection.execute(
                    select(side.c.ref, side.c.owner).order_by(side.c.ref)
                )
            ]

    def differing_refs(self, before: str | None, after: str | None) -> list[str]:
        """Refs whose lineage differs between two states (None: the current lineage, else a
        snapshot hash), found by comparing record ids in the database: a diff reads only the
        records of what changed."""
        a, b = self._side(before), self._side(after)
        same = and_(
            a.c.owner.is_not_distinct_from(b.c.owner),
            a.c.record_id.is_not_distinct_from(b.c.record_id),
            a.c.attempt_id.is_not_distinct_from(b.c.attempt_id),
            a.c.unknown == b.c.unknown,
        )
        changed = (
            select(a.c.ref)
            .select_from(a.outerjoin(b, a.c.ref == b.c.ref))
            .where(or_(b.c.ref.is_(None), ~same))
        )
        added = (
            select(b.c.ref).select_from(b.outerjoin(a, a.c.ref == b.c.ref)).where(a.c.ref.is_(None))
        )
        with self._tx.reading() as connection:
            found = set(connection.scalars(changed)) | set(connection.scalars(added))
        return sorted(found)

    def states_in(self, snapshot_hash: str | None, refs: Sequence[str]) -> dict[str, RefState]:
        """The states of `refs` in the current lineage (None) or in a snapshot."""
        if snapshot_hash is None:
            return self._current.states_of(refs)
        found: dict[str, RefState] = {}
        wanted = list(dict.fromkeys(refs))
        with self._tx.reading() as connection:
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    self._rows.states_query(SNAP).where(
                        SNAP.c.hash == snapshot_hash,
                        SNAP.c.ref.in_(wanted[start : start + CHUNK]),
                    )
                ).all()
                for row in rows:
                    found[row[0]] = self._rows.state_of(row, f"snapshot {snapshot_hash[:12]}")
        return found

    def save_snapshot(self, snapshot_hash: str) -> None:
        """Keep the current lineage as snapshot `snapshot_hash`'s manifest (references to the
        records, not copies); the caller holds the lock and adds the index entry."""
        with self._tx.locked() as connection:
            ws_id = self._tx.workspace_id
            exists = connection.execute(
                select(func.count())
                .select_from(SNAP)
                .where(SNAP.c.workspace_id == ws_id, SNAP.c.hash == snapshot_hash)
            ).scalar()
            if exists:
                return
            connection.execute(
                insert(SNAP).from_select(
                    ["workspace_id", "hash", "ref", "owner", "record_id", "attempt_id", "unknown"],
                    select(
                        REFS.c.workspace_id,
                        literal(snapshot_hash),
                        REFS.c.ref,
                        REFS.c.owner,
                        REFS.c.record_id,
                        REFS.c.attempt_id,
                        REFS.c.unknown,
                    ).where(REFS.c.workspace_id == ws_id),
                )
            )

    def snapshot_items(self, snapshot_hash: str) -> list[tuple[str, RefState]]:
        """A snapshot's lineage, sorted by ref."""
        with self._tx.reading() as connection, gc_paused():
            rows = connection.execute(
                self._rows.states_query(SNAP)
                .where(SNAP.c.hash == snapshot_hash)
                .order_by(SNAP.c.ref)
            ).all()
            return [
                (row[0], self._rows.state_of(row, f"snapshot {snapshot_hash[:12]}")) for row in rows
            ]

    def drop_snapshot(self, snapshot_hash: str) -> None:
        with self._tx.locked() as connection:
            connection.execute(
                delete(SNAP).where(
                    SNAP.c.workspace_id == self._tx.workspace_id, SNAP.c.hash == snapshot_hash
                )
            )

    def reset(self, snapshot_hash: str, unknown: Iterable[str] = ()) -> None:
        """Make a snapshot's lineage the current lineage (restore), marking `unknown` the refs
        whose data could not be brought back."""
        partial = sorted(set(unknown))
        with self._tx.locked() as connection:
            self._tx.forget_cached()
            ws_id = self._tx.workspace_id
            connection.execute(delete(REFS).where(REFS.c.workspace_id == ws_id))
            connection.execute(
                insert(REFS).from_select(
                    ["workspace_id", "ref", "owner", "record_id", "attempt_id", "unknown"],
                    select(
                        SNAP.c.workspace_id,
                        SNAP.c.ref,
                        SNAP.c.owner,
                        SNAP.c.record_id,
                        SNAP.c.attempt_id,
                        SNAP.c.unknown,
                    ).where(SNAP.c.workspace_id == ws_id, SNAP.c.hash == snapshot_hash),
                )
            )
            for start in range(0, len(partial), CHUNK):
                connection.execute(
                    update(REFS)
                    .where(
                        REFS.c.workspace_id == ws_id,
                        REFS.c.ref.in_(partial[start : start + CHUNK]),
                    )
                    .values(unknown=True)
                )
            self._writes.log(
                connection, "reset", None, detail={"snapshot": snapshot_hash, "unknown": partial}
            )
