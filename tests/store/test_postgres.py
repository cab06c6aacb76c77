"""A Postgres-backed Dagster instance (`dagster-postgres`), as a deployment with several
processes, machines or pods runs: the IO manager and the lineage sensor against it give the
same lineage, results and OpenLineage events as against the default SQLite storage.

A real PostgreSQL server is started for the session on 127.0.0.1 (tests/support/postgres_server.py).
Without PostgreSQL installed the tests skip, unless `CI` is set: then they fail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    DagsterEventType,
    DagsterInstance,
    Definitions,
    build_sensor_context,
    materialize,
)

from dws_dagster import Workspace, WorkspaceResource, lineage_sensor, process_events
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.sensor.apply_lineage import EVENT_TYPES
from dws_dagster.sensor.event_reader import EventReader, read_event_records
from dws_dagster.sensor.lineage_sensor import parse_cursor
from dws_dagster.sensor.stored_events import AssetEventRecord, stored_reader
from tests.assets.test_io_manager import run
from tests.sensor.test_sensor import cancelled_before_running, failing_pipeline, scored_assets
from tests.support.lineage_compare import lineage_view, versions
from tests.support.pipeline import io_manager, make_workspace
from tests.support.postgres_server import (
    PostgresServer,
    start_server,
    stop_server,
    unavailable_reason,
)

pytestmark = [pytest.mark.slow]

PASSWORD_ENV = "DWS_TEST_PG_PASSWORD"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so the Postgres tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    reason = unavailable_reason()
    if reason is not None:
        _unavailable(reason)
    try:
        import dagster_postgres  # noqa: F401
    except ImportError:
        _unavailable(
            "dagster-postgres is not installed (it is in the test extra): pip install -e '.[test]'"
        )
    server = start_server()
    try:
        yield server
    finally:
        stop_server(server)


def postgres_instance(home: Path, server: PostgresServer) -> DagsterInstance:
    """A Dagster instance whose storage is a new database on `server` (password from the
    environment, as the README's deployment guide shows)."""
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(server.dagster_yaml(server.create_database(), PASSWORD_ENV))
    return DagsterInstance.from_config(str(home))


def sqlite_instance(home: Path) -> DagsterInstance:
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return DagsterInstance.from_config(str(home))


def run_pipeline(ws: Workspace, instance: DagsterInstance) -> list[Any]:
    """Everything the sensor reads: source observations, two materializations of the
    pipeline (the second with other run config), a failed run and a cancelled one."""
    assets = scored_assets()
    assert run(assets, ws, instance).success
    assert run(
        assets,
        ws,
        instance,
        selection=["hourly", "ranking", "scores"],
        run_config={"ops": {"hourly": {"config": {"min_fare": 10.0}}}},
    ).success
    failed = materialize(
        failing_pipeline([]),
        instance=instance,
        resources={"io_manager": io_manager(ws)},
        raise_on_error=False,
        selection=["hourly", "ranking"],
    )
    assert not failed.success
    cancelled = cancelled_before_running(ws, instance)
    return [*assets, *(cancelled.assets or [])]


def tick_sensor_until_done(ws: Workspace, instance: DagsterInstance, assets: list[Any]) -> int:
    """Tick the real sensor definition, with its cursor, until the cursor stops moving and
    the outbox is delivered; returns the cursor's storage id. Batches of 2 events and a short
    time budget, so the event reads page through the Postgres log."""
    sensor = lineage_sensor(batch_size=2, time_budget_seconds=1.0)
    workspace = WorkspaceResource(root=str(ws.root))
    defs = Definitions(assets=assets, sensors=[sensor], resources={"workspace": workspace})
    cursor = None
    for _ in range(200):
        context = build_sensor_context(
            instance=instance, definitions=defs, cursor=cursor, resources={"workspace": workspace}
        )
        result = sensor(context)
        if result.cursor == cursor and Outbox(ws).status().pending == 0:
            return parse_cursor(cursor, sensor_name=sensor.name)
        cursor = result.cursor
    raise AssertionError(f"the sensor did not settle in 200 ticks (cursor {cursor})")


@dataclass
class Runs:
    sqlite_ws: Workspace
    sqlite: DagsterInstance
    postgres_ws: Workspace
    postgres: DagsterInstance
    sensor_cursor: int
    assets: list[Any]


@pytest.fixture(scope="module")
def runs(postgres, spark, tmp_path_factory) -> Iterator[Runs]:
    """The same runs on a SQLite and a Postgres instance; the sensor's work done on each
    (`process_events` in one go on SQLite, the sensor definition ticking on Postgres)."""
    base = tmp_path_factory.mktemp("postgres-vs-sqlite")
    with pytest.MonkeyPatch.context() as patch:
        # No OpenLineage configuration anywhere: events go to the workspace's file.
        for name in list(os.environ):
            if name.startswith("OPENLINEAGE"):
                patch.delenv(name)
        (base / "home").mkdir()
        patch.setenv("HOME", str(base / "home"))
        patch.chdir(base)
        patch.setenv(PASSWORD_ENV, postgres.password)
        instances = []
        try:
            sqlite = sqlite_instance(base / "sqlite" / "dagster_home")
            instances.append(sqlite)
            pg = postgres_instance(base / "postgres" / "dagster_home", postgres)
            instances.append(pg)
            # Same folder name: the workspace's name is the OpenLineage namespace.
            sqlite_ws = make_workspace(base / "sqlite" / "ws")
            postgres_ws = make_workspace(base / "postgres" / "ws")
            assets = run_pipeline(sqlite_ws, sqlite)
            process_events(
                sqlite, sqlite_ws, repository_def=Definitions(assets=assets).get_repository_def()
            )
            run_pipeline(postgres_ws, pg)
            cursor = tick_sensor_until_done(postgres_ws, pg, assets)
            yield Runs(sqlite_ws, sqlite, postgres_ws, pg, cursor, assets)
        finally:
            for instance in instances:
                instance.dispose()


def test_the_instance_really_is_on_postgres(runs):
    from dagster_postgres import (
        PostgresEventLogStorage,
        PostgresRunStorage,
        PostgresScheduleStorage,
    )

    assert isinstance(runs.postgres.event_log_storage, PostgresEventLogStorage)
    assert isinstance(runs.postgres.run_storage, PostgresRunStorage)
    assert isinstance(runs.postgres.schedule_storage, PostgresScheduleStorage)
    # Two observation runs, two materializations, the failed run, the cancelled one.
    assert len(runs.postgres.get_runs()) == len(runs.sqlite.get_runs()) == 6


def test_postgres_gives_the_same_lineage_as_sqlite(runs):
    sqlite = lineage_view(runs.sqlite_ws, runs.sqlite)
    postgres = lineage_view(runs.postgres_ws, runs.postgres)
    # The sensor's cursor is the storage id of the last event in the Postgres table.
    assert runs.sensor_cursor == _postgres_event_ids(runs.postgres, list(EVENT_TYPES))[-1]
    # What was run, seen in the lineage: both versions of hourly, the failure, the abort.
    assert versions(postgres)["intermediate-data/hourly"]
    assert postgres["refs"]["intermediate-data/hourly"]["attempt"]["status"] == "failed"
    assert postgres["refs"]["intermediate-data/never"]["record"] is None
    assert postgres["refs"]["results/scores"]["record"]["metrics"] == {"mae": 1.25, "rmse": 2.5}
    assert {e["eventType"] for e in postgres["openlineage"]} == {
        "START",
        "COMPLETE",
        "FAIL",
        "ABORT",
    }
    assert versions(postgres) == versions(sqlite)
    assert postgres["refs"] == sqlite["refs"]
    assert postgres["journal"] == sqlite["journal"]
    assert postgres["results"] == sqlite["results"] and postgres["results"]
    assert postgres["openlineage"] == sqlite["openlineage"]


def _postgres_event_ids(instance: DagsterInstance, types: list[DagsterEventType]) -> list[int]:
    """Storage ids of events of `types`, straight from Postgres's `event_logs` table."""
    storage = instance.event_log_storage
    with storage._connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT id FROM event_logs WHERE dagster_event_type = ANY(%(types)s) ORDER BY id",
            {"types": [t.value for t in types]},
        ).fetchall()
    return [row[0] for row in rows]


def test_event_reads_on_postgres_are_complete_and_in_storage_order(runs):
    """`dagster_compat`'s reads (`get_event_records`, `fetch_run_status_changes`) against
    what the Postgres table holds."""
    instance = runs.postgres
    expected = _postgres_event_ids(instance, list(EVENT_TYPES))
    whole = read_event_records(instance, EVENT_TYPES, after_storage_id=0, limit=10_000)
    assert [r.storage_id for r in whole] == expected
    assert stored_reader(instance) is instance.event_log_storage  # asset events: the table
    kinds = {
        r.kind if isinstance(r, AssetEventRecord) else r.event_log_entry.dagster_event.event_type
        for r in whole
    }
    assert {
        DagsterEventType.ASSET_MATERIALIZATION,
        DagsterEventType.ASSET_OBSERVATION,
        DagsterEventType.RUN_SUCCESS,
        DagsterEventType.RUN_FAILURE,
        DagsterEventType.RUN_CANCELED,
    } <= kinds
    for size in (1, 3):
        reader, paged = EventReader(instance, EVENT_TYPES, after_storage_id=0), []
        while batch := reader.next(size):
            assert len(batch) <= size
            paged.extend(batch)
        assert [r.storage_id for r in paged] == expected, size
    middle = expected[len(expected) // 2]
    assert [
        r.storage_id
        for r in read_event_records(instance, EVENT_TYPES, after_storage_id=middle, limit=10_000)
    ] == [i for i in expected if i > middle]


def test_a_lost_store_is_rebuilt_from_the_postgres_event_log(runs, tmp_path):
    copy = tmp_path / "ws"
    shutil.copytree(runs.postgres_ws.root, copy)
    for lost in (copy / ".dataworkspace").glob("store.db*"):  # the SQLite store and its WAL
        lost.unlink()
    ws = Workspace.open(copy)
    # The definitions, as the sensor has them: they map the failed run's assets to refs.
    process_events(
        runs.postgres,
        ws,
        openlineage=False,
        repository_def=Definitions(assets=runs.assets).get_repository_def(),
    )
    rebuilt = {ref: state.to_json() for ref, state in ws.store.items()}
    assert rebuilt == {ref: state.to_json() for ref, state in runs.postgres_ws.store.items()}


def test_the_database_password_is_nowhere_in_the_workspace(runs, postgres):
    assert postgres.password not in Path(runs.postgres.root_directory, "dagster.yaml").read_text()
    for path in runs.postgres_ws.root.rglob("*"):
        if path.is_file():
            assert postgres.password not in path.read_text(errors="replace"), path
