"""The example as a `dg` project (`[tool.dg]` in pyproject.toml, `example_project/defs/` with
`dws_dagster.WorkspaceComponent`) gives the same definitions as the Python
`build_definitions()`: assets with their refs, jobs, schedules, sensor, executor, checks and
resources. Loaded in this process by Dagster's loader for defs folders (what `dg check defs`
and `dg dev` load), on one small example workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dagster import Definitions

from dws_dagster import WorkspaceResource
from example_project.dg_definitions import defs as dg_defs
from example_project.project import SPARK_CONFIG, build_definitions
from example_project.setup_workspace import SMALL, ensure_workspace
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Definitions, Definitions]:
    root = tmp_path_factory.mktemp("example-dg") / "ws"
    ensure_workspace(root, SMALL)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DWS_EXAMPLE_WORKSPACE", str(root))
        patch.delenv("DWS_STORE_URL", raising=False)
        return build_definitions(root), dg_defs()


def _assets(defs: Definitions) -> dict[str, Any]:
    graph = defs.resolve_asset_graph()
    return {
        key.to_user_string(): (
            graph.get(key).metadata.get("dws/ref"),
            graph.get(key).group_name,
            graph.get(key).partitions_def,
            sorted(d.to_user_string() for d in graph.get(key).parent_keys),
        )
        for key in graph.get_all_asset_keys()
    }


def test_the_dg_project_gives_the_python_definitions(
    both: tuple[Definitions, Definitions],
) -> None:
    python, dg = both
    assert len(_assets(python)) > 5
    assert _assets(dg) == _assets(python)
    assert {j.name for j in dg.jobs or []} == {j.name for j in python.jobs or []}
    for job in python.jobs or []:
        assert dg.resolve_job_def(job.name).asset_layer.executable_asset_keys == (
            python.resolve_job_def(job.name).asset_layer.executable_asset_keys
        )
    assert {s.name for s in dg.schedules or []} == {s.name for s in python.schedules or []}
    assert [s.name for s in dg.sensors or []] == [s.name for s in python.sensors or []]
    assert dg.executor == python.executor
    assert {c.name for c in dg.asset_checks or []} == {c.name for c in python.asset_checks or []}
    assert (
        set(dg.resources or {})
        == set(python.resources or {})
        == {
            "workspace",
            "pyspark",
            "io_manager",
        }
    )
    assert dg.resources["pyspark"].spark_config == python.resources["pyspark"].spark_config
    assert dict(python.resources["pyspark"].spark_config) == SPARK_CONFIG
    workspace = dg.resources["workspace"]
    assert isinstance(workspace, WorkspaceResource)
    assert Path(workspace.root).resolve() == Path(python.resources["workspace"].root).resolve()
    assert workspace.search_parents is False
    assert dg.resources["io_manager"].keep_versions == 3


def test_pyproject_names_the_dg_project() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["dg"]
    assert config["directory_type"] == "project"
    assert config["project"]["root_module"] == "example_project"
    assert config["project"]["code_location_target_module"] == "example_project.dg_definitions"
