"""A `dg` project for the component tests, made as a user makes one: `create-dagster project`
(offline: `--no-uv-sync`, and `DAGSTER_DG_UPDATE_CHECK_ENABLED=0`, which skips create-dagster's
look for a newer release on PyPI) and `dg scaffold defs dws_dagster.WorkspaceComponent lineage`,
once per test session; each module copies that project, binds its assets, adds a Data
Workspace and one Spark asset file in plain Python.

The project runs on this interpreter's environment, where dws_dagster is installed: `dg` and
`create-dagster` come first on PATH, `dg` uses the active environment when the project has no
`.venv` of its own, and `PYTHONPATH=src` lets `dg list defs` and `dagster` import the project
without installing it (`dg check defs` finds `src` by itself). Telemetry is off
(`DAGSTER_HOME/dagster.yaml`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
NAME = "dws_dg_demo"

#: Two assets: `trips` made by Spark, and `zones` read from it (the IO manager loads it).
ASSETS_PY = """\
from dagster import asset
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame


@asset(group_name="taxi")
def trips(pyspark: PySparkResource) -> DataFrame:
    spark = pyspark.spark_session
    return spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], ["id", "zone"])


@asset(group_name="taxi")
def zones(trips: DataFrame) -> DataFrame:
    return trips.groupBy("zone").count()
"""

#: What replaces the scaffolded `assets: []`: one asset by key, one by selection.
BINDINGS = """\
  assets:
    - key: trips
      ref: intermediate/trips
    - select: "key:zones"
      ref: intermediate/agg
"""

IN_PROCESS = '{"execution": {"config": {"in_process": {}}}}'


@dataclass
class DgProject:
    """A scaffolded project in `root`, its workspace in `workspace`, its Dagster home."""

    root: Path
    workspace: Path
    home: Path
    env: dict[str, str] = field(repr=False)

    @property
    def defs_yaml(self) -> Path:
        return self.root / "src" / NAME / "defs" / "lineage" / "defs.yaml"

    def run(
        self, args: Sequence[str], *, timeout: float = 300, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A command in the project folder, with the project's environment."""
        return subprocess.run(
            [str(BIN / args[0]) if (BIN / args[0]).exists() else args[0], *args[1:]],
            cwd=self.root,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, args: Sequence[str], *, stdout_only: bool = False, timeout: float = 300) -> str:
        """What a command that must succeed printed (stdout and stderr, or stdout only)."""
        done = self.run(args, timeout=timeout)
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
        return done.stdout if stdout_only else done.stdout + done.stderr

    def materialize(self, selection: str = "*") -> str:
        """`dagster asset materialize` in one process (one Spark JVM, not one per step)."""
        return self.ok(
            [
                "dagster",
                "asset",
                "materialize",
                "-m",
                f"{NAME}.definitions",
                "-d",
                "src",
                "--select",
                selection,
                "--config-json",
                IN_PROCESS,
            ]
        )


def project_env(base: Path) -> dict[str, str]:
    """The environment of commands in the project made in `base` (`make_project`)."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
        "DAGSTER_HOME": str(base / "dagster_home"),
        "DAGSTER_DG_UPDATE_CHECK_ENABLED": "0",
        "DWS_WORKSPACE": str(base / "ws"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(base / NAME / "src"),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DWS_STORE_URL", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def _dagster_home(base: Path) -> Path:
    home = base / "dagster_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", "utf-8")
    return home


def scaffold_project(base: Path) -> Path:
    """`create-dagster project` and `dg scaffold defs dws_dagster.WorkspaceComponent lineage`,
    the real commands, in `base`: the project's folder, as the scaffold left it. Made once per
    test session (the `dg_scaffolded` fixture); each test module copies it (`make_project`)."""
    _dagster_home(base)
    env = project_env(base)
    created = subprocess.run(
        [str(BIN / "create-dagster"), "project", NAME, "--no-uv-sync"],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert created.returncode == 0, (created.stdout, created.stderr)
    project = DgProject(base / NAME, base / "ws", base / "dagster_home", env)
    project.ok(["dg", "scaffold", "defs", "dws_dagster.WorkspaceComponent", "lineage"])
    return project.root


def make_project(base: Path, scaffolded: Path, *, bindings: str = BINDINGS) -> DgProject:
    """A copy in `base` of the project `scaffold_project` made, with the assets bound and a
    workspace with two resources (what `dws-dagster init` and `add` make; their commands are
    tested in test_cli*)."""
    from dws_dagster import Workspace

    home = _dagster_home(base)
    env = project_env(base)
    project = DgProject(base / NAME, base / "ws", home, env)
    shutil.copytree(scaffolded, project.root)
    text = project.defs_yaml.read_text("utf-8")
    assert "  assets: []\n" in text, text
    project.defs_yaml.write_text(text.replace("  assets: []\n", bindings), "utf-8")
    (project.root / "src" / NAME / "defs" / "trips.py").write_text(ASSETS_PY, "utf-8")
    workspace = Workspace.init(project.workspace)
    workspace.add_resource("intermediate", "intermediate-data", path="data/intermediate")
    workspace.add_resource("results", "results", path="results")
    return project


def load_definitions(project: DgProject) -> Any:
    """The project's definitions, loaded in this process by Dagster's own loader (with the
    environment this process has: the caller sets `DWS_WORKSPACE`)."""
    from dagster import load_from_defs_folder

    src = str(project.root / "src")
    sys.path.insert(0, src)
    try:
        return load_from_defs_folder(path_within_project=project.root / "src" / NAME)
    finally:
        sys.path.remove(src)
        for name in [m for m in sys.modules if m == NAME or m.startswith(NAME + ".")]:
            del sys.modules[name]
