"""The example project (NYC taxi forecast) set up for the replay tests, once per test session:
the demo materializes the whole example (Dagster runs on a real instance, the Spark IO manager)
from a git repository holding its own copy of the project's code, a script step reports on the
forecast in the same lineage, and snapshot `replay-me` is taken after the weather-adjusted
forecast. Each test replays a copy of it (`copy_demo`), so none sees another's changes.

The copy's code location also defines `forecast_drawn`, the forecast stamped with the clock
when it runs: a deliberately non-deterministic asset, which the demo does not materialize.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.store.database import forget_databases
from dws_dagster.workspace.definition import Workspace
from tests.conftest import ROOT, write
from tests.replay.replay_steps import git

FORECAST_REF = "results/yellow_rides_hourly_forecast"
REPORT_REF = "results/forecast_report"
DRAWN_REF = "results/forecast_drawn"

#: A script step downstream of the forecast, run by hand as scripts are.
REPORT_SCRIPT = """\
from dws_dagster.lineage import LineageBuilder

builder = LineageBuilder().as_script_step().with_parameters({"top": 3})
builder = builder.with_input_refs(["results/yellow_rides_hourly_forecast"])
with builder.eval() as lineage:
    ws = lineage.workspace
    parts = sorted(ws.local_path("results/yellow_rides_hourly_forecast").rglob("*.parquet"))
    lineage.add_output_ref("results/forecast_report")
    out = ws.local_path("results/forecast_report")
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text(f"{len(parts)} parquet files\\n")
"""

#: Appended to the copy's `example_project/definitions.py`.
DRAWN_ASSET = """

from dagster import Definitions as _Definitions, asset as _asset
from pyspark.sql import DataFrame as _DataFrame, functions as _F

from dws_dagster import dws_ref as _dws_ref


@_asset(metadata=_dws_ref("results", "forecast_drawn"))
def forecast_drawn(yellow_rides_hourly_forecast: _DataFrame) -> _DataFrame:
    # When it ran, in its output: the clock, which no parameter records.
    return yellow_rides_hourly_forecast.withColumn("drawn_at", _F.current_timestamp())


defs = _Definitions.merge(defs, _Definitions(assets=[forecast_drawn]))
"""


def commit(root: Path, message: str) -> str:
    git(
        root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A", "example_project",
        "report.py",
    )  # fmt: skip
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def run(*argv: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=900, check=False,
    )  # fmt: skip


def environment(root: Path) -> dict[str, str]:
    """What the example's processes need to run from the repository at `root`: its own copy
    of the example imported, its own Dagster instance and workspace."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)]),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "DAGSTER_HOME": str(root / ".dagster"),
        "DWS_EXAMPLE_WORKSPACE": str(root),
    }
    for name in ("DWS_STORE_URL", "DWS_STORE_SCHEMA"):
        env.pop(name, None)
    return env


def build_demo(root: Path) -> None:
    """The demo in `root` (a new folder), its report, and snapshot `replay-me`."""
    root.mkdir(parents=True)
    shutil.copytree(
        ROOT / "example_project", root / "example_project",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    definitions = root / "example_project/definitions.py"
    definitions.write_text(definitions.read_text() + DRAWN_ASSET)
    write(root / "report.py", REPORT_SCRIPT)
    git(root, "init", "-q")
    first = commit(root, "the example project")
    env = environment(root)
    done = run("-m", "dws_dagster.cli", "demo", str(root), "--small", cwd=root, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    done = run("report.py", cwd=root, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ws = Workspace.open(root)
    record = ws.store.get(FORECAST_REF).record
    assert record["parameters"]["use_weather"] is True  # the weather-adjusted forecast
    assert record["step"]["git_commit"] == first
    take_snapshot(ws, "replay-me")
    forget_databases()


def copy_demo(original: Path, root: Path) -> dict[str, str]:
    """A copy of the demo at `root`, served from there (its code location's working folder
    too); the environment its processes need."""
    shutil.copytree(original, root, symlinks=True)
    served = root / "workspace.yaml"
    served.write_text(served.read_text().replace(str(original), str(root)))
    return environment(root)
