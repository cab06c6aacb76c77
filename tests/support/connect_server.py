"""A Spark Connect server on 127.0.0.1 for the tests, started from the pip `pyspark` package
(`SPARK_HOME` = the package folder, `sbin/start-connect-server.sh`), its log and PID file in a
temporary folder, stopped by that PID.

`spark-daemon.sh` detaches the server (nohup) and returns at once; the server is ready when
it logs that it started (about 60 s on a loaded two-core machine). Waiting on the log rather
than by connecting to the port: a client connecting to a local ephemeral port nothing listens
on yet may connect to itself and take the port from the server.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.spark_cluster import free_port, spark_home
from tests.support.spark_jvm import CONF

#: Generous: the JVM starts on a machine other tests load too. Not an assertion on speed.
START_DEADLINE_SECONDS = 300
STARTED = "Spark Connect server started at"
_CLIENT_MODULES = ("grpc", "grpc_status", "google.rpc", "pandas", "pyarrow", "zstandard")


@dataclass
class ConnectServer:
    folder: Path
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return "".join(
            path.read_text(errors="replace") for path in sorted(self.folder.glob("*.out"))
        )

    def record(self) -> dict[str, Any]:
        """What another process of the test run needs to reach it (`from_record`)."""
        return {"folder": str(self.folder), "port": self.port, "pid": self.pid}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ConnectServer:
        return cls(Path(record["folder"]), int(record["port"]), int(record["pid"]))


def unavailable_reason() -> str | None:
    """Why no server can run here (no Java, no Connect client packages), or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java to run a Spark Connect server (install a JDK 17+)"
    if not (spark_home() / "sbin" / "start-connect-server.sh").is_file():
        return "the installed pyspark has no sbin/start-connect-server.sh"
    missing = [name for name in _CLIENT_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return f'the Spark Connect client needs {", ".join(missing)}: pip install -e ".[connect]"'
    return None


def _env(folder: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(folder),
        "SPARK_PID_DIR": str(folder),
        "SPARK_IDENT_STRING": "dws-tests",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),  # UDF workers
    }
    # Not this process's Connect mode or remote: the server is a classic driver.
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_CONF_DIR"):
        env.pop(name, None)
    return env


def start_server(folder: Path) -> ConnectServer:
    """Start a server (local[2], UTC, as the classic test session) and wait until it serves."""
    return wait_until_serving(launch_server(folder))


def launch_server(folder: Path) -> ConnectServer:
    """Start a server and return at once: its JVM boots while the caller goes on (the test
    run launches it when collection finds Connect tests, so the boot overlaps other tests)."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    subprocess.run(
        [
            str(spark_home() / "sbin" / "start-connect-server.sh"),
            "--master",
            "local[2]",
            *("--conf", "spark.connect.grpc.binding.address=127.0.0.1"),
            *("--conf", f"spark.connect.grpc.binding.port={port}"),
            *("--conf", "spark.driver.host=127.0.0.1"),
            *("--conf", "spark.driver.bindAddress=127.0.0.1"),
            *("--conf", "spark.ui.enabled=false"),
            *("--conf", "spark.sql.shuffle.partitions=2"),
            *("--conf", "spark.default.parallelism=2"),
            *("--conf", "spark.sql.session.timeZone=UTC"),
            *(arg for key, value in CONF.items() for arg in ("--conf", f"{key}={value}")),
        ],
        env=_env(folder),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=120,
    )
    pid_files = list(folder.glob("*.pid"))
    if len(pid_files) != 1:
        raise RuntimeError(f"the Spark Connect server left no PID file in {folder}")
    return ConnectServer(folder, port, int(pid_files[0].read_text().strip()))


def wait_until_serving(server: ConnectServer) -> ConnectServer:
    """`server` once it serves; stopped, and an error with its log, if it never does."""
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if STARTED in server.log_text():
            with socket.create_connection(("127.0.0.1", server.port), timeout=10):
                return server
        if not _alive(server.pid):
            break
        time.sleep(0.5)
    stop_server(server)
    raise RuntimeError(
        f"the Spark Connect server did not start within {START_DEADLINE_SECONDS} s "
        f"(alive: {_alive(server.pid)}); its log:\n{server.log_text()[-4000:]}"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_server(server: ConnectServer, timeout: float = 30) -> None:
    """SIGTERM to the server's PID, SIGKILL if it is still there after `timeout` s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(server.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(server.pid):
                return
            time.sleep(0.2)
