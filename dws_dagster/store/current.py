"""Reading the current lineage: the state of each ref, the refs around one ref, who reads
a ref, and the indexed summaries `status` and snapshots need.

Reads only. They join an open transaction when there is one, and the states they read stay
in that transaction's cache, so the checks of a step (`rules`) and the writes that follow
read each ref once. Whole-lineage reads come from indexed columns where they can, so that
listing thousands of refs does not parse thousands of records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, select

from dws_dagster.store import schema
from dws_dagster.store.gc_pause import gc_paused
from dws_dagster.store.ref_state import RefState, RefSummary, status_from_columns
from dws_dagster.store.rows import StoreRows
from dws_dagster.store.statements import (
    CHUNK,
    GET_STATE,
    REFS,
    STATES_IN,
    A,
    R,
    overlapping_select,
)
from dws_dagster.store.transactions import StoreTransactions
from dws_dagster.workspace.refs import ResourceRef, as_ref


class CurrentLineage:
    """The current lineage of a workspace's refs, read."""

    def __init__(self, tx: StoreTransactions, rows: StoreRows) -> None:
        self._tx = tx
        self._rows = rows

    def get(self, ref: ResourceRef | str) -> RefState | None:
        """The current lineage of `ref`, None when it has none."""
        key = str(ref)
        return self.states_of([key]).get(key)

    def items(self) -> list[tuple[str, RefState]]:
        """Every ref with lineage, sorted by ref."""
        with self._tx.reading() as connection, gc_paused():
            rows = connection.execute(self._rows.states_query().order_by(REFS.c.ref)).all()
            return [(row[0], self._rows.state_of(row, "current lineage")) for row in rows]

    def state(self) -> dict[str, RefState]:
        """Every ref's current lineage, by ref."""
        return dict(self.items())

    def refs(self) -> list[str]:
        """Every ref with lineage, sorted, without reading records."""
        with self._tx.reading() as connection:
            return [
                self._rows.checked_ref(ref, "current lineage")
                for ref in connection.scalars(
                    select(REFS.c.ref)
                    .where(REFS.c.workspace_id == self._tx.workspace_id)
                    .order_by(REFS.c.ref)
                )
            ]

    def overlapping(self, ref: ResourceRef) -> list[str]:
        """Refs with lineage that are `ref`, contain it, or lie inside it."""
        return [other for other, _owner in self.overlapping_owners(ref)]

    def overlapping_owners(self, ref: ResourceRef) -> list[tuple[str, str | None]]:
        """(ref, owner) of the refs that overlap `ref`: `ref` and its ancestors first (their
        states kept in the transaction's cache), then the refs inside it."""
        text = str(ref)
        around = [str(a) for a in ref.ancestors()] + [text]
        order = {name: i for i, name in enumerate(around)}
        where = "current lineage"
        with self._tx.reading() as connection:
            # Inside `text`: refs between "text/" and "text0" ('0' follows '/'), bytewise.
            rows = connection.execute(
                overlapping_select(len(around)),
                {
                    "ws": self._tx.workspace_id,
                    "low": text + "/",
                    "high": text + "0",
                    **{f"a{i}": name for i, name in enumerate(around)},
                },
            ).all()
            found: list[tuple[str, str | None]] = []
            states: dict[str, RefState | None] = dict.fromkeys(around)
            for row in rows:
                other = self._rows.checked_ref(row[0], where)
                if other in order:
                    state = states[other] = self._rows.state_of(row, where)
                    found.append((other, state.owner))
                else:
                    found.append((other, self._rows.owner(other, row[1], where)))
            self._tx.remember(states)
        return sorted(found, key=lambda item: (order.get(item[0], len(order)), item[0]))

    def states_of(self, refs: Sequence[str]) -> dict[str, RefState]:
        """The states of those of `refs` that have lineage, read once per transaction: a
        step's checks ask for the same refs several times."""
        found: dict[str, RefState] = {}
        with self._tx.reading() as connection:
            cache = self._tx.cache()
            ws_id = self._tx.workspace_id
            wanted = []
            for ref in dict.fromkeys(refs):
                memo = (ws_id, ref)
                if cache is not None and memo in cache:
                    if cache[memo] is not None:
                        found[ref] = cache[memo]
                else:
                    wanted.append(ref)
            for start in range(0, len(wanted), CHUNK):
                chunk = wanted[start : start + CHUNK]
                read: dict[str, RefState | None] = dict.fromkeys(chunk)
                # One ref (a step's usual input) by equality: an expanding IN is rebuilt at
                # every execution.
                rows = (
                    connection.execute(GET_STATE, {"ws": ws_id, "ref": chunk[0]})
                    if len(chunk) == 1
                    else connection.execute(STATES_IN, {"ws": ws_id, "refs": chunk})
                )
                for row in rows:
                    state = read[row[0]] = self._rows.state_of(row, "current lineage")
                    found[row[0]] = state
                self._tx.remember(read)
        return found

    def readers(self, ref: str) -> list[tuple[str, RefState, dict[str, str]]]:
        """Current records that read `ref`, a ref containing it or one inside it: (the ref
        each record is the lineage of, its state, the input it read). One indexed query, so
        downstream lineage does not read every ref's record."""
        inputs = schema.record_inputs
        around = [str(a) for a in as_ref(ref).ancestors()] + [ref]

        def reading(condition: Any) -> Any:
            return (
                select(
                    REFS.c.ref,
                    REFS.c.owner,
                    R.c.id,
                    R.c.body,
                    A.c.id,
                    A.c.body,
                    REFS.c.unknown,
                    inputs.c.ref,
                    inputs.c.version,
                )
                .select_from(
                    inputs.join(
                        REFS,
                        and_(
                            REFS.c.workspace_id == inputs.c.workspace_id,
                            REFS.c.record_id == inputs.c.record_id,
                        ),
                    )
                    .outerjoin(R, R.c.id == REFS.c.record_id)
                    .outerjoin(A, A.c.id == REFS.c.attempt_id)
                )
                .where(inputs.c.workspace_id == self._tx.workspace_id, condition)
            )

        # Two selects, each searching the (workspace, ref) index of the inputs (see
        # `overlapping_select` for why not one with OR).
        with self._tx.reading() as connection:
            rows = [
                *connection.execute(reading(inputs.c.ref.in_(around))).all(),
                *connection.execute(
                    reading(and_(inputs.c.ref > ref + "/", inputs.c.ref < ref + "0"))
                ).all(),
            ]
        rows.sort(key=lambda row: (row[0], row[7]))
        return [
            (
                row[0],
                self._rows.state_of(row[:7], "current lineage"),
                {"ref": row[7], "version": row[8]},
            )
            for row in rows
        ]

    def recorded_versions(self) -> list[tuple[str, str | None]]:
        """(ref, version its good record says, None without one) of every ref, sorted: what
        a snapshot compares the data on disk with, from indexed columns."""
        records = schema.records
        query = (
            select(REFS.c.ref, records.c.version)
            .select_from(REFS.outerjoin(records, records.c.id == REFS.c.record_id))
            .where(REFS.c.workspace_id == self._tx.workspace_id)
            .order_by(REFS.c.ref)
        )
        where = "current lineage"
        with self._tx.reading() as connection:
            return [
                (
                    self._rows.checked_ref(ref, where),
                    self._rows.column(ref, "version", version, where),
                )
                for ref, version in connection.execute(query)
            ]

    def summaries(self) -> list[RefSummary]:
        """What `status` shows of every ref, from indexed columns: a record is read only for a
        ref whose last attempt failed or whose data may be partial."""
        records = schema.records
        good = records.alias("good")
        tried = records.alias("tried")
        query = (
            select(
                REFS.c.ref,
                REFS.c.owner,
                good.c.version,
                good.c.end_time,
                tried.c.end_time,
                REFS.c.record_id,
                REFS.c.attempt_id,
                REFS.c.unknown,
            )
            .select_from(
                REFS.outerjoin(good, good.c.id == REFS.c.record_id).outerjoin(
                    tried, tried.c.id == REFS.c.attempt_id
                )
            )
            .where(REFS.c.workspace_id == self._tx.workspace_id)
            .order_by(REFS.c.ref)
        )
        with self._tx.reading() as connection, gc_paused():
            rows = connection.execute(query).all()
            attention = [row[0] for row in rows if row[6] is not None or row[7]]
            states = self.states_of(attention) if attention else {}
        found = []
        where = "current lineage"
        for ref, owner, version, end, tried_end, record_id, attempt_id, unknown in rows:
            self._rows.checked_ref(ref, where)
            found.append(
                RefSummary(
                    ref=ref,
                    owner=self._rows.owner(ref, owner, where),
                    version=self._rows.column(ref, "version", version, where),
                    status=status_from_columns(
                        owner, record_id is not None, attempt_id is not None, bool(unknown)
                    ),
                    finished=self._rows.column(
                        ref, "end time", tried_end if attempt_id is not None else end, where
                    ),
                    state=states.get(ref),
                )
            )
        return found

    def read_without_lineage(self) -> dict[str, tuple[str, list[tuple[str, str | None]]]]:
        """Refs the current records read that have no lineage of their own (source data a
        step read as found, never observed), by ref: (the version the newest of those records
        read, the (ref, step that writes it) of each record that read it). One query over the
        inputs index; refs nested in or around a ref with lineage are the caller's to tell
        apart."""
        inputs = schema.record_inputs
        own = REFS.alias("own")
        query = (
            select(inputs.c.ref, inputs.c.version, inputs.c.record_id, REFS.c.ref, REFS.c.owner)
            .select_from(
                inputs.join(
                    REFS,
                    and_(
                        REFS.c.workspace_id == inputs.c.workspace_id,
                        REFS.c.record_id == inputs.c.record_id,
                    ),
                ).outerjoin(
                    own,
                    and_(own.c.workspace_id == inputs.c.workspace_id, own.c.ref == inputs.c.ref),
                )
            )
            .where(inputs.c.workspace_id == self._tx.workspace_id, own.c.ref.is_(None))
        )
        newest: dict[str, tuple[int, str]] = {}
        readers: dict[str, list[tuple[str, str | None]]] = {}
        where = "current lineage"
        with self._tx.reading() as connection:
            for ref, version, record_id, reader, owner in connection.execute(query):
                self._rows.checked_ref(ref, where)
                version = self._rows.column(ref, "input version", version, where)
                if ref not in newest or newest[ref][0] < record_id:
                    newest[ref] = (record_id, version)
                reader = self._rows.checked_ref(reader, where)
                readers.setdefault(ref, []).append((reader, self._rows.owner(reader, owner, where)))
        return {ref: (newest[ref][1], sorted(readers[ref])) for ref in sorted(newest)}
