"""A Spark standalone cluster on 127.0.0.1 for the tests: one master and one worker started
from the pip `pyspark` distribution (`bin/spark-class`; it ships no usable `sbin/start-*.sh`),
each in its own process group, stopped together at the end.

Ports come from the OS (bind to port 0), so they never meet `tests/ol/ol_receiver.py`'s ports
below the ephemeral range. The worker is started only once the master listens: a client
connecting to a local ephemeral port nothing listens on yet may connect to itself.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The example's first day: its smallest workspace is two days of it.
EXAMPLE_START = dt.date(2024, 1, 25)


def spark_home() -> Path:
    """The installed `pyspark` package folder: it is a Spark distribution (bin/, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Daemon:
    """One Spark daemon (master or worker) and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, marker: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.text():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(
            f"Spark {self.name} did not log {marker!r} within {timeout:.0f} s "
            f"(exit code {self.process.poll()}); its log {self.log}:\n"
            f"{self.text()[-4000:]}"
        )

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM to the daemon's process group (the worker's executors with it), then
        SIGKILL to what is left."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # executors still in the group
        except ProcessLookupError:
            pass
        self.process.wait(timeout)


@dataclass
class SparkCluster:
    """A running master and worker: submit to `url`."""

    folder: Path
    port: int
    cores: int = 1
    memory: str = "1g"
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def work_dir(self) -> Path:
        """Where the worker runs executors: one `app-*/<executor id>/` folder per app."""
        return self.folder / "work"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.folder),
            "SPARK_WORKER_DIR": str(self.work_dir),
        }

    def _start(self, name: str, *args: str) -> Daemon:
        log = self.folder / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        daemon = Daemon(name, process, log)
        self.daemons.append(daemon)
        return daemon

    def start(self, timeout: float = 120) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(free_port()),
        )
        master.wait_for("I have been elected leader", timeout)
        worker = self._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(self.work_dir),
        )
        worker.wait_for("Successfully registered with master", timeout)

    def stop(self) -> None:
        errors = []
        for daemon in reversed(self.daemons):
            try:
                daemon.stop()
            except Exception as exc:  # stop the others all the same
                errors.append(f"{daemon.name}: {exc}")
        self.daemons.clear()
        if errors:
            raise RuntimeError("stopping the Spark cluster: " + "; ".join(errors))

    def executor_logs(self) -> list[Path]:
        """The stderr of every executor the worker ran."""
        return sorted(self.work_dir.glob("app-*/*/stderr"))

    def logs(self) -> str:
        return "\n".join(f"--- {d.name} ({d.log})\n{d.text()[-3000:]}" for d in self.daemons)


def start_cluster(folder: Path) -> SparkCluster:
    """A master and a one-core worker under `folder`; `SparkCluster.stop` ends them."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError(
            "no Java: Spark needs Java 17+ (apt-get install -y openjdk-17-jre-headless)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    cluster = SparkCluster(folder=folder, port=free_port())
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def cluster_spark_config(url: str) -> dict[str, str]:
    """The example's Spark settings with the cluster as master: one executor core, executors
    that fit the worker, and this interpreter for any Python workers."""
    from example_project.project import SPARK_CONFIG

    return {
        **SPARK_CONFIG,
        "spark.master": url,
        "spark.app.name": "dws-dagster-cluster-test",
        "spark.cores.max": "1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.pyspark.python": sys.executable,
    }


def run_example_steps(
    root: Path,
    dagster_home: Path,
    spark_config: dict[str, str],
    steps: list[tuple[str, str | None]],
) -> dict[str, Any]:
    """Set up the example workspace at `root` (two days of data, a few thousand trips) and
    run `steps` (job, partition) on a Dagster instance in `dagster_home` with `spark_config`;
    returns which Spark application ran them."""
    from dagster import DagsterInstance
    from pyspark.sql import SparkSession

    from example_project.project import Step, build_definitions, run_step
    from example_project.setup_workspace import ExampleSize

    size = ExampleSize(start=EXAMPLE_START, days=2, trips_per_month=2_000, zones=6)
    defs = build_definitions(root, size, spark_config=spark_config)
    dagster_home.mkdir(parents=True, exist_ok=True)
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    instance = DagsterInstance.from_config(str(dagster_home))
    try:
        for job, partition in steps:
            run_step(defs, instance, Step(job, partition))
    finally:
        instance.dispose()
    context = SparkSession.builder.getOrCreate().sparkContext
    return {
        "master": context.master,
        "app_id": context.applicationId,
        # The driver's block manager and each executor's.
        "block_managers": context._jsc.sc().getExecutorMemoryStatus().size(),
    }
