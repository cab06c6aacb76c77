"""`dws-dagster demo`: the example project run end to end in a real subprocess (its own Spark
JVM and Dagster instance), at its smallest size."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dws_dagster.workspace.config import Workspace
from dws_dagster.workspace.snapshots import list_snapshots
from example_project.setup_workspace import SMALL, ensure_workspace

from .conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _command() -> list[str]:
    """The installed console script when there is one, else the same entry point by module."""
    script = Path(sys.executable).parent / "dws-dagster"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dws_dagster.cli"]


def test_demo_runs_the_example_and_reports_where_everything_is(tmp_path):
    target = tmp_path / "demo"
    # A shell that has not activated the virtualenv, as after `./dev demo`.
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p != venv_bin)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1",
           "PATH": path}
    for name in [k for k in env if k.startswith("OPENLINEAGE")]:
        del env[name]  # the default transport: the workspace's events file
    result = subprocess.run([*_command(), "demo", str(target), "--small"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300, check=False)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    events = target / ".dataworkspace" / "openlineage" / "events.jsonl"
    html = target / "lineage.html"
    assert f"OpenLineage events: {events}" in out
    assert f"Lineage graph:      {html}" in out
    assert events.is_file() and html.is_file()
    kinds = {json.loads(line)["eventType"] for line in events.read_text().splitlines()}
    assert kinds == {"START", "COMPLETE"}
    assert "<svg" in html.read_text()
    # Both model iterations with their metrics, and what use_weather changed.
    rows = re.findall(r"^  (baseline|use_weather \(rain\))\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)",
                      out, re.MULTILINE)
    assert [row[0] for row in rows] == ["baseline", "use_weather (rain)"]
    assert all(float(mae) > 0 and float(rmse) > 0 for _, mae, rmse, _ in rows)
    assert "input + intermediate-data/weather_raw/{2024-01-25 … 2024-02-08} (15)" in out
    assert "intermediate-data/training_data@" in out
    # Snapshots: one per forecast run, taken by the lineage sensor's work.
    ws = Workspace.open(target)
    snapshots = list_snapshots(ws)
    assert len(snapshots) == 2 and all(info.metrics for info in snapshots)
    assert re.search(r"^Snapshot:\s+run-[0-9a-f]{8}", out, re.MULTILINE)
    assert (target / ".dagster" / "dagster.yaml").is_file()
    assert "DEBUG" not in result.stderr and "STEP_SUCCESS" not in result.stderr + out
    # Every command it suggests runs as printed in a fresh shell with that PATH.
    tried = out.split("\nTry:\n", 1)[1].splitlines()
    assert len(tried) == 4 and " dev -w workspace.yaml" in tried[3]
    fresh = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": path,
             "PYTHONPATH": str(ROOT)}
    for line in tried[:3]:
        done = subprocess.run(["bash", "-c", line.strip()], cwd=tmp_path, env=fresh,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, f"{line}: {done.stderr[-2000:]}"
        assert done.stdout.strip(), line
    # `dagster dev` serves until stopped: its command is checked to resolve and start.
    words = shlex.split(tried[3].split("#")[0])
    dagster = words[words.index("dev") - 1]
    assert subprocess.run(["bash", "-c", f"{shlex.quote(dagster)} --version"], env=fresh,
                          capture_output=True, timeout=120, check=False).returncode == 0


def test_demo_refuses_a_workspace_set_up_for_another_size(tmp_path, cli):
    ensure_workspace(tmp_path / "demo", SMALL)
    code, out, err = cli("demo", tmp_path / "demo", "--months", "1")
    assert code == 1 and out == ""
    assert err.startswith("error: workspace ") and "use another folder" in err
