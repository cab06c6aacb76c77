"""Shared fixtures: real workspaces on disk, real subprocesses; nothing mocked."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.cli.main import main as cli_main
from tests.support.run_services import (
    WORKER_INPUT_KEY,
    is_controller,
    made_once,
    made_so_far,
    make_run_folder,
    remove_run_folder,
    run_folder,
)

ROOT = Path(__file__).resolve().parent.parent
#: The database on the session's PostgreSQL server that holds the stores of `both_stores` tests
#: (one schema per test).
STORE_DATABASE = "dws_stores"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "both_stores: run the test on the SQLite store and on a PostgreSQL store "
        "(a throwaway server on 127.0.0.1; one schema per test)",
    )
    _use_test_spark_conf()
    if is_controller(config):
        make_run_folder(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, in the controller: each worker learns the run's shared folder."""
    node.workerinput[WORKER_INPUT_KEY] = str(run_folder(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker per core, at most four. Each worker has a Spark driver of its own
    (two local cores), and the slowest tests start Dagster runs in processes of their own, so
    more workers than that wait on each other rather than finish sooner."""
    return max(1, min(os.cpu_count() or 1, 4))


#: The Spark configuration folder made for this test run (tests/support/spark_jvm.py), if any.
_spark_conf: dict[str, Path] = {}


def _use_test_spark_conf() -> None:
    """Every Spark driver of the run, this process's and its children's, starts with the
    test run's JVM options (tests/support/spark_jvm.py), unless SPARK_CONF_DIR is set already."""
    import tempfile

    from tests.support.spark_jvm import write_conf_dir

    if os.environ.get("SPARK_CONF_DIR"):
        return
    folder = write_conf_dir(Path(tempfile.mkdtemp(prefix="dws-test-spark-conf-")))
    _spark_conf["folder"] = folder
    os.environ["SPARK_CONF_DIR"] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    if is_controller(config):  # every worker is done: stop what the run shared
        _stop_run_services(config)
        remove_run_folder(config)
    folder = _spark_conf.pop("folder", None)
    if folder is not None:
        if os.environ.get("SPARK_CONF_DIR") == str(folder):
            del os.environ["SPARK_CONF_DIR"]
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with slow tests run first: pytest-xdist hands out whole files in this order (see
    `--dist` in pyproject.toml), so the longest start early rather than keep one worker busy
    after the others are done."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if (
        "store_backend" in metafunc.fixturenames
        and metafunc.definition.get_closest_marker("both_stores") is not None
    ):
        metafunc.parametrize("store_backend", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture(scope="session")
def postgres_server(pytestconfig: pytest.Config) -> object:
    """The run's PostgreSQL server, on 127.0.0.1, started by the first worker that needs it and
    stopped at the end of the run (skipped without PostgreSQL, unless CI is set: then a
    failure)."""
    from tests.support.postgres_server import PostgresServer, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so the PostgreSQL store tests must run)")
        pytest.skip(reason)
    return PostgresServer.from_record(made_once(pytestconfig, "postgres", _start_postgres))


def _start_postgres(_folder: Path) -> dict[str, Any]:
    from tests.support.postgres_server import start_server, stop_server

    server = start_server()
    try:
        server.create_database_named(STORE_DATABASE)
    except BaseException:
        stop_server(server)
        raise
    return server.record()


def _stop_run_services(config: pytest.Config) -> None:
    """Stop the run's servers by their PIDs, whether or not a test got to use them."""
    from tests.support.connect_server import ConnectServer
    from tests.support.connect_server import stop_server as stop_connect
    from tests.support.postgres_server import PostgresServer
    from tests.support.postgres_server import stop_server as stop_postgres

    connect = made_so_far(config, "spark-connect")
    if connect is not None and "pid" in connect:
        stop_connect(ConnectServer.from_record(connect))
    postgres = made_so_far(config, "postgres")
    if postgres is not None:
        stop_postgres(PostgresServer.from_record(postgres))


@pytest.fixture
def store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Which store the test's workspaces use: SQLite (the default), or with `both_stores` also
    PostgreSQL through DWS_STORE_URL, a fresh schema per test (subprocesses inherit it)."""
    from dws_dagster.store.database import forget_databases

    kind = getattr(request, "param", "sqlite")
    monkeypatch.delenv("DWS_STORE_URL", raising=False)  # not the developer's own store
    monkeypatch.delenv("DWS_STORE_SCHEMA", raising=False)
    if kind == "postgresql":
        server = request.getfixturevalue("postgres_server")
        monkeypatch.setenv("DWS_STORE_URL", server.url(STORE_DATABASE))
        monkeypatch.setenv("DWS_STORE_SCHEMA", f"t_{uuid.uuid4().hex[:16]}")
    yield kind
    forget_databases()  # pooled connections of this test's stores go with it


@pytest.fixture
def ws(tmp_path: Path, store_backend: str) -> Workspace:
    """A workspace with one resource of each role."""
    workspace = Workspace.init(tmp_path / "ws")
    workspace.add_resource("src", "source-data", path="data/src")
    workspace.add_resource("inter", "intermediate-data", path="data/inter")
    workspace.add_resource("results", "results", path="results")
    workspace.add_resource("code", "code", path="code")
    return workspace


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run_step(
    ws: Workspace,
    name: str,
    inputs: list[str],
    outputs: dict[str, str],
    parameters: dict | None = None,
    results: dict | None = None,
    results_dir: str | None = None,
) -> None:
    """Run a script-style step: read `inputs` (refs), write `outputs` (ref -> file content)."""
    builder = (
        LineageBuilder()
        .with_step_name(name)
        .with_parameters(parameters or {})
        .with_workspace_directory(ws.root)
    )
    builder = builder.with_input_refs(inputs) if inputs else builder.with_no_inputs()
    if results_dir is not None:
        builder = builder.as_results_step(ws.root / results_dir)
    with builder.eval() as lineage:
        for ref, content in outputs.items():
            lineage.add_output_ref(ref)
            write(ws.local_path(ref) / "part-0.csv", content)
        if results is not None:
            lineage.write_results(results)


def tree_state(root: Path) -> dict[str, str]:
    """Every file under `root` with a hash of its bytes: compare before/after to prove that a
    refused operation changed nothing on disk (lock files excluded: taking a lock is not a
    change; nor is SQLite's shared-memory index, which readers rewrite, nor an empty write-ahead
    log, which holds no change)."""
    state = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith(("lock", "-shm")):
            continue
        if path.name.endswith("-wal") and path.stat().st_size == 0:
            continue
        state[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """Run `dws-dagster ARGS` in-process from directory `cwd`; returns (code, stdout, stderr)."""

    def run(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = cli_main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def run_python(
    code: str, cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run Python code in a new interpreter (a real separate process)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test run (a JVM start costs ~10 s)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers (UDFs) run this interpreter, not the first `python3` on PATH: with
    # pyarrow installed here (the `connect` extra), Spark 4 runs UDFs through Arrow, and a
    # worker without pyarrow would fail. Child processes inherit it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("dws-dagster-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # Spark forgets all but the newest SQL executions; keeping few makes every test meet
        # that from its first minutes, as a long-lived session in production does.
        .config("spark.sql.ui.retainedExecutions", "40")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


#: Fixtures through which a test reaches the Connect server (`spark_session` asks for it by
#: name in its "connect" case, which the fixture closure does not show).
_CONNECT_FIXTURES = frozenset({"connect_server", "connect_session", "spark_session"})


def pytest_collection_finish(session: pytest.Session) -> None:
    """Launch the run's Spark Connect server as soon as collection finds a test that uses it:
    its JVM boots (about a minute) while other tests run."""
    if any(_CONNECT_FIXTURES & set(getattr(item, "fixturenames", ())) for item in session.items):
        _launch_connect_server(session.config)


def _launch_connect_server(config: pytest.Config) -> dict[str, Any]:
    """How to reach the run's server (its port, PID and folder), or why there is none."""
    return made_once(config, "spark-connect", _launch_connect_server_in)


def _launch_connect_server_in(folder: Path) -> dict[str, Any]:
    from tests.support.connect_server import launch_server, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return {"reason": reason}
    try:
        server = launch_server(folder)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return {"reason": f"the Spark Connect server did not start: {exc}"}
    return server.record()


@pytest.fixture(scope="session")
def connect_server(pytestconfig: pytest.Config) -> object:
    """The run's Spark Connect server, on 127.0.0.1, launched as soon as collection found a
    test that uses it (skipped without Java or the `connect` extra, unless CI is set: then a
    failure), stopped by its PID at the end of the run."""
    from tests.support.connect_server import ConnectServer, wait_until_serving

    made = _launch_connect_server(pytestconfig)  # at collection already, as a rule
    reason = made.get("reason")
    server = None
    if reason is None:
        server = ConnectServer.from_record(made)
        try:
            server = wait_until_serving(server)
        except (OSError, RuntimeError) as exc:
            reason = f"the Spark Connect server did not start: {exc}"
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so the Spark Connect tests must run)")
        pytest.skip(str(reason))
    return server


@pytest.fixture(scope="session")
def connect_session(connect_server):
    """One Spark Connect client session for the test run. Making it puts pyspark in Connect
    mode process-wide (`functions.*` build Connect columns); that is undone here, and set again
    only for the duration of each Connect test (`spark_session`), so classic tests are not
    affected by the order tests run in."""
    # Connect's own builder: pyspark's refuses a remote session beside a running classic one.
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(connect_server.url).getOrCreate()
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    yield session
    session.stop()


@pytest.fixture(params=["classic", "connect"])
def spark_session(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """The test runs on the shared classic session, then on the shared Spark Connect session
    (pyspark in Connect mode for that test only)."""
    if request.param == "classic":
        monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
        return request.getfixturevalue("spark")
    session = request.getfixturevalue("connect_session")
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    return session


@pytest.fixture(scope="session")
def dagster_home_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DAGSTER_HOME whose SQLite storages Dagster created (the default run-sharded storage,
    as `dagster dev` uses), telemetry off, and that no run has used: a copy of it is a new
    instance's home without creating its schemas again (which takes about a second)."""
    from dagster import DagsterInstance

    home = tmp_path_factory.mktemp("dagster-home-template")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.local_temp(str(home)) as inst:
        inst.get_runs()  # every storage opened, so every database exists
    return home


@pytest.fixture
def instance(tmp_path: Path, dagster_home_template: Path):
    """A Dagster instance in a temporary SQLite home (the default run-sharded storage, as
    `dagster dev` uses), telemetry off: a copy of `dagster_home_template`. Modules may override
    it (e.g. with an ephemeral one)."""
    from dagster import DagsterInstance

    home = tmp_path / "dagster_home"
    shutil.copytree(dagster_home_template, home)
    with DagsterInstance.local_temp(str(home)) as inst:
        yield inst


@pytest.fixture
def clean_ol_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No OpenLineage configuration anywhere: not in the environment, the working folder or
    the home folder, so events go to the workspace's own file."""
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def script_pipeline_ws(ws: Workspace) -> Workspace:
    """Workspace `ws` after two script steps: prep (src -> inter/prep) and train (a results
    step writing results/exp)."""
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n1\n"}, {"scale": 2})
    run_step(
        ws,
        "train",
        ["inter/prep"],
        {},
        {"gamma": 0.1},
        results={"mae": 1.5},
        results_dir="results/exp",
    )
    return ws


@pytest.fixture
def git_ws(ws: Workspace) -> tuple[Workspace, str]:
    """`ws` in a git repository whose committed code is the replay tests' step scripts, and
    that commit."""
    from tests.replay.replay_steps import make_git_ws

    return make_git_ws(ws)


@pytest.fixture(scope="session")
def replay_demo(pytestconfig: pytest.Config) -> Path:
    """The example project's demo in a git repository with snapshot `replay-me`, built once
    for the run (tests/replay/replay_example.py); tests replay copies of it."""
    from tests.replay.replay_example import build_demo

    def build(folder: Path) -> dict[str, Any]:
        build_demo(folder / "demo")
        return {"root": str(folder / "demo")}

    return Path(made_once(pytestconfig, "replay-demo", build)["root"])


@pytest.fixture(scope="session")
def dg_scaffolded(pytestconfig: pytest.Config) -> Path:
    """A `dg` project made by `create-dagster project` and `dg scaffold defs
    dws_dagster.WorkspaceComponent lineage` (the real commands), once for the test run; the
    component tests copy it (tests/support/dg_project.py)."""
    from tests.support.dg_project import scaffold_project

    def scaffold(folder: Path) -> dict[str, Any]:
        return {"root": str(scaffold_project(folder))}

    return Path(made_once(pytestconfig, "dg-scaffolded", scaffold)["root"])
