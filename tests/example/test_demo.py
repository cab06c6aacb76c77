"""`dws-dagster demo`: the example project run end to end in a real subprocess (its own Spark
JVM and Dagster instance), at its smallest size; the commands it prints, run as printed."""

import fcntl
import json
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from dws_dagster.cli.demo import final_report as demo_report
from dws_dagster.snapshots.take import list_snapshots
from dws_dagster.workspace.definition import Workspace
from example_project.setup_workspace import SMALL, ensure_workspace
from tests.conftest import ROOT
from tests.e2e.dagster_server import free_port, launch, poll

pytestmark = [pytest.mark.slow, pytest.mark.spark]

VENV_BIN = Path(sys.executable).parent
#: What `./dev dws-dagster|dagster|dg ARGS` does (forward to the project's environment),
#: for this checkout: the real `./dev` would first set up its own virtualenv.
DEV_SCRIPT = f"""#!/usr/bin/env bash
set -euo pipefail
export PYTHONPATH={shlex.quote(str(ROOT))}
command="$1"
shift
case "$command" in
  dws-dagster|dagster|dg) exec {shlex.quote(str(VENV_BIN))}/"$command" "$@" ;;
  *) echo "usage: ./dev dws-dagster|dagster|dg [ARGS...]" >&2; exit 2 ;;
esac
"""
#: A fresh login shell's PATH: no virtualenv on it.
MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
PROGRESS = re.compile(r"^demo \[\d\d:\d\d\] (?:(\d+)/(\d+) )?(.+)$")


def _command() -> list[str]:
    """The installed console script when there is one, else the same entry point by module."""
    script = VENV_BIN / "dws-dagster"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dws_dagster.cli"]


def _run_streaming(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, str, list[tuple[str, bool]]]:
    """Run `argv` with stdout and stderr to pipes; (exit code, stdout, [(stderr line, whether
    the process was still running when the line was read)])."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)
    reader.start()
    lines = [(line.rstrip("\n"), process.poll() is None) for line in process.stderr]
    code = process.wait(timeout=timeout)
    reader.join(timeout=timeout)
    return code, "".join(out), lines


def test_demo_runs_the_example_and_reports_where_everything_is(tmp_path):
    target = tmp_path / "demo"
    (tmp_path / "dev").write_text(DEV_SCRIPT)
    (tmp_path / "dev").chmod(0o755)
    # As after `./dev demo`: a shell that has not activated any virtualenv, and ./dev saying
    # how it was called.
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": MINIMAL_PATH,
        demo_report.DEV_SCRIPT_ENV: "./dev",
    }
    for name in [k for k in env if k.startswith("OPENLINEAGE")]:
        del env[name]  # the default transport: the workspace's events file
    code, out, progress = _run_streaming(
        [*_command(), "demo", str(target), "--small"], cwd=tmp_path, env=env, timeout=600
    )
    err = "\n".join(line for line, _ in progress)
    assert code == 0, out + err

    # Not a terminal: a line per step on stderr as it starts, while the demo works.
    steps = [PROGRESS.match(line) for line, _ in progress]
    assert all(steps), err
    labels = [m[3] for m in steps]
    total = int(steps[-1][2])
    assert labels[:2] == ["landing data", "starting Spark"] and len(labels) == total
    assert steps[0][1] is None  # the number of steps is known once the data has landed
    assert [int(m[1]) for m in steps[1:]] == list(range(2, total + 1))
    assert all(label.startswith("run ") for label in labels[2:]), labels
    # The taxi months and the weather days backfill in one run each (single-run backfills).
    assert labels[2:] == [
        "run taxi 2024-01-01 … 2024-02-01",
        "run weather 2024-01-25 … 2024-02-08",
        "run forecast (baseline)",
        "run forecast (use_weather)",
    ], labels
    assert progress[2][1], "the first run's line came only after the demo had finished"
    # Spark's console output went to its log, not to the demo's output.
    spark_log = target / ".dagster" / "spark.log"
    assert "WARN" not in out + err and "log4j" in spark_log.read_text()

    events = target / ".dataworkspace" / "openlineage" / "events.jsonl"
    html = target / "lineage.html"
    assert f"OpenLineage events: {events}" in out
    assert f"Lineage graph:      {html}" in out
    assert events.is_file() and html.is_file()
    kinds = {json.loads(line)["eventType"] for line in events.read_text().splitlines()}
    assert kinds == {"START", "COMPLETE"}
    assert "<svg" in html.read_text()
    # Both model iterations with their metrics, and what use_weather changed.
    rows = re.findall(
        r"^  (baseline|use_weather \(rain\))\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)", out, re.MULTILINE
    )
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
    assert "DEBUG" not in err and "STEP_SUCCESS" not in err + out

    # Every command it suggests goes through ./dev, and runs as printed in a fresh shell.
    tried = out.split("\nTry:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(tried) == 3 and all(line.startswith("  ./dev dws-dagster ") for line in tried)
    fresh = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": MINIMAL_PATH}
    for line in tried:
        done = subprocess.run(
            ["bash", "-c", line.strip()],
            cwd=tmp_path,
            env=fresh,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{line}: {done.stderr[-2000:]}"
        assert done.stdout.strip(), line
    _check_the_dagster_ui_command(out, target, tmp_path, fresh)
    snapshots = re.search(r"^  ./dev dws-dagster diff (\S+) (\S+) ", out, re.MULTILINE)
    assert snapshots, out
    _check_commands_printed_under_a_virtualenv(target, tmp_path, snapshots.groups())


#: A shell where `source .venv/bin/activate` was run: this environment first on PATH.
ACTIVATED = {
    "HOME": os.environ.get("HOME", "/tmp"),
    "PATH": os.pathsep.join([str(VENV_BIN), "/usr/bin", "/bin"]),
    "VIRTUAL_ENV": str(VENV_BIN.parent),
    "PYTHONPATH": str(ROOT),
}


def _check_commands_printed_under_a_virtualenv(
    target: Path, cwd: Path, snapshots: tuple[str, ...]
) -> None:
    """What the report suggests when the demo ran in an activated virtualenv (no ./dev), run
    as printed in a new shell whose PATH is the system's only, from the folder the demo ran
    in. The report's commands come from the same code as the demo's own report, here in a
    process with the activated environment (one demo run per test session is enough)."""
    printed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path\n"
            "from dws_dagster.cli.demo.final_report import (\n"
            "    Iteration, dg_dev_command, try_commands)\n"
            "its = [Iteration(False, 'a', snapshot=sys.argv[2]),"
            " Iteration(True, 'b', snapshot=sys.argv[3])]\n"
            "print('\\n'.join(try_commands(Path(sys.argv[1]), its, pending=True)))\n"
            "print(dg_dev_command(Path(sys.argv[1])))\n",
            str(target),
            *snapshots,
        ],
        cwd=cwd,
        env=ACTIVATED,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    *tried, dg_line = printed
    assert len(tried) == 4, printed
    fresh = {"HOME": ACTIVATED["HOME"], "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    for line in tried:
        assert line.startswith(shlex.quote(str(VENV_BIN / "dws-dagster")) + " "), line
        done = subprocess.run(
            ["bash", "-c", line], cwd=cwd, env=fresh, capture_output=True, text=True, timeout=120
        )
        assert "command not found" not in done.stderr, line
        assert done.returncode in (0, 1) and (done.stdout.strip() or done.stderr), line
        if " deliver " not in line:  # nothing pending: deliver's answer may be either
            assert done.returncode == 0, f"{line}: {done.stderr[-2000:]}"
    # `dg dev` serves until stopped (started as printed above): its program runs from here.
    words = shlex.split(dg_line)
    program = next(word for word in words if "=" not in word)
    assert program == str(VENV_BIN / "dg"), dg_line
    done = subprocess.run(
        ["bash", "-c", f"{shlex.quote(program)} --version"],
        cwd=cwd,
        env=fresh,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _check_the_dagster_ui_command(out: str, target: Path, cwd: Path, fresh: dict[str, str]) -> None:
    """`dg dev` serves until stopped: the printed command is started as printed (on a free
    port instead of 3000, which may be taken on a shared machine), serves the demo's code
    location and instance on 127.0.0.1, and is stopped."""
    ui = re.search(
        r"^The Dagster UI on http://127\.0\.0\.1:3000 \(Ctrl-C stops it\):\n  (.+)$",
        out,
        re.MULTILINE,
    )
    assert ui, out
    line = ui[1]
    assert line == (
        f"DAGSTER_HOME={target / '.dagster'} DWS_EXAMPLE_WORKSPACE={target} "
        f"./dev dg dev -w {target / 'workspace.yaml'} -h 127.0.0.1 -p 3000"
    )
    port = free_port()
    server = launch(
        line.replace("-p 3000", f"-p {port}"),
        cwd=cwd,
        env=fresh,
        port=port,
        home=target / ".dagster",
        log_path=cwd / "dg-dev.log",
        startup_timeout=180,
    )
    try:
        assert server.wait_for_code_locations() == ["example_project.definitions"]
        served = poll(server.served_url, timeout=30, what="the webserver's address in its log")
        assert served == f"http://127.0.0.1:{port}"
        assert str(target / ".dagster") in server.instance_info()
    finally:
        # dg dev's daemon and code server stop after it: on a loaded machine that takes a while.
        assert server.stop(timeout=120) is not None, "dg dev did not stop on SIGTERM"


def test_printed_commands_go_through_dev_when_it_started_the_demo(monkeypatch):
    monkeypatch.setenv(demo_report.DEV_SCRIPT_ENV, "./dev")
    assert demo_report.command("dws-dagster") == "./dev dws-dagster"
    monkeypatch.setenv(demo_report.DEV_SCRIPT_ENV, "/home/me/my repo/dev")
    assert demo_report.command("dg") == "'/home/me/my repo/dev' dg"
    assert demo_report.dg_dev_command(Path("/d d")).startswith(
        "DAGSTER_HOME='/d d/.dagster' DWS_EXAMPLE_WORKSPACE='/d d' '/home/me/my repo/dev' dg "
        "dev -w '/d d/workspace.yaml' -h 127.0.0.1 -p 3000"
    )
    # In an activated virtualenv (its scripts first on PATH), or installed: the environment's
    # own path, which a new shell without that PATH still runs.
    monkeypatch.delenv(demo_report.DEV_SCRIPT_ENV)
    monkeypatch.setenv("PATH", os.pathsep.join([str(VENV_BIN), MINIMAL_PATH]))
    monkeypatch.setenv("VIRTUAL_ENV", str(VENV_BIN.parent))
    if (VENV_BIN / "dws-dagster").exists():
        assert demo_report.command("dws-dagster") == shlex.quote(str(VENV_BIN / "dws-dagster"))
    monkeypatch.setattr(sys, "executable", "/opt/my env/bin/python")  # no scripts there
    monkeypatch.setenv("PATH", MINIMAL_PATH)
    assert demo_report.command("dws-dagster") == "'/opt/my env/bin/python' -m dws_dagster.cli"


def test_spark_start_up_output_stays_out_of_the_terminal(tmp_path):
    """On a terminal, the JVM's start-up warnings go to the demo's Spark log, not over the
    progress bar (the JVM keeps the standard error it started with)."""
    log = tmp_path / "spark.log"
    code = (
        "import sys\n"
        "from dws_dagster.cli.demo.pipeline import _start_spark\n"
        "from dws_dagster.cli.demo.progress import Progress\n"
        "from example_project.project import SPARK_CONFIG\n"
        "progress = Progress(total=2)\n"
        "assert progress.interactive\n"
        "progress.step('starting Spark')\n"
        f"_start_spark(SPARK_CONFIG, __import__('pathlib').Path({str(log)!r}))\n"
        "progress.advance()\n"
        "from pyspark.sql import SparkSession\n"
        "SparkSession.builder.getOrCreate().range(3).count()\n"
        "progress.close()\n"
        "print('done', file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the terminal, 120 columns wide
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.execve(sys.executable, [sys.executable, "-c", code], env)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closed: the child is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, shown
    assert "starting Spark" in shown and "done" in shown
    assert "WARN" not in shown and "log4j" not in shown, shown
    assert "log4j" in log.read_text()


def test_demo_refuses_a_workspace_set_up_for_another_size(tmp_path, cli):
    ensure_workspace(tmp_path / "demo", SMALL)
    code, out, err = cli("demo", tmp_path / "demo", "--months", "1")
    assert code == 1 and out == ""
    progress, error = err.splitlines()  # not a terminal: the step it was at, then why
    assert PROGRESS.match(progress)[3] == "landing data"
    assert error.startswith("error: workspace ") and "use another folder" in error
