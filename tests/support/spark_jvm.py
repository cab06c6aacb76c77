"""The JVM options of every Spark driver the test run starts: this process's session, the
Spark Connect server, and the drivers of child processes (the demo, Dagster run and replay
workers, the killed runs of the fault tests, ...).

The drivers of a test run live for seconds to minutes on small data, where the JIT's
optimizing compiler (C2) and the parallel collector's threads cost more CPU than they win
back: with the quick compiler only and the serial collector, a Spark test file takes about a
third less CPU on two cores, and the same Spark computes the same results. Child processes get
the options through `SPARK_CONF_DIR` (a `spark-defaults.conf` that holds nothing else), which
spark-submit reads whoever starts it; a developer's own `SPARK_CONF_DIR` is left alone.
"""

from __future__ import annotations

from pathlib import Path

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: Where the options go: the driver's JVM (local mode runs the executors in it) and the
#: executors' JVMs on a cluster.
CONF = {
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
}


def write_conf_dir(folder: Path) -> Path:
    """A Spark configuration folder holding `spark-defaults.conf` with `CONF` only."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{key} {value}\n" for key, value in CONF.items()]
    (folder / "spark-defaults.conf").write_text("".join(lines), encoding="utf-8")
    return folder
