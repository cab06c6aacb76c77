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

import pytest

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.cli.main import main as cli_main

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
    folder = _spark_conf.pop("folder", None)
    if folder is not None:
        if os.environ.get("SPARK_CONF_DIR") == str(folder):
            del os.environ["SPARK_CONF_DIR"]
        shutil.rmtree(folder, ignore_errors=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if (
        "store_backend" in metafunc.fixturenames
        and metafunc.definition.get_closest_marker("both_stores") is not None
    ):
        metafunc.parametrize("store_backend", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A PostgreSQL server for the session, on 127.0.0.1 (skipped without PostgreSQL, unless
    CI is set: then a failure)."""
    from tests.support.postgres_server import start_server, stop_server, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so the PostgreSQL store tests must run)")
        pytest.skip(reason)
    server = start_server()
    server.create_database_named(STORE_DATABASE)
    try:
        yield server
    finally:
        stop_server(server)


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


#: The Spark Connect server launched when collection found tests that use one (or why it
#: could not be), before any test runs: its JVM boots (about a minute) while other tests run.
_early_connect: dict[str, object] = {}


#: Fixtures through which a test reaches the Connect server (`spark_session` asks for it by
#: name in its "connect" case, which the fixture closure does not show).
_CONNECT_FIXTURES = frozenset({"connect_server", "connect_session", "spark_session"})


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(_CONNECT_FIXTURES & set(getattr(item, "fixturenames", ())) for item in session.items):
        _launch_connect_server()


def _launch_connect_server() -> None:
    import tempfile

    from tests.support.connect_server import launch_server, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        _early_connect["reason"] = reason
        return
    folder = Path(tempfile.mkdtemp(prefix="dws-spark-connect-"))
    _early_connect["folder"] = folder
    try:
        _early_connect["server"] = launch_server(folder)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        _early_connect["reason"] = f"the Spark Connect server did not start: {exc}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the early-launched server by its PID (also when no test got to use it)."""
    from tests.support.connect_server import ConnectServer, stop_server

    server = _early_connect.pop("server", None)
    if isinstance(server, ConnectServer):
        stop_server(server)
    folder = _early_connect.pop("folder", None)
    if isinstance(folder, Path):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def connect_server() -> object:
    """One Spark Connect server for the test run, on 127.0.0.1, launched as soon as
    collection found a test that uses it (skipped without Java or the `connect` extra, unless
    CI is set: then a failure), stopped by its PID at the end of the run."""
    from tests.support.connect_server import ConnectServer, wait_until_serving

    if not _early_connect:  # a test reached the server some other way: launch it now
        _launch_connect_server()
    reason = _early_connect.get("reason")
    server = _early_connect.get("server")
    if reason is None and isinstance(server, ConnectServer):
        try:
            server = wait_until_serving(server)
        except (OSError, RuntimeError) as exc:
            _early_connect.pop("server", None)  # stopped by wait_until_serving
            reason = _early_connect["reason"] = f"the Spark Connect server did not start: {exc}"
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
def replay_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project's demo in a git repository with snapshot `replay-me`, built once
    (tests/replay/replay_example.py); tests replay copies of it."""
    from tests.replay.replay_example import build_demo

    root = tmp_path_factory.mktemp("replay-example") / "demo"
    build_demo(root)
    return root


@pytest.fixture(scope="session")
def dg_scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `dg` project made by `create-dagster project` and `dg scaffold defs
    dws_dagster.WorkspaceComponent lineage` (the real commands), once for the test run; the
    component tests copy it (tests/support/dg_project.py)."""
    from tests.support.dg_project import scaffold_project

    return scaffold_project(tmp_path_factory.mktemp("dg-scaffolded"))
