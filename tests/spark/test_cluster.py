"""The example on a Spark standalone cluster (a master and a worker on 127.0.0.1, from the pip
`pyspark` distribution) gives the same versions and lineage as in local mode.

The cluster run is a separate Python process (a driver with `spark.master=spark://...`;
executors in the worker's JVMs); the local run uses the suite's local session. The workspace
is on this machine's disk, which the executors reach: on a real cluster it would be an object
store or a shared filesystem (see the README's deployment guide).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance

from dws_dagster import Workspace, process_events
from example_project.project import SPARK_CONFIG, TAXI_JOB, WEATHER_JOB, build_definitions
from tests.conftest import run_python
from tests.support.lineage_compare import lineage_view, versions
from tests.support.spark_cluster import (
    EXAMPLE_START,
    SparkCluster,
    run_example_steps,
    start_cluster,
)

pytestmark = [pytest.mark.slow]

STEPS: list[tuple[str, str | None]] = [
    (TAXI_JOB, "2024-01-01"),
    (WEATHER_JOB, EXAMPLE_START.isoformat()),
]
REFS = {
    f"intermediate-data/{name}/2024-01"
    for name in ("yellow_taxi_staging", "yellow_taxi_raw", "yellow_rides_hourly_actuals")
} | {
    f"intermediate-data/{name}/{EXAMPLE_START.isoformat()}"
    for name in ("weather_staging", "weather_raw")
}

CLUSTER_RUN = """
import json, sys
from pathlib import Path
from tests.support.spark_cluster import cluster_spark_config, run_example_steps
steps = [tuple(step) for step in json.loads(sys.argv[3])]
info = run_example_steps(Path(sys.argv[1]), Path(sys.argv[2]), cluster_spark_config(sys.argv[4]),
                         steps)
print("DWS-CLUSTER-RUN " + json.dumps(info))
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[SparkCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


def _sensor_view(root: Path, home: Path) -> dict:
    """The lineage sensor's work on the run's instance (OpenLineage to the workspace's file),
    then what the comparison looks at."""
    ws = Workspace.open(root)
    instance = DagsterInstance.from_config(str(home))
    try:
        defs = build_definitions(root)
        outcome = process_events(instance, ws, repository_def=defs.get_repository_def())
        assert not outcome.applied.skipped and outcome.pending == 0
        return lineage_view(ws, instance)
    finally:
        instance.dispose()


@pytest.mark.spark
def test_the_example_on_a_cluster_has_the_versions_and_lineage_of_local_mode(
    spark, cluster, tmp_path, monkeypatch
):
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    # Same folder name on both sides: it is the workspace's name, the OpenLineage namespace.
    local_root, cluster_root = tmp_path / "local" / "example", tmp_path / "cluster" / "example"

    local = run_example_steps(local_root, tmp_path / "local" / "dagster_home", SPARK_CONFIG, STEPS)
    assert local["master"].startswith("local")

    result = run_python(
        CLUSTER_RUN,
        tmp_path,
        str(cluster_root),
        str(tmp_path / "cluster" / "dagster_home"),
        json.dumps(STEPS),
        cluster.url,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:] + cluster.logs()
    [line] = [line for line in result.stdout.splitlines() if line.startswith("DWS-CLUSTER-RUN ")]
    remote = json.loads(line.split(" ", 1)[1])
    # The driver ran on the cluster and an executor in the worker did the work.
    assert remote["master"] == cluster.url
    assert remote["block_managers"] == 2  # the driver's and one executor's
    logs = [p for p in cluster.executor_logs() if p.parts[-3] == remote["app_id"]]
    assert logs, f"no executor of {remote['app_id']} under {cluster.work_dir}"
    assert any("Finished task" in p.read_text(errors="replace") for p in logs)

    cluster_view = _sensor_view(cluster_root, tmp_path / "cluster" / "dagster_home")
    local_view = _sensor_view(local_root, tmp_path / "local" / "dagster_home")
    assert set(versions(local_view)) >= REFS
    assert all(versions(local_view)[ref] for ref in REFS)
    assert versions(cluster_view) == versions(local_view)
    assert cluster_view["refs"] == local_view["refs"]
    assert cluster_view["journal"] == local_view["journal"]
    assert cluster_view["openlineage"] == local_view["openlineage"]
    complete = [e for e in cluster_view["openlineage"] if e["eventType"] == "COMPLETE"]
    assert any("columnLineage" in d.get("facets", {}) for e in complete for d in e["outputs"])
