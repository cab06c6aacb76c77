"""The lineage store: the current lineage of every ref, its history, and the rules that guard
them, in the workspace's database (`db/`: SQLite in `.dataworkspace/` by default, PostgreSQL
when runs span machines).

Every change is one transaction that first takes the workspace's write lock (see
`db/database.py` for why one lock and not row locks), checks the rules against what is
committed, writes, and commits: a crash at any point leaves the change whole or absent.
Records are content-addressed (`dws_records.digest`), so applying one twice stores it once.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import xxhash
from sqlalchemy import (
    Text,
    and_,
    bindparam,
    column,
    delete,
    func,
    insert,
    literal,
    null,
    or_,
    select,
    union_all,
    update,
    values,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from dws_dagster.errors import (
    LineageConflictError,
    LineageConsistencyError,
    UnknownRefStateError,
    WorkspaceConfigError,
)
from dws_dagster.workspace import shapes
from dws_dagster.workspace.records import LineageRecord, StepInfo, identity_digest, now_iso
from dws_dagster.workspace.refs import ResourceRef, as_ref
from dws_dagster.workspace.store import schema
from dws_dagster.workspace.store.database import (
    Database,
    StoreLockError,
    StoreUnavailableError,
    database_for,
)
from dws_dagster.workspace.versions import short

if TYPE_CHECKING:
    from dws_dagster.workspace.workspace import Workspace

__all__ = [
    "GcSparesOlderObjects",
    "InputCheck",
    "LineageStore",
    "Observed",
    "RefState",
    "StoreLockError",
    "StoreUnavailableError",
    "attention_note",
    "conflict_message",
    "gc_paused",
    "recovery_advice",
]

#: Refs per statement when a list of refs is sent as parameters (SQLite allows 32,766).
_CHUNK = 500
_ADVICE = "restore the store from a backup, or 'dws-dagster forget' the ref and re-run its step"


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building large acyclic structures (parsed
    JSON, rows): each of its collections walks the objects built so far, which made reading
    the lineage of 100,000 refs cost more than ten times that of 10,000. Parsed JSON forms no
    reference cycles, so pausing leaves no garbage behind.

    On resuming, what was built goes straight to the oldest generation (`gc.freeze()` then
    `gc.unfreeze()`, when nothing else is frozen) rather than being walked by the next young
    collection.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


class GcSparesOlderObjects:
    """Keeps what exists on entry, and what survives each batch of a long pass
    (`spare_survivors()`), out of the cyclic garbage collector's collections until exit
    (`gc.freeze()`; `gc.unfreeze()` on exit). Does nothing when the collector is off or
    something else froze objects.

    The lineage sensor's tick keeps batches of Dagster records alive for a while, which
    promoted them to the oldest generation, so a full collection came every other batch and
    walked the whole process (Dagster's definitions among them). Freezing is a constant-time
    list splice; young collections still run, so cycles made and dropped within a batch are
    freed as before, and frozen objects are still freed by reference counting.
    """

    def __init__(self) -> None:
        self._owned = False

    def __enter__(self) -> GcSparesOlderObjects:
        self._owned = gc.isenabled() and not gc.get_freeze_count()
        if self._owned:
            gc.freeze()
        return self

    def spare_survivors(self) -> None:
        """Spare what exists now too (call between batches)."""
        if self._owned:
            gc.freeze()

    def __exit__(self, *_exc: object) -> None:
        if self._owned:
            gc.unfreeze()
            self._owned = False


@dataclass(slots=True)
class RefState:
    """The current lineage of one ref.

    `record` is the last good materialization; `attempt` a failed attempt made after it;
    `unknown` means the failed attempt may have left partial data, so the ref must be rewritten
    before anything reads it. `owner` is the step that writes the ref (rule (a)).
    """

    owner: str | None = None
    record: dict[str, Any] | None = None
    attempt: dict[str, Any] | None = None
    unknown: bool = False

    @property
    def status(self) -> str:
        if self.unknown:
            return "unknown"
        if self.attempt is not None:
            return "failed"
        if self.record is not None:
            return "ok" if self.owner is not None else "source"
        return "pending"

    @property
    def version(self) -> str | None:
        return None if self.record is None else self.record.get("version")

    @property
    def latest(self) -> dict[str, Any] | None:
        """The most recent record: the failed attempt if there is one, else the good one."""
        return self.attempt if self.attempt is not None else self.record

    def lineage_record(self) -> LineageRecord | None:
        return None if self.record is None else LineageRecord.from_json(self.record)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"owner": self.owner, "record": self.record}
        if self.attempt is not None:
            data["attempt"] = self.attempt
        if self.unknown:
            data["unknown"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RefState:
        return cls(
            data.get("owner"),
            data.get("record"),
            data.get("attempt"),
            bool(data.get("unknown", False)),
        )


@dataclass(frozen=True)
class InputCheck:
    """What `LineageStore.check_inputs` found: the provenance closure, and drift warnings."""

    provenance: dict[str, str]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Observed:
    """What `LineageStore.observe_source` did: the version recorded for `ref`, whether that was
    new (`recorded`), and whether the ref was `unknown` before."""

    ref: str
    version: str
    recorded: bool
    was_unknown: bool


_R = schema.records.alias("r")
_A = schema.records.alias("a")
_REFS = schema.refs
_SNAP = schema.snapshot_refs
_RECORDS = schema.records


def _states_select(table: Any) -> Any:
    """(ref, owner, record id and body, attempt id and body, unknown) of a workspace's refs in
    `table` (the current lineage, or snapshots')."""
    return (
        select(table.c.ref, table.c.owner, _R.c.id, _R.c.body, _A.c.id, _A.c.body, table.c.unknown)
        .select_from(
            table.outerjoin(_R, _R.c.id == table.c.record_id).outerjoin(
                _A, _A.c.id == table.c.attempt_id
            )
        )
        .where(table.c.workspace_id == bindparam("ws"))
    )


# Statements built once, with bound parameters: building and caching a statement costs five
# times executing it, and the sensor and every step run the same few thousands of times.
_GET_STATE = _states_select(_REFS).where(_REFS.c.ref == bindparam("ref"))
_STATES_IN = _states_select(_REFS).where(_REFS.c.ref.in_(bindparam("refs", expanding=True)))
_FIND_RECORD = (
    select(_RECORDS.c.id, _RECORDS.c.body)
    .where(
        _RECORDS.c.workspace_id == bindparam("ws"),
        _RECORDS.c.ref == bindparam("ref"),
        _RECORDS.c.version == bindparam("version"),
        _RECORDS.c.good,
    )
    .order_by(_RECORDS.c.id.desc())
    .limit(1)
)
_RECORD_BY_DIGEST = select(_RECORDS.c.id).where(
    _RECORDS.c.workspace_id == bindparam("ws"), _RECORDS.c.digest == bindparam("digest")
)
_RANKED = (
    select(
        _RECORDS.c.id,
        func.row_number()
        .over(partition_by=_RECORDS.c.ref, order_by=_RECORDS.c.id.desc())
        .label("rank"),
    )
    .where(
        _RECORDS.c.workspace_id == bindparam("ws"),
        _RECORDS.c.ref.in_(bindparam("refs", expanding=True)),
    )
    .subquery("ranked")
)
_REF_HISTORY = (
    select(_RECORDS.c.id, _RECORDS.c.ref, _RECORDS.c.body)
    .select_from(_RANKED.join(_RECORDS, _RECORDS.c.id == _RANKED.c.id))
    .where(_RANKED.c.rank <= bindparam("most"))
    .order_by(_RECORDS.c.ref, _RECORDS.c.id.desc())
)
_INSERT_INPUTS = insert(schema.record_inputs)
_INSERT_OPERATION = insert(schema.operations)


@functools.cache
def _overlapping_select(depth: int) -> Any:
    """Refs that are one of `depth` given refs (a ref and its ancestors), with their states,
    or lie inside the first, with their owners only: one statement per depth (an expanding IN
    is rebuilt at every execution). The states come along because whoever checks a ref
    against rule (a) reads its state next. Two selects in a UNION ALL, each searching the
    (workspace, ref) key: joined by OR, both databases' planners fell back to reading every
    ref of the workspace."""
    named = _states_select(_REFS).where(_REFS.c.ref.in_([bindparam(f"a{i}") for i in range(depth)]))
    inside = select(
        _REFS.c.ref, _REFS.c.owner, null(), null(), null(), null(), _REFS.c.unknown
    ).where(
        _REFS.c.workspace_id == bindparam("ws"),
        _REFS.c.ref > bindparam("low"),
        _REFS.c.ref < bindparam("high"),
    )
    return union_all(named, inside)


@functools.cache
def _find_records_select(size: int) -> Any:
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
        select(_RECORDS.c.id, _RECORDS.c.ref, _RECORDS.c.version, _RECORDS.c.body)
        .select_from(
            asked.join(
                _RECORDS,
                and_(
                    _RECORDS.c.workspace_id == bindparam("ws"),
                    _RECORDS.c.ref == asked.c.ref,
                    _RECORDS.c.version == asked.c.version,
                ),
            )
        )
        .where(_RECORDS.c.good)
    )


def _dialect_insert(dialect: str) -> Any:
    """The INSERT with ON CONFLICT of `dialect`, imported when first needed: the PostgreSQL
    dialect module costs a command on SQLite a tenth of its start."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


@functools.cache
def _upsert_ref(dialect: str, columns: frozenset[str]) -> Any:
    """INSERT ... ON CONFLICT (workspace, ref) DO UPDATE of `columns`: one statement where an
    update then an insert took two (both databases have it, each in its own dialect)."""
    statement = _dialect_insert(dialect)(_REFS)
    return statement.on_conflict_do_update(
        index_elements=[_REFS.c.workspace_id, _REFS.c.ref],
        set_={name: statement.excluded[name] for name in sorted(columns)},
    )


@functools.cache
def _insert_new_record(dialect: str) -> Any:
    """INSERT a record unless its digest is stored, giving its id when it was new."""
    statement = _dialect_insert(dialect)(_RECORDS)
    return statement.on_conflict_do_nothing(
        index_elements=[_RECORDS.c.workspace_id, _RECORDS.c.digest]
    ).returning(_RECORDS.c.id)


class LineageStore:
    """Current lineage of a workspace's refs, shared safely by many processes and machines."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.settings = workspace.store_settings
        self.db: Database = database_for(self.settings)
        self._workspace_id: int | None = None

    # ------------------------------------------------------------------ naming

    @property
    def shown(self) -> str:
        """The store as it may be printed (never its password)."""
        return self.db.shown

    @property
    def workspace_id(self) -> int:
        if self._workspace_id is None:
            from dws_dagster.workspace.store.journal_import import import_journal_files

            workspace_id = self.db.workspace_id(self.workspace.name)
            # Set once the import succeeded: a failed one is tried again by the next call.
            import_journal_files(self)
            self._workspace_id = workspace_id
        return self._workspace_id

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def locked(self) -> Iterator[Connection]:
        """Hold the workspace's write lock in one transaction: every store call the block makes
        (on this thread) joins it, and it commits when the block ends."""
        ws_id = self.workspace_id
        with self._guard("write"), self.db.transaction(write_for=ws_id) as connection:
            yield connection

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """One consistent view for several reads (joins an open transaction)."""
        self.workspace_id  # noqa: B018  (registers the workspace, imports journal files)
        with self._guard("read"), self.db.transaction() as connection:
            yield connection

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Database errors as DwsErrors naming the store (never its password)."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise self.db.describe_error(exc, action) from None

    # ------------------------------------------------------------------ reading

    def _states_query(self, table: Any = _REFS) -> Any:
        return _states_select(table).params(ws=self.workspace_id)

    def _state_of(self, row: Sequence[Any], where: str) -> RefState:
        ref, owner, record_id, record_body, attempt_id, attempt_body, unknown = row
        self._checked_ref(ref, where)
        record = None if record_body is None else self._body(record_body, record_id, ref, where)
        attempt = None if attempt_body is None else self._body(attempt_body, attempt_id, ref, where)
        return RefState(self._owner(ref, owner, where), record, attempt, bool(unknown))

    def _checked_ref(self, ref: Any, where: str) -> str:
        """A ref read back. One no step could have written (a hand edit, a column of another
        type) is named as damage here, not refused later as a ref, elsewhere."""
        if type(ref) is str and shapes.ref_ok(ref):
            return ref
        shapes.check_states({ref: {}}, f"workspace store {self.shown}", what=where, advice=_ADVICE)
        # The schema coerces bytes to text: what it let through is still not a ref.
        raise WorkspaceConfigError(
            f"workspace store {self.shown}: {where}: {ref!r:.80} is not a ref; {_ADVICE}"
        )

    def _owner(self, ref: str, owner: Any, where: str) -> str | None:
        """An owner read back: a step name, or None (a database column can hold anything)."""
        if owner is not None and type(owner) is not str:
            raise WorkspaceConfigError(
                f"workspace store {self.shown}: {where} of ref {ref}: owner {owner!r:.80} is "
                f"not a step name; {_ADVICE}"
            )
        return owner

    def _body(self, body: Any, record_id: int, ref: str, where: str) -> dict[str, Any]:
        """A record read back, checked like any file of the workspace: a database can be
        edited by hand or restored from another version."""
        try:
            data = orjson.loads(body)
        except (orjson.JSONDecodeError, TypeError):
            data = None
        if shapes.record_ok(data) and data["ref"] == ref:
            return data
        prefix = f"workspace store {self.shown}: {where} of ref {ref} (record {record_id})"
        if data is None:
            raise WorkspaceConfigError(f"{prefix} is not a JSON record; {_ADVICE}")
        if isinstance(data, dict) and data.get("ref") != ref:
            raise WorkspaceConfigError(
                f"{prefix} is the record of another ref ({str(data.get('ref'))[:80]!r}); {_ADVICE}"
            )
        shapes.check_states(
            {ref: {"record": data}}, f"workspace store {self.shown}", what=where, advice=_ADVICE
        )
        raise WorkspaceConfigError(f"{prefix} is not a lineage record; {_ADVICE}")

    def get(self, ref: ResourceRef | str) -> RefState | None:
        key = str(ref)
        return self._states_of([key]).get(key)

    def _remember(self, states: dict[str, RefState | None]) -> None:
        """Keep states just read (None: no lineage) for the rest of this transaction."""
        cache = self.db.transaction_cache()
        if cache is not None:
            ws_id = self.workspace_id
            cache.update(((ws_id, ref), state) for ref, state in states.items())

    def _forget_cached(self, ref: str | None = None) -> None:
        """Drop what this transaction read of `ref` (of every ref: None), about to change."""
        cache = self.db.transaction_cache()
        if cache is not None:
            if ref is None:
                cache.clear()
            else:
                cache.pop((self.workspace_id, ref), None)

    def items(self) -> list[tuple[str, RefState]]:
        """Every ref with lineage, sorted by ref."""
        with self.reading() as connection, gc_paused():
            rows = connection.execute(self._states_query().order_by(_REFS.c.ref)).all()
            return [(row[0], self._state_of(row, "current lineage")) for row in rows]

    def state(self) -> dict[str, RefState]:
        return dict(self.items())

    def refs(self) -> list[str]:
        """Every ref with lineage, sorted, without reading records."""
        with self.reading() as connection:
            return [
                self._checked_ref(ref, "current lineage")
                for ref in connection.scalars(
                    select(_REFS.c.ref)
                    .where(_REFS.c.workspace_id == self.workspace_id)
                    .order_by(_REFS.c.ref)
                )
            ]

    def overlapping(self, ref: ResourceRef) -> list[str]:
        """Refs with lineage that are `ref`, contain it, or lie inside it."""
        return [other for other, _owner in self._overlapping(ref)]

    def _overlapping(self, ref: ResourceRef) -> list[tuple[str, str | None]]:
        """(ref, owner) of the refs that overlap `ref`: `ref` and its ancestors first (their
        states kept in the transaction's cache), then the refs inside it."""
        text = str(ref)
        around = [str(a) for a in ref.ancestors()] + [text]
        order = {name: i for i, name in enumerate(around)}
        where = "current lineage"
        with self.reading() as connection:
            # Inside `text`: refs between "text/" and "text0" ('0' follows '/'), bytewise.
            rows = connection.execute(
                _overlapping_select(len(around)),
                {
                    "ws": self.workspace_id,
                    "low": text + "/",
                    "high": text + "0",
                    **{f"a{i}": name for i, name in enumerate(around)},
                },
            ).all()
            found: list[tuple[str, str | None]] = []
            states: dict[str, RefState | None] = dict.fromkeys(around)
            for row in rows:
                other = self._checked_ref(row[0], where)
                if other in order:
                    state = states[other] = self._state_of(row, where)
                    found.append((other, state.owner))
                else:
                    found.append((other, self._owner(other, row[1], where)))
            self._remember(states)
        return sorted(found, key=lambda item: (order.get(item[0], len(order)), item[0]))

    def find_record(self, ref: ResourceRef | str, version: str) -> dict[str, Any] | None:
        """The good record that produced `ref@version`: the latest one written."""
        key = str(ref)
        with self.reading() as connection:
            cache = self.db.transaction_cache()
            memo = self._record_memo(key, version)
            if cache is not None and memo in cache:
                return cache[memo]
            row = connection.execute(
                _FIND_RECORD, {"ws": self.workspace_id, "ref": key, "version": version}
            ).first()
            found = None if row is None else self._body(row[1], row[0], key, "history")
            if cache is not None:
                cache[memo] = found
        return found

    def prefetch(self, refs: Iterable[str], records: Iterable[tuple[str, str]] = ()) -> None:
        """Read the states of `refs` and the good records of `records` ((ref, version) pairs)
        into the open transaction, for the store calls it makes next: a batch of the sensor's
        events asks a few queries instead of two per event (each a round trip to PostgreSQL).
        Outside a transaction nothing would keep them: nothing is read."""
        cache = self.db.transaction_cache()
        if cache is None:
            return
        self._states_of(list(refs))
        pairs = [pair for pair in dict.fromkeys(records) if self._record_memo(*pair) not in cache]
        found = self.find_records(pairs)
        cache.update((self._record_memo(*pair), found.get(pair)) for pair in pairs)

    def _record_memo(self, ref: str, version: str | None) -> tuple[Any, ...]:
        """The transaction cache's key of `find_record(ref, version)`."""
        return ("record", self.workspace_id, ref, version)

    def find_records(
        self, wanted: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """`find_record` of many (ref, version) pairs, a few hundred per query: the lineage of
        a thousand results is thousands of records, each a round trip when read one by one."""
        pairs = list(dict.fromkeys(wanted))
        found: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        with self.reading() as connection:
            for start in range(0, len(pairs), _CHUNK):
                chunk = pairs[start : start + _CHUNK]
                size = 1 << (len(chunk) - 1).bit_length()  # a few statements, each cached
                chunk += chunk[-1:] * (size - len(chunk))
                params: dict[str, Any] = {"ws": self.workspace_id}
                for i, (ref, version) in enumerate(chunk):
                    params[f"r{i}"], params[f"v{i}"] = ref, version
                for record_id, ref, version, body in connection.execute(
                    _find_records_select(size), params
                ):
                    key = (ref, version)
                    if key not in found or found[key][0] < record_id:  # the latest, as one by one
                        found[key] = (record_id, self._body(body, record_id, ref, "history"))
        return {key: record for key, (_id, record) in found.items()}

    def readers(self, ref: str) -> list[tuple[str, RefState, dict[str, str]]]:
        """Current records that read `ref`, a ref containing it or one inside it: (the ref
        each record is the lineage of, its state, the input it read). One indexed query, so
        downstream lineage does not read every ref's record."""
        inputs = schema.record_inputs
        around = [str(a) for a in as_ref(ref).ancestors()] + [ref]

        def reading(condition: Any) -> Any:
            return (
                select(
                    _REFS.c.ref,
                    _REFS.c.owner,
                    _R.c.id,
                    _R.c.body,
                    _A.c.id,
                    _A.c.body,
                    _REFS.c.unknown,
                    inputs.c.ref,
                    inputs.c.version,
                )
                .select_from(
                    inputs.join(
                        _REFS,
                        and_(
                            _REFS.c.workspace_id == inputs.c.workspace_id,
                            _REFS.c.record_id == inputs.c.record_id,
                        ),
                    )
                    .outerjoin(_R, _R.c.id == _REFS.c.record_id)
                    .outerjoin(_A, _A.c.id == _REFS.c.attempt_id)
                )
                .where(inputs.c.workspace_id == self.workspace_id, condition)
            )

        # Two selects, each searching the (workspace, ref) index of the inputs (see
        # `_overlapping_select` for why not one with OR).
        with self.reading() as connection:
            rows = [
                *connection.execute(reading(inputs.c.ref.in_(around))).all(),
                *connection.execute(
                    reading(and_(inputs.c.ref > ref + "/", inputs.c.ref < ref + "0"))
                ).all(),
            ]
        rows.sort(key=lambda row: (row[0], row[7]))
        return [
            (row[0], self._state_of(row[:7], "current lineage"), {"ref": row[7], "version": row[8]})
            for row in rows
        ]

    def ref_history(self, refs: Sequence[str], most: int) -> dict[str, list[dict[str, Any]]]:
        """Up to `most` records of each of `refs`, good materializations and failed attempts,
        newest written first (the HTML lineage page's history of a ref). One query per few
        hundred refs; a ref written thousands of times costs an index range, not its bodies."""
        found: dict[str, list[dict[str, Any]]] = {ref: [] for ref in refs}
        wanted = list(found)
        with self.reading() as connection:
            for start in range(0, len(wanted), _CHUNK):
                for record_id, ref, body in connection.execute(
                    _REF_HISTORY,
                    {"ws": self.workspace_id, "refs": wanted[start : start + _CHUNK], "most": most},
                ):
                    found[ref].append(self._body(body, record_id, ref, "history"))
        return found

    def history(self) -> Iterator[dict[str, Any]]:
        """Every change to the lineage, oldest first, as operations (`op`: claim, record, fail,
        forget, reset), read a page at a time."""
        ops = schema.operations
        after = 0
        while True:
            with self.reading() as connection:
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
                    .where(ops.c.workspace_id == self.workspace_id, ops.c.id > after)
                    .order_by(ops.c.id)
                    .limit(1000)
                ).all()
            for row in rows:
                yield self._operation(row)
            if len(rows) < 1000:
                return
            after = rows[-1][0]

    def _operation(self, row: Sequence[Any]) -> dict[str, Any]:
        _id, kind, ref, detail, at, record_id, body = row
        try:
            extra = orjson.loads(detail) if detail else {}
        except orjson.JSONDecodeError:
            extra = None
        if not isinstance(extra, dict):
            raise WorkspaceConfigError(
                f"workspace store {self.shown}: history entry {_id} ({kind} of {ref}) has a "
                f"corrupt detail; {_ADVICE}"
            )
        op: dict[str, Any] = {"op": kind, **extra, "at": at}
        if ref is not None and kind != "record" and kind != "fail":
            op["ref"] = ref
        if body is not None:
            op["record"] = self._body(body, record_id, ref, "history")
        return op

    # ------------------------------------------------------------------ writing

    def _record_id(self, connection: Connection, data: dict[str, Any], *, good: bool) -> int:
        """The id of record `data`, stored (with its inputs) unless it already is."""
        try:
            body = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError as exc:
            raise WorkspaceConfigError(too_deep(self.shown, exc)) from None
        digest = xxhash.xxh3_128_hexdigest(body, seed=1 if good else 0)
        ws_id = self.workspace_id
        step = data.get("step") or {}
        record_id = connection.execute(
            _insert_new_record(self.settings.dialect),
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
                connection.execute(_RECORD_BY_DIGEST, {"ws": ws_id, "digest": digest}).scalar_one()
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
                _INSERT_INPUTS,
                [
                    {"record_id": record_id, "ref": ref, "version": version, "workspace_id": ws_id}
                    for ref, version in inputs.items()
                ],
            )
        cache = self.db.transaction_cache()
        if good and cache is not None:  # the latest record of its version now
            cache[self._record_memo(data["ref"], data.get("version"))] = orjson.loads(body)
        return int(record_id)

    def _log(
        self,
        connection: Connection,
        op: str,
        ref: str | None,
        *,
        record_id: int | None = None,
        detail: dict[str, Any] | None = None,
        at: str | None = None,
    ) -> None:
        connection.execute(
            _INSERT_OPERATION,
            {
                "workspace_id": self.workspace_id,
                "op": op,
                "ref": ref,
                "record_id": record_id,
                "detail": orjson.dumps(detail).decode() if detail else None,
                "at": at or now_iso(),
            },
        )

    def _put(self, connection: Connection, ref: str, **values: Any) -> None:
        """Set columns of `ref`'s row, creating it when missing."""
        self._forget_cached(ref)
        connection.execute(
            _upsert_ref(self.settings.dialect, frozenset(values)),
            {"workspace_id": self.workspace_id, "ref": ref, **values},
        )

    def _write_record(
        self, connection: Connection, data: dict[str, Any], state: RefState | None
    ) -> None:
        """A good record becomes `ref`'s lineage; an observation keeps the ref's owner."""
        ref = data["ref"]
        step = data.get("step") or {}
        if step.get("kind", "observation") == "observation":
            owner = state.owner if state is not None else None
        else:
            owner = step.get("name")
        record_id = self._record_id(connection, data, good=True)
        self._put(connection, ref, owner=owner, record_id=record_id, attempt_id=None, unknown=False)
        self._log(connection, "record", ref, record_id=record_id)

    def _write_failure(
        self, connection: Connection, data: dict[str, Any], state: RefState | None, unknown: bool
    ) -> None:
        ref = data["ref"]
        owner = (data.get("step") or {}).get("name", state.owner if state else None)
        attempt_id = self._record_id(connection, data, good=False)
        self._put(connection, ref, owner=owner, attempt_id=attempt_id, unknown=unknown)
        self._log(
            connection,
            "fail",
            ref,
            record_id=attempt_id,
            detail={"unknown": True} if unknown else None,
        )

    # ------------------------------------------------------------------ rules

    def conflicts(self, step: str, ref: ResourceRef) -> list[tuple[str, str]]:
        """(ref, owner) of refs that overlap `ref` and belong to another step (rule (a))."""
        return [
            (other, owner)
            for other, owner in self._overlapping(ref)
            if owner is not None and owner != step
        ]

    def _refuse_conflicts(self, step: str, ref: ResourceRef) -> None:
        clashes = self.conflicts(step, ref)
        if clashes:
            raise LineageConflictError(conflict_message(step, ref, clashes))

    def _refuse_writer_conflicts(self, record: LineageRecord) -> None:
        """Rule (a) for a record about to be written (observations have no writer)."""
        if record.step is not None and record.step.kind != "observation":
            self._refuse_conflicts(record.step.name, as_ref(record.ref))

    def claim(self, step: str, refs: Iterable[ResourceRef | str]) -> None:
        """Make `step` the writer of `refs`, or refuse with LineageConflictError (rule (a)).
        All or nothing: one ref refused, none is claimed."""
        self.begin_step(step, claims=refs)

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
        """Check a step, then claim its outputs and observe its source inputs: all or nothing.

        Every ref of `claims` is checked against other steps (rule (a)) and every input of
        `inputs` for unknown state and mixed versions (rule (b), as `check_inputs`; `outputs`
        are refs the step claimed before). Only when all passed are the claims and the
        observations of `observe` (source data no step writes, at a version the store has not
        seen) written, in the same transaction as the checks, under the workspace's write
        lock: a step refused for one ref leaves no claim behind, and no step on any machine can
        claim a ref between the check and the claim.

        With nothing to write (a step run again) no lock is taken, unless `lock`: a writer
        about to write data then learns before touching it that the store cannot be written.
        """
        wanted = list(dict.fromkeys(as_ref(ref) for ref in claims))
        seen = {str(as_ref(ref)): version for ref, version in observe}
        outputs = list(outputs)
        if not lock:
            with self.reading():  # one read transaction for every check, not one per query
                # Checked first: the checks read the states the pending writes need.
                check = self._check_step(step, wanted, inputs, outputs)
                if not any(self._pending_step_writes(step, wanted, seen)):
                    return check
        with self.locked() as connection:
            check = self._check_step(step, wanted, inputs, outputs)
            # () when nothing is left to write (a writer that asked for the lock all the same)
            claims_now, observations = self._pending_step_writes(step, wanted, seen) or ((), ())
            at = now_iso()
            for ref, _state in claims_now:
                self._put(connection, ref, owner=step)
                self._log(connection, "claim", ref, detail={"step": step}, at=at)
            for ref, version, state in observations:
                self._write_record(connection, _observation(ref, version), state)
        return check

    def _check_step(
        self,
        step: str,
        claims: list[ResourceRef],
        inputs: Collection[tuple[ResourceRef | str, str]],
        outputs: Iterable[ResourceRef | str],
    ) -> InputCheck:
        for ref in claims:
            self._refuse_conflicts(step, ref)
        return (
            self.check_inputs(step, inputs, outputs=[*outputs, *claims])
            if inputs
            else InputCheck({})
        )

    def _pending_step_writes(
        self, step: str, claims: list[ResourceRef], observe: dict[str, str]
    ) -> Any:
        """The claims not on record yet, and the observations of source data at a version not
        seen before (refs claimed now are not sources)."""
        del step
        states = self._states_of([str(ref) for ref in claims] + list(observe))
        claims_now = [
            (str(ref), states.get(str(ref)))
            for ref in claims
            if (state := states.get(str(ref))) is None or state.owner is None
        ]
        claimed = {str(ref) for ref in claims}
        observations = [
            (key, version, states.get(key))
            for key, version in observe.items()
            if key not in claimed
            and (
                (state := states.get(key)) is None
                or (state.owner is None and state.version != version)
            )
        ]
        return claims_now, observations

    def _states_of(self, refs: Sequence[str]) -> dict[str, RefState]:
        """The states of those of `refs` that have lineage, read once per transaction: a
        step's checks ask for the same refs several times."""
        found: dict[str, RefState] = {}
        with self.reading() as connection:
            cache = self.db.transaction_cache()
            ws_id = self.workspace_id
            wanted = []
            for ref in dict.fromkeys(refs):
                memo = (ws_id, ref)
                if cache is not None and memo in cache:
                    if cache[memo] is not None:
                        found[ref] = cache[memo]
                else:
                    wanted.append(ref)
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                read: dict[str, RefState | None] = dict.fromkeys(chunk)
                # One ref (a step's usual input) by equality: an expanding IN is rebuilt at
                # every execution.
                rows = (
                    connection.execute(_GET_STATE, {"ws": ws_id, "ref": chunk[0]})
                    if len(chunk) == 1
                    else connection.execute(_STATES_IN, {"ws": ws_id, "refs": chunk})
                )
                for row in rows:
                    state = read[row[0]] = self._state_of(row, "current lineage")
                    found[row[0]] = state
                self._remember(read)
        return found

    def check_inputs(
        self,
        step: str,
        inputs: Collection[tuple[ResourceRef | str, str]],
        *,
        outputs: Iterable[ResourceRef | str] = (),
    ) -> InputCheck:
        """Provenance closure of a step's inputs, refusing unknown refs and mixed versions.

        Raises UnknownRefStateError for an input whose data may be partial, and
        LineageConsistencyError (rule (b)) when the inputs carry two versions of one ref.
        """
        own = [as_ref(ref) for ref in outputs]
        carriers: dict[str, dict[str, list[str]]] = {}
        warnings: list[str] = []
        pairs = [(as_ref(raw_ref), version) for raw_ref, version in inputs]
        with self.reading():
            states = self._states_of([str(ref) for ref, _version in pairs])
            for ref, version in pairs:
                key = str(ref)
                state = states.get(key)
                if state is not None and state.unknown:
                    raise UnknownRefStateError(_unknown_message(step, key, state))
                closure = {key: version}
                record = None
                if state is not None:
                    record = (
                        state.record if state.version == version else self.find_record(key, version)
                    )
                if record is not None:
                    closure.update(record.get("provenance", {}))
                elif state is not None and state.version is not None and state.owner is not None:
                    warnings.append(
                        f"input {key} is at version {short(version)}, but its lineage says "
                        f"{short(state.version)} (written by step '{state.owner}'): the data "
                        "changed outside any recorded step; re-run that step to bring its "
                        "lineage back"
                    )
                for dep_ref, dep_version in closure.items():
                    if any(o.overlaps(as_ref(dep_ref)) for o in own):
                        continue
                    carriers.setdefault(dep_ref, {}).setdefault(dep_version, []).append(key)
            direct = {str(ref): version for ref, version in pairs}
            for dep_ref, versions in carriers.items():
                if len(versions) > 1:
                    raise LineageConsistencyError(
                        self._consistency_message(step, dep_ref, versions, direct.get(dep_ref))
                    )
        provenance = {ref: next(iter(versions)) for ref, versions in sorted(carriers.items())}
        return InputCheck(provenance, warnings)

    def _consistency_message(
        self, step: str, ref: str, versions: dict[str, list[str]], read_directly: str | None
    ) -> str:
        state = self.get(ref)
        # The version read directly is the data as it is now; else trust the lineage.
        current = read_directly or (state.version if state is not None else None)
        described = "; ".join(
            f"{short(v)}{' (current)' if v == current else ''} through input(s) "
            f"{', '.join(sorted(set(carriers)))}"
            for v, carriers in versions.items()
        )
        stale_steps: list[str] = []
        for version, carriers in versions.items():
            if version == current:
                continue
            for carrier in carriers:
                for name in self._steps_built_from(carrier, ref, version, set()):
                    if name not in stale_steps:
                        stale_steps.append(name)
        if current is not None and stale_steps:
            advice = (
                f"re-run, in this order, {', '.join(repr(s) for s in stale_steps)} so that "
                f"they read {ref}@{short(current)}, then re-run '{step}'"
            )
        else:
            advice = (
                f"re-run the steps that read an older version of {ref} so every input is "
                f"built from the same version, then re-run '{step}'"
            )
        return (
            f"step '{step}' would read two versions of ref {ref}: {described}. Mixing "
            f"versions of one input is refused; {advice}"
        )

    def _steps_built_from(
        self, ref: str, stale_ref: str, stale_version: str, seen: set[str]
    ) -> list[str]:
        """Steps between `stale_ref@stale_version` and `ref`, upstream first."""
        if ref in seen:
            return []
        seen.add(ref)
        state = self.get(ref)
        if state is None or state.record is None:
            return []
        record = state.record
        if record.get("provenance", {}).get(stale_ref) != stale_version:
            return []
        steps: list[str] = []
        for item in record.get("inputs", ()):
            for name in self._steps_built_from(item["ref"], stale_ref, stale_version, seen):
                if name not in steps:
                    steps.append(name)
        own = (record.get("step") or {}).get("name")
        if own and own not in steps:
            steps.append(own)
        return steps

    # ------------------------------------------------------------------ recording

    def commit(self, records: Iterable[LineageRecord]) -> list[LineageRecord]:
        """Record good materializations; a record equal to the current one is not written
        twice. Rule (a) is checked again in the same transaction, so a writer that skipped
        `claim` cannot overwrite another step's ref."""
        wanted = list(records)
        with self.locked() as connection:
            for record in wanted:
                self._refuse_writer_conflicts(record)
                data = record.to_json()
                state = self.get(record.ref)
                if state is not None and state.record == data and state.attempt is None:
                    continue
                self._write_record(connection, data, state)
        return wanted

    def apply(self, record: LineageRecord) -> bool:
        """Apply a materialization recorded elsewhere (the lineage sensor replaying the event
        log); True if it changed the lineage.

        Idempotent and never a step back: a record its writer already committed is skipped,
        unless it enriches the current record of the same run (results metrics); a record the
        store never saw (a store rebuilt from the event log) is applied only if it is not older
        than the current one, so replaying old events cannot undo later runs or a restore.
        """
        data = record.to_json()
        run_id = record.step.run_id if record.step is not None else None
        with self.locked() as connection:
            state = self.get(record.ref)
            current = state.record if state is not None else None
            if current == data:
                return False
            known = self.find_record(record.ref, record.version) if record.version else None
            if known is not None and (known.get("step") or {}).get("run_id") == run_id:
                same_run_is_current = (
                    state is not None
                    and state.attempt is None
                    and current is not None
                    and current.get("version") == record.version
                    and (current.get("step") or {}).get("run_id") == run_id
                )
                if not same_run_is_current:
                    return False
            elif current is not None and (current.get("end_time") or "") > (record.end_time or ""):
                return False
            self._refuse_writer_conflicts(record)
            self._write_record(connection, data, state)
            return True

    def apply_failure(self, record: LineageRecord, *, unknown: bool = False) -> bool:
        """Record a failed attempt found after the fact (a run that failed or was cancelled
        before materializing a planned asset); True if it was new. Skipped when that run's
        attempt is already recorded, the run did materialize the ref, or a later good record
        exists — so replays add nothing and the last good lineage is always kept."""
        run_id = record.step.run_id if record.step is not None else None
        with self.locked() as connection:
            state = self.get(record.ref)
            if state is not None:
                for seen in (state.attempt, state.record):
                    if seen is not None and (seen.get("step") or {}).get("run_id") == run_id:
                        return False
                good_end = (state.record or {}).get("end_time") or ""
                if good_end and good_end > (record.end_time or record.start_time or ""):
                    return False
            self._write_failure(connection, record.to_json(), state, unknown)
            return True

    def observe(
        self,
        ref: ResourceRef | str,
        version: str,
        extra: dict[str, Any] | None = None,
        *,
        at: str | None = None,
        recover: bool = False,
    ) -> bool:
        """Record the version of data no step wrote (source data); False if already known.

        `recover`: the data was versioned just now (not an event replayed from the past), so
        it also clears `unknown` when the version is the one on record.
        """
        key = str(as_ref(ref))
        with self.locked() as connection:
            state = self.get(key)
            if state is not None and state.owner is not None:
                return False  # a step writes this ref: drift is reported, not adopted
            if state is not None and state.version == version and not (recover and state.unknown):
                return False
            self._write_record(connection, _observation(key, version, extra, at), state)
            return True

    def observe_source(
        self,
        ref: ResourceRef | str,
        version: str | None = None,
        *,
        extra: dict[str, Any] | None = None,
    ) -> Observed:
        """Record source data's version now as its lineage, clearing `unknown` (what
        `dws-dagster observe REF` does): the way back for a source ref a partial restore could
        not bring back, once its data is what steps should read.

        `version` defaults to the local data's version now. Refused (LineageConflictError) for
        a ref a step writes: only re-running that step rewrites its data and lineage.
        """
        key = str(self.workspace.check_ref(as_ref(ref)))
        self._refuse_owned(key)  # before hashing the data, which may take long
        if version is None:
            version = self._version_now(key)
        with self.locked():
            state = self._refuse_owned(key)
            recorded = self.observe(key, version, extra, recover=True)
            return Observed(
                ref=key,
                version=version,
                recorded=recorded,
                was_unknown=state is not None and state.unknown,
            )

    def _refuse_owned(self, ref: str) -> RefState | None:
        state = self.get(ref)
        if state is not None and state.owner is not None:
            raise LineageConflictError(
                f"ref {ref} is written by step '{state.owner}', so its lineage comes from that "
                f"step, not from an observation: re-run '{state.owner}' to rewrite {ref} and "
                f"its lineage{' (that clears unknown)' if state.unknown else ''}"
            )
        return state

    def _version_now(self, ref: str) -> str:
        from dws_dagster.workspace.workspace import RemoteDataError

        try:
            return self.workspace.version_of(ref)
        except RemoteDataError:
            raise RemoteDataError(
                f"ref {ref} lives in remote resource '{as_ref(ref).name}': its version cannot "
                "be read from here; observe it through its Dagster source asset "
                "(dws_source_asset), or pass the version it has now"
            ) from None

    def fail(self, records: Iterable[LineageRecord], unknown: Iterable[str] = ()) -> None:
        """Record failed attempts; the last good record stays, `unknown` refs become unreadable."""
        partial = {str(as_ref(ref)) for ref in unknown}
        with self.locked() as connection:
            for record in records:
                self._write_failure(
                    connection, record.to_json(), self.get(record.ref), record.ref in partial
                )

    def forget(self, ref: ResourceRef | str) -> bool:
        """Drop a ref's lineage (and its owner), e.g. to hand the ref to another step."""
        key = str(as_ref(ref))
        with self.locked() as connection:
            self._forget_cached(key)
            gone = connection.execute(
                delete(_REFS).where(_REFS.c.workspace_id == self.workspace_id, _REFS.c.ref == key)
            ).rowcount
            if not gone:
                return False
            self._log(connection, "forget", key)
            return True

    # ------------------------------------------------------------------ summaries

    def _side(self, snapshot_hash: str | None) -> Any:
        """The rows of the current lineage (None) or of a snapshot, as one selectable."""
        if snapshot_hash is None:
            return (
                select(
                    _REFS.c.ref,
                    _REFS.c.owner,
                    _REFS.c.record_id,
                    _REFS.c.attempt_id,
                    _REFS.c.unknown,
                )
                .where(_REFS.c.workspace_id == self.workspace_id)
                .subquery()
            )
        return (
            select(
                _SNAP.c.ref, _SNAP.c.owner, _SNAP.c.record_id, _SNAP.c.attempt_id, _SNAP.c.unknown
            )
            .where(_SNAP.c.workspace_id == self.workspace_id, _SNAP.c.hash == snapshot_hash)
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
        with self.reading() as connection, gc_paused():
            return [
                (
                    self._checked_ref(ref, where),
                    _status(
                        self._owner(ref, owner, where),
                        identity is not None,
                        attempt is not None,
                        bool(unknown),
                    ),
                    self._column(ref, "record identity", identity, where),
                )
                for ref, owner, identity, attempt, unknown in connection.execute(query)
            ]

    def owners(self, snapshot_hash: str | None = None) -> list[tuple[str, str | None]]:
        """(ref, step that writes it or None) of every ref of the current lineage (None) or
        of a snapshot, sorted, from indexed columns: what groups a diff's partitions."""
        side = self._side(snapshot_hash)
        where = "current lineage" if snapshot_hash is None else f"snapshot {snapshot_hash[:12]}"
        with self.reading() as connection:
            return [
                (self._checked_ref(ref, where), self._owner(ref, owner, where))
                for ref, owner in connection.execute(
                    select(side.c.ref, side.c.owner).order_by(side.c.ref)
                )
            ]

    def read_without_lineage(self) -> dict[str, tuple[str, list[tuple[str, str | None]]]]:
        """Refs the current records read that have no lineage of their own (source data a
        step read as found, never observed), by ref: (the version the newest of those records
        read, the (ref, step that writes it) of each record that read it). One query over the
        inputs index; refs nested in or around a ref with lineage are the caller's to tell
        apart."""
        inputs = schema.record_inputs
        own = _REFS.alias("own")
        query = (
            select(inputs.c.ref, inputs.c.version, inputs.c.record_id, _REFS.c.ref, _REFS.c.owner)
            .select_from(
                inputs.join(
                    _REFS,
                    and_(
                        _REFS.c.workspace_id == inputs.c.workspace_id,
                        _REFS.c.record_id == inputs.c.record_id,
                    ),
                ).outerjoin(
                    own,
                    and_(own.c.workspace_id == inputs.c.workspace_id, own.c.ref == inputs.c.ref),
                )
            )
            .where(inputs.c.workspace_id == self.workspace_id, own.c.ref.is_(None))
        )
        newest: dict[str, tuple[int, str]] = {}
        readers: dict[str, list[tuple[str, str | None]]] = {}
        where = "current lineage"
        with self.reading() as connection:
            for ref, version, record_id, reader, owner in connection.execute(query):
                self._checked_ref(ref, where)
                version = self._column(ref, "input version", version, where)
                if ref not in newest or newest[ref][0] < record_id:
                    newest[ref] = (record_id, version)
                reader = self._checked_ref(reader, where)
                readers.setdefault(ref, []).append((reader, self._owner(reader, owner, where)))
        return {ref: (newest[ref][1], sorted(readers[ref])) for ref in sorted(newest)}

    def last_operation(self) -> int | None:
        """The id of the newest history row: every change to the lineage adds one, so an
        unchanged id means unchanged lineage (one index lookup, where comparing the refs
        reads them all)."""
        operations = schema.operations
        with self.reading() as connection:
            return connection.execute(
                select(func.max(operations.c.id)).where(
                    operations.c.workspace_id == self.workspace_id
                )
            ).scalar()

    def recorded_versions(self) -> list[tuple[str, str | None]]:
        """(ref, version its good record says, None without one) of every ref, sorted: what
        a snapshot compares the data on disk with, from indexed columns."""
        records = schema.records
        query = (
            select(_REFS.c.ref, records.c.version)
            .select_from(_REFS.outerjoin(records, records.c.id == _REFS.c.record_id))
            .where(_REFS.c.workspace_id == self.workspace_id)
            .order_by(_REFS.c.ref)
        )
        where = "current lineage"
        with self.reading() as connection:
            return [
                (self._checked_ref(ref, where), self._column(ref, "version", version, where))
                for ref, version in connection.execute(query)
            ]

    def _column(self, ref: str, name: str, value: Any, where: str) -> Any:
        """A text column read back: text or NULL, else damage named here."""
        if value is not None and type(value) is not str:
            raise WorkspaceConfigError(
                f"workspace store {self.shown}: {where} of ref {ref}: the {name} "
                f"{value!r:.80} is not text; {_ADVICE}"
            )
        return value

    def summaries(self) -> list[RefSummary]:
        """What `status` shows of every ref, from indexed columns: a record is read only for a
        ref whose last attempt failed or whose data may be partial."""
        records = schema.records
        good = records.alias("good")
        tried = records.alias("tried")
        query = (
            select(
                _REFS.c.ref,
                _REFS.c.owner,
                good.c.version,
                good.c.end_time,
                tried.c.end_time,
                _REFS.c.record_id,
                _REFS.c.attempt_id,
                _REFS.c.unknown,
            )
            .select_from(
                _REFS.outerjoin(good, good.c.id == _REFS.c.record_id).outerjoin(
                    tried, tried.c.id == _REFS.c.attempt_id
                )
            )
            .where(_REFS.c.workspace_id == self.workspace_id)
            .order_by(_REFS.c.ref)
        )
        with self.reading() as connection, gc_paused():
            rows = connection.execute(query).all()
            attention = [row[0] for row in rows if row[6] is not None or row[7]]
            states = self._states_of(attention) if attention else {}
        found = []
        where = "current lineage"
        for ref, owner, version, end, tried_end, record_id, attempt_id, unknown in rows:
            self._checked_ref(ref, where)
            found.append(
                RefSummary(
                    ref=ref,
                    owner=self._owner(ref, owner, where),
                    version=self._column(ref, "version", version, where),
                    status=_status(
                        owner, record_id is not None, attempt_id is not None, bool(unknown)
                    ),
                    finished=self._column(
                        ref, "end time", tried_end if attempt_id is not None else end, where
                    ),
                    state=states.get(ref),
                )
            )
        return found

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
        with self.reading() as connection:
            found = set(connection.scalars(changed)) | set(connection.scalars(added))
        return sorted(found)

    def states_in(self, snapshot_hash: str | None, refs: Sequence[str]) -> dict[str, RefState]:
        """The states of `refs` in the current lineage (None) or in a snapshot."""
        if snapshot_hash is None:
            return self._states_of(refs)
        found: dict[str, RefState] = {}
        wanted = list(dict.fromkeys(refs))
        with self.reading() as connection:
            for start in range(0, len(wanted), _CHUNK):
                rows = connection.execute(
                    self._states_query(_SNAP).where(
                        _SNAP.c.hash == snapshot_hash,
                        _SNAP.c.ref.in_(wanted[start : start + _CHUNK]),
                    )
                ).all()
                for row in rows:
                    found[row[0]] = self._state_of(row, f"snapshot {snapshot_hash[:12]}")
        return found

    # ------------------------------------------------------------------ snapshots

    def save_snapshot(self, snapshot_hash: str) -> None:
        """Keep the current lineage as snapshot `snapshot_hash`'s manifest (references to the
        records, not copies); the caller holds the lock and adds the index entry."""
        with self.locked() as connection:
            ws_id = self.workspace_id
            exists = connection.execute(
                select(func.count())
                .select_from(_SNAP)
                .where(_SNAP.c.workspace_id == ws_id, _SNAP.c.hash == snapshot_hash)
            ).scalar()
            if exists:
                return
            connection.execute(
                insert(_SNAP).from_select(
                    ["workspace_id", "hash", "ref", "owner", "record_id", "attempt_id", "unknown"],
                    select(
                        _REFS.c.workspace_id,
                        literal(snapshot_hash),
                        _REFS.c.ref,
                        _REFS.c.owner,
                        _REFS.c.record_id,
                        _REFS.c.attempt_id,
                        _REFS.c.unknown,
                    ).where(_REFS.c.workspace_id == ws_id),
                )
            )

    def snapshot_items(self, snapshot_hash: str) -> list[tuple[str, RefState]]:
        """A snapshot's lineage, sorted by ref."""
        with self.reading() as connection, gc_paused():
            rows = connection.execute(
                self._states_query(_SNAP).where(_SNAP.c.hash == snapshot_hash).order_by(_SNAP.c.ref)
            ).all()
            return [(row[0], self._state_of(row, f"snapshot {snapshot_hash[:12]}")) for row in rows]

    def drop_snapshot(self, snapshot_hash: str) -> None:
        with self.locked() as connection:
            connection.execute(
                delete(_SNAP).where(
                    _SNAP.c.workspace_id == self.workspace_id, _SNAP.c.hash == snapshot_hash
                )
            )

    def reset(self, snapshot_hash: str, unknown: Iterable[str] = ()) -> None:
        """Make a snapshot's lineage the current lineage (restore), marking `unknown` the refs
        whose data could not be brought back."""
        partial = sorted(set(unknown))
        with self.locked() as connection:
            self._forget_cached()
            ws_id = self.workspace_id
            connection.execute(delete(_REFS).where(_REFS.c.workspace_id == ws_id))
            connection.execute(
                insert(_REFS).from_select(
                    ["workspace_id", "ref", "owner", "record_id", "attempt_id", "unknown"],
                    select(
                        _SNAP.c.workspace_id,
                        _SNAP.c.ref,
                        _SNAP.c.owner,
                        _SNAP.c.record_id,
                        _SNAP.c.attempt_id,
                        _SNAP.c.unknown,
                    ).where(_SNAP.c.workspace_id == ws_id, _SNAP.c.hash == snapshot_hash),
                )
            )
            for start in range(0, len(partial), _CHUNK):
                connection.execute(
                    update(_REFS)
                    .where(
                        _REFS.c.workspace_id == ws_id,
                        _REFS.c.ref.in_(partial[start : start + _CHUNK]),
                    )
                    .values(unknown=True)
                )
            self._log(
                connection, "reset", None, detail={"snapshot": snapshot_hash, "unknown": partial}
            )


@dataclass(frozen=True)
class RefSummary:
    """A ref as `status` lists it; `state` is read only when the ref needs attention."""

    ref: str
    owner: str | None
    version: str | None
    status: str
    finished: str | None
    state: RefState | None = None


def _status(owner: str | None, has_record: bool, has_attempt: bool, unknown: bool) -> str:
    """`RefState.status`, from columns."""
    if unknown:
        return "unknown"
    if has_attempt:
        return "failed"
    if has_record:
        return "ok" if owner is not None else "source"
    return "pending"


def _observation(
    ref: str, version: str, extra: dict[str, Any] | None = None, at: str | None = None
) -> dict[str, Any]:
    record = LineageRecord(
        ref=ref,
        version=version,
        step=StepInfo(name="observation", kind="observation"),
        start_time=at or now_iso(),
        end_time=at or now_iso(),
        extra=extra or {},
    )
    return record.to_json()


def conflict_message(step: str, ref: ResourceRef, clashes: list[tuple[str, str]]) -> str:
    parts = []
    for other, owner in clashes:
        relation = (
            "the same ref"
            if other == str(ref)
            else "which contains it"
            if as_ref(other).covers(ref)
            else "inside it"
        )
        parts.append(f"step '{owner}' writes {other} ({relation})")
    return (
        f"step '{step}' may not write ref {ref}: {'; '.join(parts)}. Two steps writing one "
        "ref, or nested refs, would make its lineage ambiguous: give this output its own "
        f"subpath, or hand the ref over with 'dws-dagster forget {clashes[0][0]}'"
    )


def recovery_advice(ref: str, owner: str | None) -> str:
    """How to bring back a ref whose data may not match its lineage: its step re-run, or for
    source data (no step writes it) a new observation of the data as it is."""
    if owner is not None:
        return f"re-run its step '{owner}' to rewrite {ref}"
    return (
        f"it is source data (no step writes it): once its data is what steps should read, "
        f"record that as its lineage with 'dws-dagster observe {ref}' "
        "(LineageStore.observe_source)"
    )


def attention_note(ref: str, state: RefState) -> str:
    """What happened to a `failed` or `unknown` ref and how to bring it back (`status`, and
    the refusal to read an unknown ref)."""
    good = f" {short(state.version)}" if state.version else ""
    attempt = state.attempt
    if state.unknown and (state.owner is None or attempt is None):
        # Only a restore marks a source unknown (a source has no step to fail), and a failed
        # step always leaves its attempt.
        return (
            f"a snapshot restore could not bring back its version{good}, so its data may "
            f"not match its lineage (marked unknown); {recovery_advice(ref, state.owner)}"
        )
    attempt = attempt or {}
    writer = (attempt.get("step") or {}).get("name") or state.owner
    when = attempt.get("end_time") or attempt.get("start_time") or "an earlier run"
    if state.unknown:
        last = f" (its last good version was{good})" if good else ""
        return (
            f"its data may be partial after step '{writer}' failed ({when}){last}; re-run "
            f"'{writer}' to rewrite {ref}"
        )
    kept = f"; version{good} is still the one read" if good else ""
    return f"step '{writer}' failed ({when}){kept}; re-run '{writer}' to bring {ref} up to date"


def _unknown_message(step: str, ref: str, state: RefState) -> str:
    return (
        f"step '{step}' may not read ref {ref}: {attention_note(ref, state)}, then re-run '{step}'"
    )


def too_deep(where: Path | str, exc: Exception) -> str:
    """The message for lineage that cannot be encoded: values nested deeper than JSON encoding
    allows (orjson stops at 255 levels) can only come from an edited store or file."""
    return (
        f"the lineage in {where} holds a record whose parameters, metrics or extra "
        f"values nest too deeply to be written again ({exc}); restore it from a backup"
    )
