"""Rows and records read back from the database, checked before the store hands them out.

A database can be edited by hand or restored from another version, so nothing read back is
trusted: a ref, an owner, a text column or a record body that no step could have written is
reported as damage to the store, naming where it was found and how to recover, instead of
failing later, elsewhere, as a puzzling error about a ref or a record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.store.ref_state import RefState
from dws_dagster.store.statements import REFS, states_select
from dws_dagster.store.transactions import StoreTransactions
from dws_dagster.workspace import formats, shapes

#: How to recover from a damaged store, said with every damage found.
ADVICE = "restore the store from a backup, or 'dws-dagster forget' the ref and re-run its step"


class StoreRows:
    """Turns rows into states, records and history entries, checking each on the way (the
    store's name, which every damage report gives, and the workspace's id from `tx`)."""

    def __init__(self, tx: StoreTransactions) -> None:
        self._tx = tx

    @property
    def shown(self) -> str:
        """The store as damage reports name it (never its password)."""
        return self._tx.shown

    def states_query(self, table: Any = REFS) -> Any:
        """`states_select` of `table` (the current lineage or the snapshots') of this workspace."""
        return states_select(table).params(ws=self._tx.workspace_id)

    def state_of(self, row: Sequence[Any], where: str) -> RefState:
        """The state of a `states_select` row, checked (`where`: what it was read from)."""
        ref, owner, record_id, record_body, attempt_id, attempt_body, unknown = row
        self.checked_ref(ref, where)
        record = None if record_body is None else self.body(record_body, record_id, ref, where)
        attempt = None if attempt_body is None else self.body(attempt_body, attempt_id, ref, where)
        return RefState(self.owner(ref, owner, where), record, attempt, bool(unknown))

    def checked_ref(self, ref: Any, where: str) -> str:
        """A ref read back. One no step could have written (a hand edit, a column of another
        type) is named as damage here, not refused later as a ref, elsewhere."""
        if type(ref) is str and shapes.ref_ok(ref):  # the rule of `formats.REF`, on every row
            return ref
        return formats.check(
            formats.REF,
            ref,
            f"workspace store {self.shown}",
            what=where,
            advice=ADVICE,
            at=("refs",),
        )

    def owner(self, ref: str, owner: Any, where: str) -> str | None:
        """An owner read back: a step name, or None (a database column can hold anything)."""
        if owner is not None and type(owner) is not str:
            raise WorkspaceConfigError(
                f"workspace store {self.shown}: {where} of ref {ref}: owner {owner!r:.80} is "
                f"not a step name; {ADVICE}"
            )
        return owner

    def body(self, body: Any, record_id: int, ref: str, where: str) -> dict[str, Any]:
        """A record read back, checked like any file of the workspace: a database can be
        edited by hand or restored from another version."""
        try:
            data = orjson.loads(body)
        except (orjson.JSONDecodeError, TypeError):
            data = None
        if formats.RECORD.ok(data) and data["ref"] == ref:
            return data
        prefix = f"workspace store {self.shown}: {where} of ref {ref} (record {record_id})"
        if data is None:
            raise WorkspaceConfigError(f"{prefix} is not a JSON record; {ADVICE}")
        if isinstance(data, dict) and data.get("ref") != ref:
            raise WorkspaceConfigError(
                f"{prefix} is the record of another ref ({str(data.get('ref'))[:80]!r}); {ADVICE}"
            )
        formats.check(
            formats.RECORD,
            data,
            f"workspace store {self.shown}",
            what=where,
            advice=ADVICE,
            at=("refs", ref, "record"),
        )
        raise WorkspaceConfigError(f"{prefix} is not a lineage record; {ADVICE}")

    def column(self, ref: str, name: str, value: Any, where: str) -> Any:
        """A text column read back: text or NULL, else damage named here."""
        if value is not None and type(value) is not str:
            raise WorkspaceConfigError(
                f"workspace store {self.shown}: {where} of ref {ref}: the {name} "
                f"{value!r:.80} is not text; {ADVICE}"
            )
        return value

    def operation(self, row: Sequence[Any]) -> dict[str, Any]:
        """A history row as the operation `history` yields, its detail and record checked."""
        _id, kind, ref, detail, at, record_id, body = row
        try:
            extra = orjson.loads(detail) if detail else {}
        except orjson.JSONDecodeError:
            extra = None
        if not isinstance(extra, dict):
            raise WorkspaceConfigError(
                f"workspace store {self.shown}: history entry {_id} ({kind} of {ref}) has a "
                f"corrupt detail; {ADVICE}"
            )
        op: dict[str, Any] = {"op": kind, **extra, "at": at}
        if ref is not None and kind != "record" and kind != "fail":
            op["ref"] = ref
        if body is not None:
            op["record"] = self.body(body, record_id, ref, "history")
        return op
