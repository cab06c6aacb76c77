"""`dws_dagster.WorkspaceComponent` in a project made by `create-dagster project`, as a user
drives it: the entry point `dg list components` reads, `dg scaffold defs`, `dg check defs`,
`dg list defs`, a materialization through `dagster asset materialize` (its own process, one
Spark JVM), the lineage sensor's work on it, and `defs.yaml` mistakes refused when the
definitions load.

Each real command runs once: the scaffold once per session (the `dg_scaffolded` fixture,
copied here), `dg check defs`, `dg list defs` and the materialization once for the module.
The refusals load the project's definitions in this process with each bad `defs.yaml` in
turn (`load_from_defs_folder`: the loader `dg check defs` and the code server use), so a
refusal costs no new interpreter.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import Component, DagsterInstance, build_sensor_context

from dws_dagster import ComponentConfigError, DwsError, Workspace
from dws_dagster.ol.job_names import asset_job_name
from tests.support.dg_project import DgProject, load_definitions, make_project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, dg_scaffolded: Path) -> DgProject:
    return make_project(tmp_path_factory.mktemp("dg"), dg_scaffolded)


@pytest.fixture(scope="module")
def materialized(project: DgProject) -> str:
    return project.materialize()


def test_the_component_is_registered_and_scaffolds_a_defs_yaml(project: DgProject) -> None:
    # `dg list components` lists the Component subclasses of the modules registered under
    # this entry point group (dagster.components.core.package_entry reads it so).
    (entry,) = [
        e
        for e in importlib.metadata.entry_points(group="dagster_dg_cli.registry_modules")
        if e.name == "dws_dagster"
    ]
    module = entry.load()
    assert issubclass(module.WorkspaceComponent, Component)
    assert module.WorkspaceComponent.__module__.startswith("dws_dagster.")
    text = project.defs_yaml.read_text("utf-8")
    assert text.startswith("type: dws_dagster.WorkspaceComponent\n")
    # Dagster's templates for the environment; the store URL by the variable's name.
    assert 'store_url: "{{ env.DWS_STORE_URL }}"' in text
    assert "root: \"{{ env('DWS_WORKSPACE', '.') }}\"" in text
    for section in ("io_manager:", "keep_versions: 3", "pyspark:", "sensor:", "checks:"):
        assert section in text


def test_dg_check_and_list_defs(project: DgProject) -> None:
    checked = project.ok(["dg", "check", "defs"])
    assert "All definitions loaded successfully" in checked
    listed = json.loads(project.ok(["dg", "list", "defs", "--json"], stdout_only=True))
    assert {a["asset_key"] for a in listed["assets"]} == {"trips", "zones"}
    assert {c["key"] for c in listed["asset_checks"]} == {
        f"{asset}:{check}"
        for asset in ("trips", "zones")
        for check in ("dws_data_version", "dws_inputs_consistent", "dws_reproduced")
    }
    assert [s["name"] for s in listed["sensors"]] == ["dws_lineage_sensor"]
    assert {r["name"] for r in listed["resources"]} == {"workspace", "pyspark", "io_manager"}


def test_materialize_stores_bound_assets_with_lineage_and_checks(
    project: DgProject, materialized: str
) -> None:
    # The YAML bindings: `trips` by key, `zones` by selection at its key path below the ref.
    ws = Workspace.open(project.workspace)
    trips, zones = ws.store.get("intermediate/trips"), ws.store.get("intermediate/agg/zones")
    assert trips is not None and trips.owner == "trips" and trips.version
    assert zones is not None and zones.owner == "zones"
    assert zones.record is not None
    assert zones.record["inputs"] == [{"ref": "intermediate/trips", "version": trips.version}]
    assert (project.workspace / "data/intermediate/agg/zones/_dws_version.json").is_file()
    # The checks ran with the assets and passed.
    for asset in ("trips", "zones"):
        for check in ("dws_data_version", "dws_inputs_consistent"):
            assert f"Asset check '{check}' on '{asset}' passed" in materialized


def test_the_components_sensor_records_lineage_and_openlineage(
    project: DgProject, materialized: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in project.env.items():
        if name.startswith(("DWS_", "DAGSTER_")):
            monkeypatch.setenv(name, value)
    for name in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    defs = load_definitions(project)
    sensor = defs.get_sensor_def("dws_lineage_sensor")  # type: ignore[attr-defined]
    with DagsterInstance.from_config(str(project.home)) as instance:
        context = build_sensor_context(
            instance=instance,
            repository_def=defs.get_repository_def(),  # type: ignore[attr-defined]
            resources={"workspace": defs.resources["workspace"]},  # type: ignore[attr-defined]
        )
        result = sensor(context)
    assert "Applied" in result.skip_reason.skip_message, result.skip_reason
    ws = Workspace.open(project.workspace)
    zones = ws.store.get("intermediate/agg/zones")
    assert zones is not None and zones.record is not None
    # The sensor knew the asset's ref from the YAML binding: the checks' verdicts joined it.
    checks = zones.record.get("extra", {}).get("checks", {})
    assert checks["dws_data_version"]["passed"] is True
    events = [
        json.loads(line)
        for line in (ws.meta_dir / "openlineage" / "events.jsonl").read_text().splitlines()
    ]
    complete = [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == asset_job_name("zones")
    ]
    assert complete, [e["job"]["name"] for e in events]
    inputs = [d["name"] for d in complete[-1]["inputs"]]
    assert len(inputs) == 1 and inputs[0].endswith("intermediate/trips"), inputs


# ---------------------------------------------------------------------------- refusals


@contextlib.contextmanager
def defs_yaml_as(project: DgProject, old: str, new: str) -> Iterator[Path]:
    path = project.defs_yaml
    original = path.read_text("utf-8")
    assert old in original, old
    path.write_text(original.replace(old, new, 1), "utf-8")
    try:
        yield path
    finally:
        path.write_text(original, "utf-8")


def _refusal(project: DgProject) -> ComponentConfigError:
    with pytest.raises(Exception) as caught:  # Dagster wraps a component's error in its own
        load_definitions(project)
    error: BaseException | None = caught.value
    while error is not None and not isinstance(error, DwsError):
        error = error.__cause__ or error.__context__
    assert isinstance(error, ComponentConfigError), caught.value
    return error


BAD_YAML = [
    pytest.param(
        "  io_manager:\n    format: parquet\n",
        "  io_manager:\n    formt: parquet\n",
        "attributes.io_manager.formt: unknown key",
        id="unknown-key",
    ),
    pytest.param(
        "  sensor:\n",
        "  lineage_sensor: {}\n  sensor:\n",
        "attributes.lineage_sensor: unknown key",
        id="unknown-section",
    ),
    pytest.param(
        "      ref: intermediate/trips\n",
        "      ref: intermediate/../../etc\n",
        "attributes.assets[0].ref:",
        id="ref-leaves-its-resource",
    ),
    pytest.param(
        'store_url: "{{ env.DWS_STORE_URL }}"',
        'store_url: "postgresql://dws:hunter2@db.example/lineage"',
        "attributes.workspace.store_url: the URL holds a password",
        id="password-in-store-url",
    ),
    pytest.param(
        "      spark.sql.session.timeZone: UTC\n",
        "      spark.sql.session.timeZone: UTC\n      spark.hadoop.fs.s3a.secret.key: abc\n",
        "attributes.pyspark.spark_config.spark.hadoop.fs.s3a.secret.key: a credential",
        id="secret-in-spark-config",
    ),
    pytest.param(
        "      spark.sql.session.timeZone: UTC\n",
        '      spark.sql.session.timeZone: UTC\n      spark.hadoop.fs.s3a.secret.key: "{{ '
        'env.AWS_SECRET }}"\n',
        "attributes.pyspark.spark_config.spark.hadoop.fs.s3a.secret.key: a credential",
        id="secret-from-environment-in-spark-config",
    ),
    pytest.param(
        "    - key: trips\n",
        "    - key: trip\n",
        "attributes.assets[0].key: the project defines no asset 'trip'",
        id="unknown-asset-key",
    ),
    pytest.param(
        '    - select: "key:zones"\n',
        '    - select: "group:nothing_here"\n',
        "attributes.assets[1].select: 'group:nothing_here' selects no asset",
        id="empty-selection",
    ),
    pytest.param(
        '    - select: "key:zones"\n',
        '    - select: "group:taxi"\n',
        "asset 'trips' is bound already, by attributes.assets[0]",
        id="asset-bound-twice",
    ),
    pytest.param(
        "    severity: warning\n",
        "    severity: fatal\n",
        "attributes.checks.severity: 'fatal' is not one of blocking, warning",
        id="unknown-severity",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), BAD_YAML)
def test_bad_defs_yaml_is_refused_naming_the_file_and_key(
    project: DgProject, monkeypatch: pytest.MonkeyPatch, old: str, new: str, expected: str
) -> None:
    monkeypatch.setenv("DWS_WORKSPACE", str(project.workspace))
    with defs_yaml_as(project, old, new) as path:
        error = _refusal(project)
    assert str(path) in str(error)
    assert expected in str(error)
    assert "hunter2" not in str(error)
