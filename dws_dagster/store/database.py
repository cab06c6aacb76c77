"""One database per store URL and process: engines, transactions, and what makes them safe.

**How writers are serialized.** Every write transaction first takes the lock of its
workspace's row in `dws_workspaces` (`UPDATE ... SET generation = generation + 1`: a row lock
on PostgreSQL, held to commit); on SQLite the transaction is `BEGIN IMMEDIATE`, the
database's one write lock, which is all it needs. The one-writer rule is about refs that
*overlap* (one inside another), including refs that do not exist yet: row locks on the refs
involved cannot cover rows that are not there, and SERIALIZABLE would need predicate locks on
prefix ranges plus a retry loop around every step. One lock per workspace, held for the few
milliseconds of a check-and-commit, gives the same guarantee as the old file lock, on any
number of machines, and cannot deadlock (there is one lock). Readers never take it: they see
the last committed state (PostgreSQL's READ COMMITTED statements after the lock see every
commit made before it; SQLite's WAL readers see the snapshot they began with).

A transaction is per thread and re-entrant: code that holds one (`LineageStore.locked()`, the
sensor's batch) runs every nested store call inside it, so a batch commits as one.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, event, insert, select, text, update
from sqlalchemy.engine import Connection, Engine, create_engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.pool import QueuePool

from dws_dagster.errors import DwsError, StoreLockError, StoreUnavailableError
from dws_dagster.store import schema
from dws_dagster.store.settings import StoreSettings
from dws_dagster.workspace.records import now_iso
from dws_dagster.workspace.redaction import redact_text

#: The Alembic revision this code's tables are at (tests check it is the scripts' head).
HEAD_REVISION = "0003"
VERSION_TABLE = "dws_alembic_version"
LOCK_TIMEOUT_SECONDS = 120.0
#: PostgreSQL advisory lock key serializing migrations ("dws" + 1).
_MIGRATION_LOCK = 0x647773_01


#: Built once: every write transaction runs it first.
_LOCK_WORKSPACE = (
    update(schema.workspaces)
    .where(schema.workspaces.c.id == bindparam("workspace"))
    .values(generation=schema.workspaces.c.generation + 1)
)


@dataclass
class _Held:
    connection: Connection
    write: bool
    depth: int = 1
    #: What the store read in this transaction, by (workspace id, ref): valid until the
    #: transaction ends, since the store drops an entry when it writes that ref (and writers
    #: elsewhere wait for the lock, or are invisible to a read transaction's snapshot).
    cache: dict[Any, Any] = field(default_factory=dict)


class Database:
    """The database of one store URL in this process (see `database_for`)."""

    def __init__(self, settings: StoreSettings) -> None:
        self.settings = settings
        self.engine = _create_engine(settings)
        self._local = threading.local()
        self._workspace_ids: dict[str, int] = {}
        self._ready = False
        self._ready_lock = threading.Lock()
        #: The SQLite file this Database opened (device, inode), see `database_for`.
        self.file_identity: tuple[int, int] | None = None

    # ------------------------------------------------------------------ naming

    @property
    def shown(self) -> str:
        return self.settings.shown

    def describe_error(self, exc: BaseException, action: str) -> StoreUnavailableError:
        """A DwsError for a database failure: what failed, the store (no password), advice."""
        original = getattr(exc, "orig", None) or exc
        reason = " ".join(str(original).split())[:300]
        reason = redact_text(reason, self.settings.secrets)
        lowered = reason.lower()
        if "disk is full" in lowered or "no space" in lowered:
            advice = "No space left on device: free space on the disk that holds it, then try again"
        elif "readonly" in lowered or "read-only" in lowered:
            advice = "make it writable (its file system may be mounted read-only), then try again"
        elif self.settings.dialect == "sqlite":
            advice = (
                "check that the file is the workspace's store and is readable and "
                "writable, or restore it from a backup"
            )
        else:
            advice = (
                "check that the server is up and reachable from here, the user and "
                "password (its environment variable) are right, and the database exists"
            )
        return StoreUnavailableError(
            f"workspace store {self.shown}: could not {action}: {reason}; {advice}"
        )

    # ------------------------------------------------------------------ schema

    def ensure_schema(self) -> None:
        """Bring the tables to this code's revision (Alembic), once per process; concurrent
        first opens from several processes migrate once (under a lock) and others wait."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            try:
                revision = self._revision()
                if revision != HEAD_REVISION:
                    self._migrate(revision)
            except SQLAlchemyError as exc:
                raise self.describe_error(exc, "prepare its tables") from None
            self._ready = True

    def _revision(self) -> str | None:
        with self.engine.connect() as connection:
            try:
                row = connection.execute(
                    text(f"SELECT version_num FROM {self._qualified(VERSION_TABLE)}")
                ).first()
            except DBAPIError:
                connection.rollback()
                return None
            return None if row is None else str(row[0])

    def _qualified(self, table: str) -> str:
        return f'"{self.settings.schema}".{table}' if self.settings.schema else table

    def _migrate(self, revision: str | None) -> None:
        from alembic import command
        from alembic.config import Config
        from alembic.util import CommandError

        config = Config()
        config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        with self.engine.connect() as connection:
            if self.settings.dialect == "sqlite":
                connection = connection.execution_options(dws_immediate=True)
            with connection.begin():
                if self.settings.dialect == "postgresql":
                    # Lock first: CREATE SCHEMA IF NOT EXISTS itself races between sessions.
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK}
                    )
                    if self.settings.schema:
                        connection.execute(
                            text(f'CREATE SCHEMA IF NOT EXISTS "{self.settings.schema}"')
                        )
                config.attributes["connection"] = connection
                config.attributes["schema"] = self.settings.schema
                try:
                    command.upgrade(config, "head")
                except CommandError:
                    # A revision this code does not know: a newer dws_dagster wrote the store.
                    raise StoreUnavailableError(
                        f"workspace store {self.shown} is at revision {revision!r}, which this "
                        f"version of dws_dagster (revision {HEAD_REVISION}) does not know: a "
                        "newer dws_dagster upgraded it. Upgrade dws_dagster here too"
                    ) from None

    # ------------------------------------------------------------------ workspaces

    def workspace_id(self, name: str) -> int:
        """The id of the workspace named `name` in this store, created on first use."""
        found = self._workspace_ids.get(name)
        if found is not None:
            return found
        self.ensure_schema()
        table = schema.workspaces
        for _attempt in range(3):
            with self.transaction() as connection:
                row = connection.execute(select(table.c.id).where(table.c.name == name)).first()
            if row is not None:
                self._workspace_ids[name] = int(row[0])
                return int(row[0])
            try:
                with self.transaction() as connection:
                    connection.execute(insert(table).values(name=name, created=now_iso()))
                    connection.execute(
                        insert(schema.ol_delivery).from_select(
                            ["workspace_id"], select(table.c.id).where(table.c.name == name)
                        )
                    )
            except IntegrityError:
                continue  # another process created it meanwhile: read its id
        raise StoreUnavailableError(
            f"workspace store {self.shown}: could not register "
            f"workspace {name!r}; check the store's dws_workspaces table"
        )

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def transaction(self, *, write_for: int | None = None) -> Iterator[Connection]:
        """A transaction on this thread's connection, committed when the block ends (rolled
        back on an exception). `write_for`: the workspace id whose write lock it takes first.
        Nested calls join the open transaction; a write inside a read-only one is a bug."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None:
            if write_for is not None and not held.write:
                raise RuntimeError(
                    "a write to the workspace store inside a read-only "
                    "transaction: open the write transaction first"
                )
            held.depth += 1
            try:
                yield held.connection
            finally:
                held.depth -= 1
            return
        try:
            connection = self.engine.connect()
        except SQLAlchemyError as exc:
            raise self.describe_error(exc, "connect") from None
        try:
            if write_for is not None and self.settings.dialect == "sqlite":
                connection = connection.execution_options(dws_immediate=True)
            try:
                transaction = connection.begin()
                if write_for is not None:
                    self._lock_workspace(connection, write_for)
            except DBAPIError as exc:
                raise self._lock_error(exc) from None
            self._local.held = _Held(connection, write_for is not None)
            try:
                yield connection
            except BaseException:
                self._local.held = None
                if transaction.is_active:
                    transaction.rollback()
                raise
            self._local.held = None
            try:
                transaction.commit()
            except SQLAlchemyError as exc:
                raise self.describe_error(exc, "commit") from None
        finally:
            self._local.held = None
            connection.close()

    def _lock_workspace(self, connection: Connection, workspace_id: int) -> None:
        if self.settings.dialect == "sqlite":
            return  # `BEGIN IMMEDIATE` took the database's one write lock already
        connection.execute(text(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT_SECONDS)}s'"))
        connection.execute(_LOCK_WORKSPACE, {"workspace": workspace_id})

    def _lock_error(self, exc: DBAPIError) -> DwsError:
        original = getattr(exc, "orig", None)
        message = str(original or exc).lower()
        if "lock" in message and ("timeout" in message or "locked" in message):
            return StoreLockError(
                f"could not lock the workspace store {self.shown} within "
                f"{LOCK_TIMEOUT_SECONDS:.0f} s: another process holds it (a long snapshot or "
                "restore?); wait for it and try again"
            )
        return self.describe_error(exc, "begin a transaction")

    @property
    def in_transaction(self) -> bool:
        return getattr(self._local, "held", None) is not None

    def transaction_cache(self) -> dict[Any, Any] | None:
        """The cache of this thread's open transaction (None outside one)."""
        held: _Held | None = getattr(self._local, "held", None)
        return None if held is None else held.cache

    def dispose(self) -> None:
        self.engine.dispose()


# ---------------------------------------------------------------------- engines

_DATABASES: dict[str, Database] = {}
_DATABASES_LOCK = threading.Lock()


def database_for(settings: StoreSettings) -> Database:
    """The one Database of `settings` in this process (engines pool connections).

    An SQLite store is also known by its file's identity: a workspace deleted and created
    again at the same place (or a store file restored over the old one) gets a new Database,
    not pooled connections to the file that was replaced."""
    key = settings.key
    identity = _file_identity(settings)
    with _DATABASES_LOCK:
        found = _DATABASES.get(key)
        if found is not None and found.file_identity is None:
            found.file_identity = identity  # the file it created since
        elif found is not None and found.file_identity != identity:
            found.dispose()
            found = None
        if found is None:
            found = _DATABASES[key] = Database(settings)
            found.file_identity = identity
        return found


def _file_identity(settings: StoreSettings) -> tuple[int, int] | None:
    if settings.dialect != "sqlite":
        return None
    try:
        info = os.stat(str(settings.url.database))
    except OSError:
        return None
    return info.st_dev, info.st_ino


def forget_databases() -> None:
    """Close every pooled connection (tests that delete workspaces; after fork)."""
    with _DATABASES_LOCK:
        for database in _DATABASES.values():
            database.dispose()
        _DATABASES.clear()


def _after_fork() -> None:
    # A child must not use its parent's pooled connections (SQLAlchemy's pooling guidance):
    # drop them without closing what the parent still uses.
    for database in list(_DATABASES.values()):
        database.engine.dispose(close=False)
        database._local = threading.local()


os.register_at_fork(after_in_child=_after_fork)


def _create_engine(settings: StoreSettings) -> Engine:
    options: dict[str, Any] = {}
    if settings.schema:
        options["schema_translate_map"] = {None: settings.schema}
    if settings.dialect == "sqlite":
        path = os.fsencode(str(settings.url.database))

        def connect() -> sqlite3.Connection:
            # The path as bytes: a workspace folder whose name is not UTF-8 (surrogates in
            # the str) cannot be passed to SQLite as text.
            _check_sqlite_file(path, settings.shown)
            return sqlite3.connect(path, timeout=LOCK_TIMEOUT_SECONDS, check_same_thread=False)

        # A file database (the URL names the dialect; `creator` opens the file): pooled.
        engine = create_engine(
            "sqlite://", creator=connect, poolclass=QueuePool, execution_options=options
        )
        _sqlite_events(engine)
        return engine
    return create_engine(
        _with_driver(settings),
        pool_pre_ping=True,
        pool_size=2,
        max_overflow=8,
        execution_options=options,
        connect_args={"connect_timeout": 10, "application_name": "dws_dagster"},
    )


def _check_sqlite_file(path: bytes, shown: str) -> None:
    """Create a new SQLite store's file, or refuse an empty one.

    SQLite takes an empty file for an empty database, so a store truncated to zero bytes (a
    copy cut short, a full disk, `> store.db`) would be given new tables and its history would
    be gone without a word. A new file is made here instead, under a lock on its folder, and
    left holding SQLite's header (WAL mode, 4096 bytes) before the lock goes: so a zero-byte
    file seen under that lock (taken only when the file looks empty or missing) is damage,
    never a store that another process is creating right now."""
    try:
        if os.stat(path).st_size > 0:
            return  # the usual case: one stat, no lock
    except FileNotFoundError:
        pass
    folder = os.path.dirname(path) or b"."
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # no folder to lock (or none to create the file in): SQLite says what is wrong
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            size = None
        if size == 0:
            raise StoreUnavailableError(
                f"workspace store {shown} is an empty file (0 bytes): its lineage, "
                "snapshots and history are not in it (a copy cut short or a full disk "
                "truncates a file so). Restore it from a backup; or, to start again with "
                "no history, delete it (the next command creates a new store)"
            )
        if size is None:
            with closing(sqlite3.connect(path, timeout=LOCK_TIMEOUT_SECONDS)) as created:
                _enable_wal(created.cursor())
    except ImportError:  # no flock here: SQLite opens the file as it finds it
        pass
    finally:
        os.close(fd)


def _with_driver(settings: StoreSettings) -> Any:
    """A `postgresql://` URL names no driver: SQLAlchemy 2.1 then picks psycopg 3, while the
    one Dagster's own PostgreSQL storage installs is psycopg2. Use whichever is installed."""
    url = settings.url
    if url.drivername != "postgresql":
        return url
    import importlib.util

    for module, driver in (("psycopg", "postgresql+psycopg"), ("psycopg2", "postgresql+psycopg2")):
        if importlib.util.find_spec(module) is not None:
            return url.set(drivername=driver)
    raise StoreUnavailableError(
        f"workspace store {settings.shown}: no PostgreSQL driver is installed; "
        "pip install 'dws_dagster[postgres]' (psycopg2), or psycopg"
    )


def _enable_wal(cursor: sqlite3.Cursor) -> None:
    """Put a new database file in WAL mode (it stays so). Switching needs the file to
    itself, and SQLite answers "database is locked" at once, without its busy wait, when
    another process opens the new file at that moment: retry until the lock timeout."""
    deadline = time.monotonic() + LOCK_TIMEOUT_SECONDS
    while True:
        try:
            # Where WAL cannot be used (no shared memory), SQLite keeps the rollback journal:
            # slower for concurrent readers, as correct.
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_events(engine: Engine) -> None:
    """pysqlite begins transactions on its own schedule; take that over (SQLAlchemy's recipe
    for transactional SQLite) so a write transaction is `BEGIN IMMEDIATE` from its start."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            _enable_wal(cursor)
            # FULL: a commit survives a power cut, as the journal's fsynced appends did.
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get("dws_immediate")
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
