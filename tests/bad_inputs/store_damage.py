"""Hand edits of a copied workspace's store for the fuzz tests: read its rows with a plain
sqlite3 connection (not the code tested), and damage one cell of a row (any SQLite type, a
JSON text damaged in structure, another row's id or one that names no row), with how to put
it back."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from hypothesis import assume
from hypothesis import strategies as st

from tests.bad_inputs.json_damage import ABSOLUTE, json_values, mutated_json

#: The store's database file under `.dataworkspace/`.
STORE = "store.db"
#: Puts damage back.
Repair = Callable[[], None]


def query(root: Path, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of the copy's store read with a plain sqlite3 connection (not the code tested)."""
    connection = sqlite3.connect(root / ".dataworkspace" / STORE)
    try:
        return connection.execute(statement, params).fetchall()
    finally:
        connection.close()


#: The columns of the store's tables a hand edit may damage (the workspaces table and the
#: migration version aside: they say which store this is, not what it holds).
COLUMNS = {
    "dws_records": ("ref", "version", "good", "body", "workspace_id"),
    "dws_record_inputs": ("ref", "version", "record_id"),
    "dws_refs": ("ref", "owner", "record_id", "attempt_id", "unknown"),
    "dws_operations": ("op", "ref", "record_id", "detail", "at"),
    "dws_snapshots": ("hash", "position", "message", "created", "metrics", "results", "resources"),
    "dws_snapshot_tags": ("tag", "hash", "position"),
    "dws_snapshot_refs": ("hash", "ref", "owner", "record_id", "attempt_id", "unknown"),
}
JSON_COLUMNS = {"body", "detail", "metrics", "results", "resources"}


@functools.cache
def pristine_rows(pristine: Path) -> dict[str, list[tuple[Any, ...]]]:
    """(rowid, columns...) of every damageable row of the pristine store."""
    return {
        table: query(pristine / "ws", f"SELECT rowid, {', '.join(columns)} FROM {table}")
        for table, columns in COLUMNS.items()
    }


def cell_values(draw: st.DrawFn, column: str, value: Any, rows: Any) -> Any:
    """Another value for a column: any SQLite type, a JSON text damaged in structure, another
    row's id or one that names no row."""
    kinds = ["null", "int", "text", "blob", "json"]
    if column in JSON_COLUMNS and isinstance(value, str):
        kinds.append("mutated")
    if column.endswith("_id"):
        kinds.append("id")
    kind = draw(st.sampled_from(kinds))
    if kind == "null":
        return None
    if kind == "int":
        return draw(st.integers(-(2**63), 2**63 - 1))
    if kind == "text":
        return draw(
            st.text(max_size=12)
            | st.sampled_from(
                [
                    "..",
                    "../../outside",
                    ABSOLUTE,
                    "inter/prep",
                    "results/exp",
                    "0" * 32,
                    "v1",
                    "record",
                    "claim",
                    "reset",
                    "[]",
                    "{}",
                    "null",
                    "x" * 5000,
                ]
            )
        )
    if kind == "blob":
        return draw(st.binary(max_size=8))
    if kind == "json":
        return orjson.dumps(draw(json_values())).decode()
    if kind == "mutated":
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value[: len(value) // 2]
        return orjson.dumps(mutated_json(draw, parsed)).decode()
    ids = [row[0] for row in rows["dws_records"]]
    return draw(st.sampled_from([*ids, 0, -1, 10**9]))


@st.composite
def row_damage(draw: st.DrawFn, pristine: Path) -> Callable[[Path], Repair]:
    rows = pristine_rows(pristine)
    table = draw(st.sampled_from([t for t in COLUMNS if rows[t]]))
    row = draw(st.sampled_from(rows[table]))
    number = draw(st.integers(0, len(COLUMNS[table]) - 1))
    column = COLUMNS[table][number]
    old = row[1 + number]
    new = cell_values(draw, column, old, rows)
    statement = f"UPDATE {table} SET {column} = ? WHERE rowid = ?"

    def damage(root: Path) -> Repair:
        try:
            edit(root, statement, new, row[0])
        except sqlite3.IntegrityError:  # NOT NULL: SQLite refuses that edit itself
            assume(False)

        def repair() -> None:  # the row put back (replacing a row the battery made since)
            edit(root, f"UPDATE OR REPLACE {table} SET {column} = ? WHERE rowid = ?", old, row[0])

        return repair

    return damage


def edit(root: Path, statement: str, *params: Any) -> None:
    """A hand edit of the store: a plain connection, foreign keys not enforced."""
    connection = sqlite3.connect(root / ".dataworkspace" / STORE)
    try:
        with connection:
            connection.execute(statement, params)
    finally:
        connection.close()
