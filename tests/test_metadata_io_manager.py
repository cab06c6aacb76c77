"""The Spark IO manager facing a corrupt workspace file: the step fails with the
`WorkspaceConfigError` naming the file (never a TypeError or KeyError from deep inside), writes
no data and no lineage, and once the file is repaired the same materialization succeeds with
every earlier record still there. Real Spark, a real Dagster instance."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import materialize

from dws_dagster import WorkspaceConfigError
from dws_dagster.workspace.config import Workspace

from .conftest import tree_state
from .pipeline import build_assets, io_manager, make_workspace
from .test_io_manager import root_cause, run

pytestmark = pytest.mark.spark

DAMAGE = {
    # A journal operation naming a list where a ref belongs.
    "journal": lambda data: data + b'{"op": "claim", "ref": ["inter"], "step": "x"}\n',
    # current.json whose ref state holds a number where a record belongs.
    "current": lambda data: data.replace(b'"record":{', b'"record":7,"x":{', 1),
    # resources.json whose resource lost its role.
    "resources": lambda data: data.replace(b'"role"', b'"rolle"', 1),
}


def _damaged_file(ws: Workspace, damage: str) -> Path:
    lineage = ws.meta_dir / "lineage"
    if damage == "current":
        ws.store.compact()
        return lineage / "current.json"
    if damage == "journal":
        return sorted((lineage / "journal").glob("*.jsonl"))[-1]
    return ws.meta_dir / "resources.json"


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_corrupt_workspace_file_fails_the_step_and_writes_nothing(
        spark, tmp_path: Path, instance, damage: str) -> None:
    ws = make_workspace(tmp_path / "ws")
    assets = build_assets()
    run(assets, ws, instance, selection=["trips", "zones", "enriched"])
    before_records = dict(Workspace.open(ws.root).store.items())
    path = _damaged_file(Workspace.open(ws.root), damage)
    original = path.read_bytes()
    damaged = DAMAGE[damage](original)
    assert damaged != original
    path.write_bytes(damaged)
    before = tree_state(ws.root)

    with pytest.raises(Exception) as caught:  # Dagster wraps what the IO manager raised
        materialize(assets, instance=instance, selection=["hourly"],
                    resources={"io_manager": io_manager(ws)})
    error = root_cause(caught.value)
    assert isinstance(error, WorkspaceConfigError), repr(error)
    assert str(path) in str(error)
    after = tree_state(ws.root)
    # Spark's staging and Dagster's own files aside, nothing under the workspace changed.
    assert {k: v for k, v in after.items() if not k.startswith("inter/hourly")} == \
        {k: v for k, v in before.items() if not k.startswith("inter/hourly")}
    assert not (ws.root / "inter/hourly").exists()

    path.write_bytes(original)  # the user repairs the file
    materialize(assets, instance=instance, selection=["hourly"],
                resources={"io_manager": io_manager(ws)})
    store = Workspace.open(ws.root).store
    for ref, state in before_records.items():
        assert store.get(ref) is not None and store.get(ref).record == state.record, ref
    assert store.get("intermediate-data/hourly").status == "ok"
