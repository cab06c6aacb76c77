"""The lineage store: the current lineage of every ref, its history, and the rules that guard
them, in the workspace's database (SQLite in `.dataworkspace/` by default, PostgreSQL when
runs span machines; see `settings`).

`LineageStore` is what the rest of the package holds (`Workspace.store`). It does nothing
itself: it builds one object per job over the workspace's transactions and hands each call to
the one that does it, so that a reader follows `store.get(ref)` to `CurrentLineage.get` in one
step, and each part names the parts it uses in its constructor.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy.engine import Connection

from dws_dagster.store.changes import LineageChanges
from dws_dagster.store.current import CurrentLineage
from dws_dagster.store.history import History
from dws_dagster.store.ref_state import InputCheck, Observed, RefState, RefSummary
from dws_dagster.store.rows import StoreRows
from dws_dagster.store.rules import Rules
from dws_dagster.store.snapshot_tables import SnapshotTables
from dws_dagster.store.transactions import StoreTransactions, StoreWorkspace
from dws_dagster.store.writes import Writes
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.refs import ResourceRef


class LineageStore:
    """Current lineage of a workspace's refs, shared safely by many processes and machines.

    Made of parts, each a plain class in its own module given the parts it uses:

    - `StoreTransactions` (`transactions`): the workspace's row, transactions, the write lock
      and the transaction's cache;
    - `StoreRows` (`rows`): every row read back, checked before it is handed out;
    - `CurrentLineage` (`current`): the current lineage, read;
    - `History` (`history`): every record and change of the past, read;
    - `Rules` (`rules`): the one-writer and one-version rules, checked;
    - `Writes` (`writes`): records and refs' rows written, each change logged;
    - `SnapshotTables` (`snapshot_tables`): snapshots' lineage kept, compared, restored;
    - `LineageChanges` (`changes`): the changes steps and the sensor make, checked and written.

    Every public method here is a one-line delegation to the part that does the work, so
    callers keep calling the store. A new method goes to the part whose job it is (a read of
    the current lineage to `CurrentLineage`, a new change to `LineageChanges`, ...), and gets
    a delegation here only when code outside the store calls it.
    """

    def __init__(self, workspace: StoreWorkspace) -> None:
        self.workspace = workspace
        self._tx = tx = StoreTransactions(workspace)
        self.settings = tx.settings
        self.db = tx.db
        self._rows = rows = StoreRows(tx)
        self._current = current = CurrentLineage(tx, rows)
        self._history = history = History(tx, rows)
        self._rules = rules = Rules(tx, current, history)
        self._writes = writes = Writes(tx)
        self._snapshots = SnapshotTables(tx, rows, current, writes)
        self._changes = LineageChanges(workspace, tx, current, history, rules, writes)

    # ------------------------------------------------------------------ transactions

    @property
    def shown(self) -> str:
        return self._tx.shown

    @property
    def workspace_id(self) -> int:
        return self._tx.workspace_id

    def locked(self) -> AbstractContextManager[Connection]:
        return self._tx.locked()

    def reading(self) -> AbstractContextManager[Connection]:
        return self._tx.reading()

    def checked_ref(self, ref: Any, where: str) -> str:
        return self._rows.checked_ref(ref, where)

    # ------------------------------------------------------------------ current lineage

    def get(self, ref: ResourceRef | str) -> RefState | None:
        return self._current.get(ref)

    def items(self) -> list[tuple[str, RefState]]:
        return self._current.items()

    def state(self) -> dict[str, RefState]:
        return self._current.state()

    def refs(self) -> list[str]:
        return self._current.refs()

    def overlapping(self, ref: ResourceRef) -> list[str]:
        return self._current.overlapping(ref)

    def readers(self, ref: str) -> list[tuple[str, RefState, dict[str, str]]]:
        return self._current.readers(ref)

    def recorded_versions(self) -> list[tuple[str, str | None]]:
        return self._current.recorded_versions()

    def summaries(self) -> list[RefSummary]:
        return self._current.summaries()

    def read_without_lineage(self) -> dict[str, tuple[str, list[tuple[str, str | None]]]]:
        return self._current.read_without_lineage()

    # ------------------------------------------------------------------ history

    def find_record(self, ref: ResourceRef | str, version: str) -> dict[str, Any] | None:
        return self._history.find_record(ref, version)

    def find_records(
        self, wanted: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, Any]]:
        return self._history.find_records(wanted)

    def ref_history(self, refs: Sequence[str], most: int) -> dict[str, list[dict[str, Any]]]:
        return self._history.ref_history(refs, most)

    def history(self) -> Iterator[dict[str, Any]]:
        return self._history.history()

    def last_operation(self) -> int | None:
        return self._history.last_operation()

    # ------------------------------------------------------------------ rules

    def conflicts(self, step: str, ref: ResourceRef) -> list[tuple[str, str]]:
        return self._rules.conflicts(step, ref)

    def check_inputs(
        self,
        step: str,
        inputs: Collection[tuple[ResourceRef | str, str]],
        *,
        outputs: Iterable[ResourceRef | str] = (),
    ) -> InputCheck:
        return self._rules.check_inputs(step, inputs, outputs=outputs)

    # ------------------------------------------------------------------ changes

    def prefetch(self, refs: Iterable[str], records: Iterable[tuple[str, str]] = ()) -> None:
        self._changes.prefetch(refs, records)

    def claim(self, step: str, refs: Iterable[ResourceRef | str]) -> None:
        self._changes.claim(step, refs)

    def begin_step(
        self,
        step: str,
        *,
        claims: Iterable[ResourceRef | str] = (),
        inputs: Collection[tuple[ResourceRef | str, str]] = (),
        observe: Iterable[tuple[ResourceRef | str, str]] = (),
        outputs: Iterable[ResourceRef | str] = (),
        lock: bool = False,
    ) -> InputCheck:
        return self._changes.begin_step(
            step, claims=claims, inputs=inputs, observe=observe, outputs=outputs, lock=lock
        )

    def begin_steps(
        self,
        step: str,
        parts: Sequence[tuple[ResourceRef | str, Collection[tuple[ResourceRef | str, str]]]],
    ) -> list[InputCheck]:
        return self._changes.begin_steps(step, parts)

    def commit(self, records: Iterable[LineageRecord]) -> list[LineageRecord]:
        return self._changes.commit(records)

    def apply(self, record: LineageRecord) -> bool:
        return self._changes.apply(record)

    def apply_failure(self, record: LineageRecord, *, unknown: bool = False) -> bool:
        return self._changes.apply_failure(record, unknown=unknown)

    def observe(
        self,
        ref: ResourceRef | str,
        version: str,
        extra: dict[str, Any] | None = None,
        *,
        at: str | None = None,
        recover: bool = False,
    ) -> bool:
        return self._changes.observe(ref, version, extra, at=at, recover=recover)

    def observe_source(
        self,
        ref: ResourceRef | str,
        version: str | None = None,
        *,
        extra: dict[str, Any] | None = None,
    ) -> Observed:
        return self._changes.observe_source(ref, version, extra=extra)

    def fail(self, records: Iterable[LineageRecord], unknown: Iterable[str] = ()) -> None:
        self._changes.fail(records, unknown)

    def forget(self, ref: ResourceRef | str) -> bool:
        return self._changes.forget(ref)

    # ------------------------------------------------------------------ snapshots' tables

    def identity_rows(self, snapshot_hash: str | None = None) -> list[tuple[str, str, str | None]]:
        return self._snapshots.identity_rows(snapshot_hash)

    def owners(self, snapshot_hash: str | None = None) -> list[tuple[str, str | None]]:
        return self._snapshots.owners(snapshot_hash)

    def differing_refs(self, before: str | None, after: str | None) -> list[str]:
        return self._snapshots.differing_refs(before, after)

    def states_in(self, snapshot_hash: str | None, refs: Sequence[str]) -> dict[str, RefState]:
        return self._snapshots.states_in(snapshot_hash, refs)

    def save_snapshot(self, snapshot_hash: str) -> None:
        self._snapshots.save_snapshot(snapshot_hash)

    def snapshot_items(self, snapshot_hash: str) -> list[tuple[str, RefState]]:
        return self._snapshots.snapshot_items(snapshot_hash)

    def drop_snapshot(self, snapshot_hash: str) -> None:
        self._snapshots.drop_snapshot(snapshot_hash)

    def reset(self, snapshot_hash: str, unknown: Iterable[str] = ()) -> None:
        self._snapshots.reset(snapshot_hash, unknown)

    # ------------------------------------------------------------------ journal import

    def _record_id(self, connection: Connection, data: dict[str, Any], *, good: bool) -> int:
        """What tests/store/test_journal_import.py compares imported records with; goes with the
        journal format."""
        return self._writes.record_id(connection, data, good=good)
