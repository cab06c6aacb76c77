"""Looking into, and damaging, a workspace's store database from tests.

The store is a real database (SQLite `.dataworkspace/store.db` by default), so tests observe it
with SQL, as an operator with a database client would, and damage it the same way (a row edited
by hand, a backup of another version restored): the store must read every row as untrusted.
Statements go through the store's own engine, so the helpers work on PostgreSQL too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from dws_dagster import Workspace
from dws_dagster.store import schema
from dws_dagster.store.database import forget_databases
from tests.conftest import tree_state


def sql(ws: Workspace, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    """Run `statement` on the workspace's store, committed; the rows it returns, if any.
    `:ws` is bound to the workspace's id."""
    store = ws.store
    params.setdefault("ws", store.workspace_id)
    with store.db.engine.begin() as connection:
        result = connection.execute(text(statement), params)
        return [tuple(row) for row in result] if result.returns_rows else []


def damage(ws: Workspace, statement: str, **params: Any) -> int:
    """Change the store behind the code's back; the number of rows changed (at least one, or
    the damage the test means to make was not made)."""
    store = ws.store
    params.setdefault("ws", store.workspace_id)
    with store.db.engine.begin() as connection:
        changed = connection.execute(text(statement), params).rowcount
    assert changed, f"the damage changed nothing: {statement}"
    return int(changed)


def db_dump(ws: Workspace) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store, sorted: equal before and after means the
    operation in between changed nothing in the database."""
    dump: dict[str, list[tuple[Any, ...]]] = {}
    ws.store.workspace_id  # noqa: B018  (the tables exist: a store never opened has them now)
    with ws.store.db.engine.connect() as connection:
        for table in schema.metadata.sorted_tables:
            # A workspace's `generation` counts write locks taken: not a change.
            columns = [c for c in table.c if c is not schema.workspaces.c.generation]
            rows = connection.execute(select(*columns)).all()
            dump[table.name] = sorted((tuple(row) for row in rows), key=repr)
    return dump


def workspace_state(ws: Workspace, root: Path | None = None) -> tuple[dict[str, str], Any]:
    """Every file under `root` (default: the workspace) but the store's database files and the
    machine's file-hash cache, and the database's rows: SQLite's files change when only read
    (its WAL index), its rows do not; the cache is refreshed by anything that versions data."""
    files = {
        name: digest
        for name, digest in tree_state(root or ws.root).items()
        if not Path(name).name.startswith("store.db")
        and not name.startswith(".dataworkspace/cache/")
    }
    return files, db_dump(ws)


def db_file(ws: Workspace) -> Path:
    return ws.meta_dir / "store.db"


def db_bytes(ws: Workspace) -> bytes:
    """The bytes of the SQLite store: the database file and its write-ahead log (committed
    pages live in the log until a checkpoint), to grep for what must never be stored."""
    return b"".join(
        path.read_bytes() for path in sorted(ws.meta_dir.glob("store.db*")) if path.is_file()
    )


def operations(ws: Workspace) -> list[tuple[Any, ...]]:
    """The history rows (op, ref, record_id), in order."""
    return sql(
        ws, "SELECT op, ref, record_id FROM dws_operations WHERE workspace_id = :ws ORDER BY id"
    )


def record_count(ws: Workspace) -> int:
    return sql(ws, "SELECT count(*) FROM dws_records WHERE workspace_id = :ws")[0][0]


# ------------------------------------------------------------- both stores: SQLite, PostgreSQL

#: The stores a store suite runs on (a module overrides its `ws` fixture with `on_store`).
STORES = ["sqlite", "postgresql"]


def on_store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    """The `ws` workspace (one resource of each role) with its store on `request.param`:
    SQLite in `.dataworkspace/` (the default), or a new database on the session's PostgreSQL
    server given by DWS_STORE_URL (inherited by the test's subprocesses too)."""
    if request.param == "postgresql":
        server = request.getfixturevalue("postgres_server")  # conftest: one per session
        database = server.create_database("dws_store")
        monkeypatch.setenv(
            "DWS_STORE_URL",
            f"postgresql+psycopg2://{server.user}:"
            f"{server.password}@{server.host}:{server.port}/{database}",
        )
    workspace = Workspace.init(tmp_path / "ws")
    workspace.add_resource("src", "source-data", path="data/src")
    workspace.add_resource("inter", "intermediate-data", path="data/inter")
    workspace.add_resource("results", "results", path="results")
    workspace.add_resource("code", "code", path="code")
    try:
        yield workspace
    finally:
        if request.param == "postgresql":
            forget_databases()  # no pooled connection outlives its database's test


def sqlite_only(
    ws: Workspace,
    why: str = "SQLite stores a value of any type in any column; "
    "PostgreSQL's typed columns refuse this damage",
) -> None:
    if ws.store.settings.dialect != "sqlite":
        pytest.skip(why)


def lose_retained(ws: Workspace, ref: str, version: str) -> None:
    """Delete the retained files of `ref@version` by hand, as a user clearing disk space
    might: what a snapshot needs of that version is then gone."""
    from dws_dagster.snapshots import snapshot_data
    from dws_dagster.snapshots.objects import ObjectStore

    found = snapshot_data.manifest(ws, ref, version)
    assert found is not None, f"{ref}@{version} was not retained"
    objects = ObjectStore.of_workspace(ws.meta_dir)
    for entry in found[1]:
        objects.path_of(entry.digest).unlink()
