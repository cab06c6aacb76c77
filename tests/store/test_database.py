"""The workspace store's database: which one is used, its tables (Alembic), its transactions
and locks, and its failures as clear errors — on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import inspect, text, update

from dws_dagster import Workspace
from dws_dagster.errors import (
    DwsError,
    LineageConflictError,
    StoreLockError,
    StoreUnavailableError,
    WorkspaceConfigError,
)
from dws_dagster.store import schema
from dws_dagster.store import settings as store_settings
from dws_dagster.store.database import HEAD_REVISION, database_for
from dws_dagster.workspace.records import LineageRecord, StepInfo, now_iso
from dws_dagster.workspace.refs import as_ref
from tests.conftest import run_python

V1, V2 = "1" * 32, "2" * 32


def _record(ref: str, version: str, step: str = "prep", **extra) -> LineageRecord:
    return LineageRecord(
        ref=ref,
        version=version,
        step=StepInfo(name=step, kind="script"),
        start_time=now_iso(),
        end_time=now_iso(),
        **extra,
    )


# ------------------------------------------------------------------ which store


def test_the_default_store_is_sqlite_inside_the_workspace(tmp_path, monkeypatch):
    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    ws = Workspace.init(tmp_path / "ws")
    assert ws.store_settings.dialect == "sqlite"
    assert ws.store_settings.origin == "default"
    ws.store.claim("prep", ["data/x"])
    assert (ws.meta_dir / "store.db").is_file()
    with sqlite3.connect(ws.meta_dir / "store.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_configured_store_takes_its_password_from_the_environment(tmp_path):
    config = {
        "url": "postgresql://dws@db.example:5432/lineage",
        "password": {"env": "LINEAGE_PW"},
        "schema": "dws",
    }
    found = store_settings.resolve(tmp_path, config, environ={"LINEAGE_PW": "s3cr3t-pw"})
    assert found.password == "s3cr3t-pw"
    assert found.schema == "dws"
    assert "s3cr3t-pw" not in found.shown
    assert found.shown == "postgresql://dws@db.example:5432/lineage (schema dws)"


def test_the_environment_url_wins_and_is_shown_without_its_password(tmp_path):
    found = store_settings.resolve(
        tmp_path,
        {"url": "postgresql://x@y/z"},
        environ={"DWS_STORE_URL": "postgresql://u:hunter22@h:5/d", "DWS_STORE_SCHEMA": "s1"},
    )
    assert found.origin == "DWS_STORE_URL"
    assert found.schema == "s1"
    assert "hunter22" not in found.shown


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"url": "postgresql://u:inline@h/d"}, "holds a password"),
        ({"url": "sqlite:////etc/passwd"}, "only a PostgreSQL store"),
        ({"url": "mysql://u@h/d"}, "not supported"),
        ({"url": {"env": "NOT_SET_ANYWHERE"}}, "NOT_SET_ANYWHERE is not set"),
        ({"url": "postgresql://u@h/d", "password": "plain"}, 'expected {"env"'),
        ({"url": "postgresql://u@h/d", "schema": "Drop Table"}, "not a schema name"),
        ({"uri": "postgresql://u@h/d"}, "url required"),
        ("postgresql://u@h/d", "url required"),
        ({"url": "::::"}, "not a database URL"),
    ],
)
def test_a_bad_store_entry_is_refused_with_what_to_fix(tmp_path, config, message):
    with pytest.raises(WorkspaceConfigError, match="config.json: store") as caught:
        store_settings.resolve(tmp_path, config, environ={})
    assert message in str(caught.value)
    assert "inline" not in str(caught.value)


def test_init_store_refuses_a_password_in_the_url():
    with pytest.raises(WorkspaceConfigError, match="holds a password"):
        store_settings.store_entry("postgresql://u:pw@h/d")
    entry = store_settings.store_entry("postgresql://u@h:5/d", password_env="PW", schema="lineage")
    assert entry == {"url": "postgresql://u@h:5/d", "password": {"env": "PW"}, "schema": "lineage"}


# ------------------------------------------------------------------ tables


def test_alembic_head_is_the_revision_the_code_expects():
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    import dws_dagster.store.database as database

    config = Config()
    config.set_main_option("script_location", str(Path(database.__file__).parent / "migrations"))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION


@pytest.mark.both_stores
def test_the_tables_are_created_once_at_the_head_revision(ws, store_backend):
    ws.store.claim("prep", ["inter/a"])
    db = ws.store.db
    names = set(inspect(db.engine).get_table_names(schema=db.settings.schema))
    assert {
        "dws_records",
        "dws_refs",
        "dws_operations",
        "dws_snapshots",
        "dws_ol_events",
        "dws_alembic_version",
    } <= names
    with db.engine.connect() as connection:
        schema = f'"{db.settings.schema}".' if db.settings.schema else ""
        assert (
            connection.execute(
                text(f"SELECT version_num FROM {schema}dws_alembic_version")
            ).scalar()
            == HEAD_REVISION
        )


@pytest.mark.both_stores
def test_two_processes_opening_a_new_store_at_once_create_it_once(ws, store_backend):
    # Fresh workspace store; two processes race to create the tables and register it.
    code = (
        "import sys; from dws_dagster import Workspace\n"
        "ws = Workspace.open(sys.argv[1]); ws.store.claim(sys.argv[2], [sys.argv[3]])\n"
        "print(ws.store.workspace_id)"
    )
    results = []

    def start(step: str, ref: str) -> None:
        results.append(run_python(code, ws.root, str(ws.root), step, ref))

    threads = [threading.Thread(target=start, args=(f"s{i}", f"inter/r{i}")) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.returncode for r in results] == [0, 0], "\n".join(r.stderr[-1500:] for r in results)
    assert len({r.stdout.strip() for r in results}) == 1
    assert [ref for ref, _ in ws.store.items()] == ["inter/r0", "inter/r1"]


# ------------------------------------------------------------------ behaviour on both


@pytest.mark.both_stores
def test_rules_and_history_on_the_store(ws, store_backend):
    store = ws.store
    store.claim("prep", ["inter/a"])
    with pytest.raises(LineageConflictError, match="step 'prep' writes inter/a"):
        store.claim("other", ["inter/a/inside"])
    with pytest.raises(LineageConflictError, match="which contains it"):
        store.claim("other", ["inter/a/b"])
    store.claim("other", ["inter/ab"])  # a sibling whose name starts alike is no conflict
    store.commit([_record("inter/a", V1)])
    second = _record("inter/a", V2)
    store.commit([second])
    store.commit([second])  # the same record again: nothing new
    assert store.get("inter/a").version == V2
    assert store.find_record("inter/a", V1)["version"] == V1
    ops = [(op["op"], op.get("ref") or op["record"]["ref"]) for op in store.history()]
    assert ops == [
        ("claim", "inter/a"),
        ("claim", "inter/ab"),
        ("record", "inter/a"),
        ("record", "inter/a"),
    ]
    assert store.overlapping(as_ref("inter/a")) == ["inter/a"]
    assert store.overlapping(as_ref("inter")) == ["inter/a", "inter/ab"]


@pytest.mark.both_stores
def test_a_refusal_inside_a_transaction_leaves_nothing(ws, store_backend):
    store = ws.store
    store.claim("prep", ["inter/a"])
    with pytest.raises(LineageConflictError):
        store.begin_step("other", claims=["inter/new", "inter/a"])
    assert [ref for ref, _ in store.items()] == ["inter/a"]
    with pytest.raises(RuntimeError, match="boom"), store.locked():
        store.commit([_record("inter/a", V1)])
        raise RuntimeError("boom")
    assert store.get("inter/a").record is None


@pytest.mark.both_stores
def test_a_corrupt_record_in_the_database_is_named_not_trusted(ws, store_backend):
    store = ws.store
    store.claim("prep", ["inter/a"])
    store.commit([_record("inter/a", V1)])
    with store.db.engine.begin() as connection:
        connection.execute(update(schema.records).values(body='{"ref": 5}'))
    with pytest.raises(WorkspaceConfigError) as caught:
        store.get("inter/a")
    assert "inter/a" in str(caught.value) and "workspace store" in str(caught.value)


# ------------------------------------------------------------------ failures


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    ws = Workspace.init(tmp_path / "ws")
    (ws.meta_dir / "store.db").write_bytes(b"this is not SQLite " * 100)
    with pytest.raises(StoreUnavailableError) as caught:
        ws.store.items()
    assert "store.db" in str(caught.value)
    assert "restore it from a backup" in str(caught.value)


@pytest.mark.parametrize(
    "argv",
    [["status"], ["history"], ["snapshot", "again"], ["lineage", "src"], ["gc"], ["restore", "v1"]],
)
def test_a_zero_byte_store_is_refused_not_made_anew(tmp_path, monkeypatch, argv):
    """SQLite takes an empty file for an empty database: a store truncated to nothing would
    get new tables and its history would be gone without a word. Every command refuses it,
    naming the file and what to do, and leaves it as it is (a real CLI process each)."""
    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    ws = Workspace.init(tmp_path / "ws")
    ws.add_resource("src", "source-data", path="data/src")
    (ws.root / "data/src/a.csv").write_text("a\n1\n")
    assert (
        run_python(
            "import sys; from dws_dagster import Workspace\n"
            "from dws_dagster.snapshots.take import take_snapshot\n"
            "take_snapshot(Workspace.open(sys.argv[1]), 'v1')",
            ws.root,
            str(ws.root),
        ).returncode
        == 0
    )
    for leftover in ws.meta_dir.glob("store.db-*"):
        leftover.unlink()
    (ws.meta_dir / "store.db").write_bytes(b"")
    before = sorted(p.name for p in ws.meta_dir.iterdir())
    done = run_python(
        "import sys; from dws_dagster.cli.main import main; sys.exit(main())", ws.root, *argv
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "store.db is an empty file (0 bytes)" in done.stderr
    assert "Restore it from a backup" in done.stderr and "delete it" in done.stderr
    assert (ws.meta_dir / "store.db").stat().st_size == 0
    assert sorted(p.name for p in ws.meta_dir.iterdir()) == before


def test_many_processes_creating_a_new_store_never_take_it_for_an_empty_one(tmp_path, monkeypatch):
    """A store file is made with its header before anyone else may open it: processes that
    open a store being created at that moment wait, and never see the zero-byte file that
    `sqlite3.connect` first leaves."""
    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    ws = Workspace.init(tmp_path / "ws")
    (ws.meta_dir / "store.db").unlink(missing_ok=True)
    code = (
        "import sys; from dws_dagster import Workspace\n"
        "print(Workspace.open(sys.argv[1]).store.workspace_id)"
    )
    results = []

    def start() -> None:
        results.append(run_python(code, ws.root, str(ws.root)))

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.returncode for r in results] == [0] * 4, "\n".join(r.stderr[-800:] for r in results)
    assert len({r.stdout.strip() for r in results}) == 1


def test_an_unreachable_server_is_named_without_its_password(tmp_path, monkeypatch):
    from tests.support.postgres_server import free_port

    monkeypatch.setenv("DWS_STORE_URL", f"postgresql://dws:pw-sekret-9@127.0.0.1:{free_port()}/x")
    ws = Workspace.init(tmp_path / "ws")
    with pytest.raises(StoreUnavailableError) as caught:
        ws.store.claim("prep", ["data/a"])
    message = str(caught.value)
    assert "pw-sekret-9" not in message
    assert "postgresql://dws@127.0.0.1" in message
    assert "server is up" in message


def test_a_held_write_lock_times_out_with_a_clear_error(tmp_path, monkeypatch):
    import dws_dagster.store.database as database

    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    ws = Workspace.init(tmp_path / "ws")
    ws.store.claim("prep", ["inter/a"])
    holder = sqlite3.connect(ws.meta_dir / "store.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        monkeypatch.setattr(database, "LOCK_TIMEOUT_SECONDS", 0.2)
        database.forget_databases()  # engines read the timeout when created
        with pytest.raises(StoreLockError, match="could not lock the workspace store"):
            Workspace.open(ws.root).store.claim("other", ["inter/b"])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        database.forget_databases()


def test_errors_are_dws_errors():
    assert issubclass(StoreUnavailableError, DwsError)
    assert issubclass(StoreLockError, DwsError)


def test_no_password_reaches_the_workspace_files(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    config = json.loads((ws.meta_dir / "config.json").read_text())
    config["store"] = store_settings.store_entry("postgresql://u@h/d", password_env="PW")
    (ws.meta_dir / "config.json").write_text(json.dumps(config))
    reopened = Workspace.open(ws.root)
    found = store_settings.resolve(
        reopened.meta_dir, reopened.store_config, environ={"PW": "the-password-1"}
    )
    assert found.password == "the-password-1"
    assert "the-password-1" not in (ws.meta_dir / "config.json").read_text()
    assert database_for(found).shown == "postgresql://u@h/d"
    assert os.environ.get("PW") is None


# ------------------------------------------------------------------ the CLI


def test_init_with_a_postgres_store_and_status_show_it_without_the_password(
    tmp_path, monkeypatch, cli, postgres_server
):
    from tests.conftest import STORE_DATABASE

    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    server = postgres_server
    monkeypatch.setenv("LINEAGE_DB_PASSWORD", server.password)
    url = f"postgresql://{server.user}@{server.host}:{server.port}/{STORE_DATABASE}"
    code, out, err = cli(
        "init",
        str(tmp_path / "pg"),
        "--store",
        url,
        "--store-password-env",
        "LINEAGE_DB_PASSWORD",
        "--store-schema",
        "cli_init",
    )
    assert code == 0, err
    assert f"lineage store: {url} (schema cli_init)" in out
    config = (tmp_path / "pg" / ".dataworkspace" / "config.json").read_text()
    assert server.password not in config and "LINEAGE_DB_PASSWORD" in config
    code, out, err = cli("status", "--workspace", str(tmp_path / "pg"))
    assert code == 0, err
    assert f"Lineage store: {url} (schema cli_init) (from .dataworkspace/config.json)" in out
    assert server.password not in out + err
    assert not (tmp_path / "pg" / ".dataworkspace" / "store.db").exists()


def test_init_with_an_unreachable_store_creates_nothing(tmp_path, monkeypatch, cli):
    from tests.support.postgres_server import free_port

    monkeypatch.delenv("DWS_STORE_URL", raising=False)
    monkeypatch.setenv("PW", "pw-never-shown")
    code, out, err = cli(
        "init",
        str(tmp_path / "pg"),
        "--store",
        f"postgresql://u@127.0.0.1:{free_port()}/db",
        "--store-password-env",
        "PW",
    )
    assert code != 0
    assert "could not" in err and "pw-never-shown" not in out + err
    assert "Traceback" not in err
    assert not (tmp_path / "pg").exists()


def test_init_refuses_a_password_in_the_store_url(tmp_path, cli):
    code, _out, err = cli("init", str(tmp_path / "pg"), "--store", "postgresql://u:pw1@h/d")
    assert code != 0 and "holds a password" in err and "pw1" not in err
    assert not (tmp_path / "pg").exists()


@pytest.mark.both_stores
def test_the_migrations_build_exactly_the_declared_tables(ws, store_backend):
    """Alembic's revisions, run on an empty database, give the tables schema.py declares:
    a column added to one but not the other fails here, not in a user's upgrade."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import MetaData

    ws.store.claim("prep", ["inter/a"])  # creates the tables through the migrations
    db = ws.store.db
    declared = schema.metadata
    if db.settings.schema:  # the tables as they are named in their schema
        declared = MetaData()
        for table in schema.metadata.tables.values():
            table.to_metadata(declared, schema=db.settings.schema)

    def ours(name: str | None, kind: str, parent: dict) -> bool:
        if kind == "schema":
            return name == db.settings.schema
        return kind != "table" or bool(name and name.startswith("dws_"))

    with db.engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "include_schemas": bool(db.settings.schema),
                "include_name": ours,
                "version_table": "dws_alembic_version",
                "version_table_schema": db.settings.schema,
            },
        )
        assert compare_metadata(context, declared) == []


@pytest.mark.both_stores
def test_a_store_upgraded_by_a_newer_version_is_refused_clearly(ws, store_backend):
    ws.store.claim("prep", ["inter/a"])
    db = ws.store.db
    prefix = f'"{db.settings.schema}".' if db.settings.schema else ""
    with db.engine.begin() as connection:
        connection.execute(text(f"UPDATE {prefix}dws_alembic_version SET version_num = '9999'"))
    from dws_dagster.store.database import forget_databases

    forget_databases()  # a new process: it checks the revision again
    with pytest.raises(StoreUnavailableError, match="revision '9999'.*Upgrade dws_dagster"):
        Workspace.open(ws.root).store.items()
