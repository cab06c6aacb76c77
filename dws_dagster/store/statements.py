"""The SQL the lineage store runs, built once at import or once per shape.

Building a SQLAlchemy statement and finding it in the compiled cache costs more than running
it, and the sensor and every step run the same few statements thousands of times: so they are
module constants with bound parameters, and the few whose shape varies (a number of refs, a
dialect) are built by cached functions, one per shape. The table aliases shared by the queries
(`R` and `A`: a ref's good record and its failed attempt) live here with them.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Text, and_, bindparam, column, func, insert, null, select, union_all, values

from dws_dagster.store import schema

#: Refs per statement when a list of refs is sent as parameters (SQLite allows 32,766).
CHUNK = 500

#: A ref's good record (`R`) and its failed attempt (`A`), joined to its row.
R = schema.records.alias("r")
A = schema.records.alias("a")
REFS = schema.refs
SNAP = schema.snapshot_refs
RECORDS = schema.records


def states_select(table: Any) -> Any:
    """(ref, owner, record id and body, attempt id and body, unknown) of a workspace's refs in
    `table` (the current lineage, or snapshots')."""
    return (
        select(table.c.ref, table.c.owner, R.c.id, R.c.body, A.c.id, A.c.body, table.c.unknown)
        .select_from(
            table.outerjoin(R, R.c.id == table.c.record_id).outerjoin(
                A, A.c.id == table.c.attempt_id
            )
        )
        .where(table.c.workspace_id == bindparam("ws"))
    )


GET_STATE = states_select(REFS).where(REFS.c.ref == bindparam("ref"))
STATES_IN = states_select(REFS).where(REFS.c.ref.in_(bindparam("refs", expanding=True)))
FIND_RECORD = (
    select(RECORDS.c.id, RECORDS.c.body)
    .where(
        RECORDS.c.workspace_id == bindparam("ws"),
        RECORDS.c.ref == bindparam("ref"),
        RECORDS.c.version == bindparam("version"),
        RECORDS.c.good,
    )
    .order_by(RECORDS.c.id.desc())
    .limit(1)
)
RECORD_BY_DIGEST = select(RECORDS.c.id).where(
    RECORDS.c.workspace_id == bindparam("ws"), RECORDS.c.digest == bindparam("digest")
)
_RANKED = (
    select(
        RECORDS.c.id,
        func.row_number()
        .over(partition_by=RECORDS.c.ref, order_by=RECORDS.c.id.desc())
        .label("rank"),
    )
    .where(
        RECORDS.c.workspace_id == bindparam("ws"),
        RECORDS.c.ref.in_(bindparam("refs", expanding=True)),
    )
    .subquery("ranked")
)
REF_HISTORY = (
    select(RECORDS.c.id, RECORDS.c.ref, RECORDS.c.body)
    .select_from(_RANKED.join(RECORDS, RECORDS.c.id == _RANKED.c.id))
    .where(_RANKED.c.rank <= bindparam("most"))
    .order_by(RECORDS.c.ref, RECORDS.c.id.desc())
)
INSERT_INPUTS = insert(schema.record_inputs)
INSERT_OPERATION = insert(schema.operations)


@functools.cache
def overlapping_select(depth: int) -> Any:
    """Refs that are one of `depth` given refs (a ref and its ancestors), with their states,
    or lie inside the first, with their owners only: one statement per depth (an expanding IN
    is rebuilt at every execution). The states come along because whoever checks a ref
    against the one-writer rule reads its state next. Two selects in a UNION ALL, each searching the
    (workspace, ref) key: joined by OR, both databases' planners fell back to reading every
    ref of the workspace."""
    named = states_select(REFS).where(REFS.c.ref.in_([bindparam(f"a{i}") for i in range(depth)]))
    inside = select(REFS.c.ref, REFS.c.owner, null(), null(), null(), null(), REFS.c.unknown).where(
        REFS.c.workspace_id == bindparam("ws"),
        REFS.c.ref > bindparam("low"),
        REFS.c.ref < bindparam("high"),
    )
    return union_all(named, inside)


@functools.cache
def find_records_select(size: int) -> Any:
    """The good records of `size` (ref, version) pairs, bound as `r0`, `v0`, ...: the pairs
    as a table joined to the (workspace, ref, version) index. SQLite searches only the
    workspace for `(ref, version) IN (...)`, and a query by ref reads every version of a ref
    materialized thousands of times. One statement per size, built and compiled once (a
    VALUES list of literal pairs is compiled again at every execution)."""
    asked = (
        values(column("ref", Text), column("version", Text), name="asked")
        .data(
            [(bindparam(f"r{i}", type_=Text), bindparam(f"v{i}", type_=Text)) for i in range(size)]
        )
        .cte("asked")
    )
    return (
        select(RECORDS.c.id, RECORDS.c.ref, RECORDS.c.version, RECORDS.c.body)
        .select_from(
            asked.join(
                RECORDS,
                and_(
                    RECORDS.c.workspace_id == bindparam("ws"),
                    RECORDS.c.ref == asked.c.ref,
                    RECORDS.c.version == asked.c.version,
                ),
            )
        )
        .where(RECORDS.c.good)
    )


def _dialect_insert(dialect: str) -> Any:
    """The INSERT with ON CONFLICT of `dialect`, imported when first needed: importing the
    PostgreSQL dialect module would slow the start of every command on SQLite."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


@functools.cache
def upsert_ref(dialect: str, columns: frozenset[str]) -> Any:
    """INSERT ... ON CONFLICT (workspace, ref) DO UPDATE of `columns`: one statement where an
    update then an insert took two (both databases have it, each in its own dialect)."""
    statement = _dialect_insert(dialect)(REFS)
    return statement.on_conflict_do_update(
        index_elements=[REFS.c.workspace_id, REFS.c.ref],
        set_={name: statement.excluded[name] for name in sorted(columns)},
    )


@functools.cache
def insert_new_record(dialect: str) -> Any:
    """INSERT a record unless its digest is stored, giving its id when it was new."""
    statement = _dialect_insert(dialect)(RECORDS)
    return statement.on_conflict_do_nothing(
        index_elements=[RECORDS.c.workspace_id, RECORDS.c.digest]
    ).returning(RECORDS.c.id)
