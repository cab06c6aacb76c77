"""How the lineage store reaches its database: the workspace's row, transactions that join
one another, the write lock, and what a transaction remembers of what it read.

Every other part of the store (`rows`, `current`, `history`, `rules`, `writes`,
`snapshot_tables`, `changes`) is given the one `StoreTransactions` of its store and goes
through it, so that each change is one transaction under the workspace's write lock (see
`database` for why one lock and not row locks), database errors reach users as errors naming
the store (never its password), and a step's checks, which ask for the same refs several
times, read each once per transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from dws_dagster.store.database import Database, database_for
from dws_dagster.store.ref_state import RefState
from dws_dagster.store.settings import StoreSettings
from dws_dagster.workspace.refs import ResourceRef


class StoreWorkspace(Protocol):
    """What the store needs of its workspace (`dws_dagster.workspace.definition.Workspace`):
    named by what it does rather than imported, since the workspace opens its store."""

    @property
    def name(self) -> str: ...

    @property
    def store_settings(self) -> StoreSettings: ...

    def check_ref(self, ref: ResourceRef | str) -> ResourceRef: ...

    def version_of(self, ref: ResourceRef | str) -> str: ...


class StoreTransactions:
    """One workspace's way into the database its settings name (the `Database` itself is
    shared by every store of the process that names it)."""

    def __init__(self, workspace: StoreWorkspace) -> None:
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
        """The workspace's row in the store, made at first use."""
        if self._workspace_id is None:
            self._workspace_id = self.db.workspace_id(self.workspace.name)
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
        self.workspace_id  # noqa: B018  (registers the workspace)
        with self._guard("read"), self.db.transaction() as connection:
            yield connection

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Database errors as DwsErrors naming the store (never its password)."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise self.db.describe_error(exc, action) from None

    # ------------------------------------------------------------------ transaction cache

    def cache(self) -> dict[Any, Any] | None:
        """What this thread's open transaction read (None outside one)."""
        return self.db.transaction_cache()

    def remember(self, states: dict[str, RefState | None]) -> None:
        """Keep states just read (None: no lineage) for the rest of this transaction."""
        cache = self.db.transaction_cache()
        if cache is not None:
            ws_id = self.workspace_id
            cache.update(((ws_id, ref), state) for ref, state in states.items())

    def forget_cached(self, ref: str | None = None) -> None:
        """Drop what this transaction read of `ref` (of every ref: None), about to change."""
        cache = self.db.transaction_cache()
        if cache is not None:
            if ref is None:
                cache.clear()
            else:
                cache.pop((self.workspace_id, ref), None)

    def record_memo(self, ref: str, version: str | None) -> tuple[Any, ...]:
        """The transaction cache's key of `History.find_record(ref, version)`."""
        return ("record", self.workspace_id, ref, version)
