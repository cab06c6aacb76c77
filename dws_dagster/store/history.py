"""Reading the lineage's past: every record ever stored (good materializations and failed
attempts), and every change made to the current lineage, in order.

Apart from the current lineage because history grows without bound while the current lineage
has one row per ref: these reads go through the records' indexes and read a ref's bodies
only as far as asked (one version, the newest few, a page of changes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import func, select

from dws_dagster.store import schema
from dws_dagster.store.rows import StoreRows
from dws_dagster.store.statements import (
    CHUNK,
    FIND_RECORD,
    REF_HISTORY,
    find_records_select,
)
from dws_dagster.store.transactions import StoreTransactions
from dws_dagster.workspace.refs import ResourceRef


class History:
    """Past records and changes of a workspace's lineage, read."""

    def __init__(self, tx: StoreTransactions, rows: StoreRows) -> None:
        self._tx = tx
        self._rows = rows

    def find_record(self, ref: ResourceRef | str, version: str) -> dict[str, Any] | None:
        """The good record that produced `ref@version`: the latest one written."""
        key = str(ref)
        with self._tx.reading() as connection:
            cache = self._tx.cache()
            memo = self._tx.record_memo(key, version)
            if cache is not None and memo in cache:
                return cache[memo]
            row = connection.execute(
                FIND_RECORD, {"ws": self._tx.workspace_id, "ref": key, "version": version}
            ).first()
            found = None if row is None else self._rows.body(row[1], row[0], key, "history")
            if cache is not None:
                cache[memo] = found
        return found

    def find_records(
        self, wanted: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """`find_record` of many (ref, version) pairs, a few hundred per query: the lineage of
        a thousand results is thousands of records, each a round trip when read one by one."""
        pairs = list(dict.fromkeys(wanted))
        found: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        with self._tx.reading() as connection:
            for start in range(0, len(pairs), CHUNK):
                chunk = pairs[start : start + CHUNK]
                size = 1 << (len(chunk) - 1).bit_length()  # a few statements, each cached
                chunk += chunk[-1:] * (size - len(chunk))
                params: dict[str, Any] = {"ws": self._tx.workspace_id}
                for i, (ref, version) in enumerate(chunk):
                    params[f"r{i}"], params[f"v{i}"] = ref, version
                for record_id, ref, version, body in connection.execute(
                    find_records_select(size), params
                ):
                    key = (ref, version)
                    if key not in found or found[key][0] < record_id:  # the latest, as one by one
                        found[key] = (record_id, self._rows.body(body, record_id, ref, "history"))
        return {key: record for key, (_id, record) in found.items()}

    def ref_history(self, refs: Sequence[str], most: int) -> dict[str, list[dict[str, Any]]]:
        """Up to `most` records of each of `refs`, good materializations and failed attempts,
        newest written first (the HTML lineage page's history of a ref). One query per few
        hundred refs; a ref written thousands of times costs an index range, not its bodies."""
        found: dict[str, list[dict[str, Any]]] = {ref: [] for ref in refs}
        wanted = list(found)
        with self._tx.reading() as connection:
            for start in range(0, len(wanted), CHUNK):
                for record_id, ref, body in connection.execute(
                    REF_HISTORY,
                    {
                        "ws": self._tx.workspace_id,
                        "refs": wanted[start : start + CHUNK],
                        "most": most,
                    },
                ):
                    found[ref].append(self._rows.body(body, record_id, ref, "history"))
        return found

    def history(self) -> Iterator[dict[str, Any]]:
        """Every change to the lineage, oldest first, as operations (`op`: claim, record, fail,
        forget, reset), read a page at a time."""
        ops = schema.operations
        after = 0
        while True:
            with self._tx.reading() as connection:
                rows = connection.execute(
                    select(
                        ops.c.id,
                        ops.c.op,
                        ops.c.ref,
                        ops.c.detail,
                        ops.c.at,
                        schema.records.c.id,
                        schema.records.c.body,
                    )
                    .select_from(
                        ops.outerjoin(schema.records, schema.records.c.id == ops.c.record_id)
                    )
                    .where(ops.c.workspace_id == self._tx.workspace_id, ops.c.id > after)
                    .order_by(ops.c.id)
                    .limit(1000)
                ).all()
            for row in rows:
                yield self._rows.operation(row)
            if len(rows) < 1000:
                return
            after = rows[-1][0]

    def last_operation(self) -> int | None:
        """The id of the newest history row: every change to the lineage adds one, so an
        unchanged id means unchanged lineage (one index lookup, where comparing the refs
        reads them all)."""
        operations = schema.operations
        with self._tx.reading() as connection:
            return connection.execute(
                select(func.max(operations.c.id)).where(
                    operations.c.workspace_id == self._tx.workspace_id
                )
            ).scalar()
