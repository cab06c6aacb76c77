"""Writing to the lineage tables: a record stored once, a ref's row set, the history row that
goes with every change.

The low-level half of every change, shared by the changes steps make (`changes`) and by a
snapshot restore (`snapshot_tables`). It checks no rule: its callers hold the write lock and
have checked the rules in the same transaction. Records are stored by digest of their
canonical JSON, so a record applied twice (a replayed event) is stored once, and a good
record and a failed attempt with the same body stay two records.
"""

from __future__ import annotations

from typing import Any

import orjson
import xxhash
from sqlalchemy import delete
from sqlalchemy.engine import Connection

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.store.messages import too_deep
from dws_dagster.store.ref_state import RefState
from dws_dagster.store.statements import (
    INSERT_INPUTS,
    INSERT_OPERATION,
    RECORD_BY_DIGEST,
    REFS,
    insert_new_record,
    upsert_ref,
)
from dws_dagster.store.transactions import StoreTransactions
from dws_dagster.workspace.records import LineageRecord, StepInfo, identity_digest, now_iso


class Writes:
    """Stores records and sets refs' rows, adding each change to the history."""

    def __init__(self, tx: StoreTransactions) -> None:
        self._tx = tx

    def record_id(self, connection: Connection, data: dict[str, Any], *, good: bool) -> int:
        """The id of record `data`, stored (with its inputs) unless it already is."""
        try:
            body = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError as exc:
            raise WorkspaceConfigError(too_deep(self._tx.shown, exc)) from None
        digest = xxhash.xxh3_128_hexdigest(body, seed=1 if good else 0)
        ws_id = self._tx.workspace_id
        step = data.get("step") or {}
        record_id = connection.execute(
            insert_new_record(self._tx.settings.dialect),
            {
                "workspace_id": ws_id,
                "ref": data["ref"],
                "version": data.get("version"),
                "run_id": step.get("run_id"),
                "end_time": data.get("end_time"),
                "good": good,
                "digest": digest,
                "identity": identity_digest(data),
                "body": body.decode(),
            },
        ).scalar()
        if record_id is None:  # stored already (a record applied again)
            return int(
                connection.execute(RECORD_BY_DIGEST, {"ws": ws_id, "digest": digest}).scalar_one()
            )
        inputs = {
            item["ref"]: item["version"]
            for item in data.get("inputs", ())
            if isinstance(item, dict)
            and isinstance(item.get("ref"), str)
            and isinstance(item.get("version"), str)
        }
        if inputs:
            connection.execute(
                INSERT_INPUTS,
                [
                    {"record_id": record_id, "ref": ref, "version": version, "workspace_id": ws_id}
                    for ref, version in inputs.items()
                ],
            )
        cache = self._tx.cache()
        if good and cache is not None:  # the latest record of its version now
            cache[self._tx.record_memo(data["ref"], data.get("version"))] = orjson.loads(body)
        return int(record_id)

    def log(
        self,
        connection: Connection,
        op: str,
        ref: str | None,
        *,
        record_id: int | None = None,
        detail: dict[str, Any] | None = None,
        at: str | None = None,
    ) -> None:
        """Add change `op` to the history (what `history` reads back)."""
        connection.execute(
            INSERT_OPERATION,
            {
                "workspace_id": self._tx.workspace_id,
                "op": op,
                "ref": ref,
                "record_id": record_id,
                "detail": orjson.dumps(detail).decode() if detail else None,
                "at": at or now_iso(),
            },
        )

    def put(self, connection: Connection, ref: str, **values: Any) -> None:
        """Set columns of `ref`'s row, creating it when missing."""
        self._tx.forget_cached(ref)
        connection.execute(
            upsert_ref(self._tx.settings.dialect, frozenset(values)),
            {"workspace_id": self._tx.workspace_id, "ref": ref, **values},
        )

    def write_record(
        self, connection: Connection, data: dict[str, Any], state: RefState | None
    ) -> None:
        """A good record becomes `ref`'s lineage; an observation keeps the ref's owner."""
        ref = data["ref"]
        step = data.get("step") or {}
        if step.get("kind", "observation") == "observation":
            owner = state.owner if state is not None else None
        else:
            owner = step.get("name")
        record_id = self.record_id(connection, data, good=True)
        self.put(connection, ref, owner=owner, record_id=record_id, attempt_id=None, unknown=False)
        self.log(connection, "record", ref, record_id=record_id)

    def write_failure(
        self, connection: Connection, data: dict[str, Any], state: RefState | None, unknown: bool
    ) -> None:
        ref = data["ref"]
        owner = (data.get("step") or {}).get("name", state.owner if state else None)
        attempt_id = self.record_id(connection, data, good=False)
        self.put(connection, ref, owner=owner, attempt_id=attempt_id, unknown=unknown)
        self.log(
            connection,
            "fail",
            ref,
            record_id=attempt_id,
            detail={"unknown": True} if unknown else None,
        )

    def delete_ref(self, connection: Connection, ref: str) -> bool:
        """Drop `ref`'s row (its lineage and its owner), adding the change to the history;
        False when it had none."""
        self._tx.forget_cached(ref)
        gone = connection.execute(
            delete(REFS).where(REFS.c.workspace_id == self._tx.workspace_id, REFS.c.ref == ref)
        ).rowcount
        if not gone:
            return False
        self.log(connection, "forget", ref)
        return True


def observation_record(
    ref: str, version: str, extra: dict[str, Any] | None = None, at: str | None = None
) -> dict[str, Any]:
    """The record of an observation: source data seen at `version` (no step wrote it)."""
    record = LineageRecord(
        ref=ref,
        version=version,
        step=StepInfo(name="observation", kind="observation"),
        start_time=at or now_iso(),
        end_time=at or now_iso(),
        extra=extra or {},
    )
    return record.to_json()
