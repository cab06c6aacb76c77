"""The Spark IO manager facing a corrupt workspace file or store: the step fails with the
`WorkspaceConfigError` naming the file or the store (never a TypeError or KeyError from deep
inside), writes no data and no lineage, and once the damage is repaired the same
materialization succeeds with every earlier record still there. Real Spark, a real Dagster
instance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import materialize

from dws_dagster import WorkspaceConfigError
from dws_dagster.workspace.definition import Workspace
from tests.assets.test_io_manager import root_cause, run
from tests.support.pipeline import build_assets, io_manager, make_workspace
from tests.support.store_db import damage, db_dump, sql, workspace_state

pytestmark = pytest.mark.spark

ENRICHED = "intermediate-data/enriched"


def _wrong_shape(ws: Workspace) -> None:
    """The record of the step's input with a number where its inputs belong."""
    [(body,)] = sql(
        ws,
        "SELECT r.body FROM dws_refs s JOIN dws_records r ON r.id = s.record_id WHERE s.ref = :ref",
        ref=ENRICHED,
    )
    damage(
        ws,
        "UPDATE dws_records SET body = :body WHERE body = :old",
        body=json.dumps({**json.loads(body), "inputs": 7}),
        old=body,
    )


DAMAGE = {
    "record": _wrong_shape,
    # The input's writer is not a step name.
    "owner": lambda ws: damage(
        ws, "UPDATE dws_refs SET owner = x'07' WHERE ref = :ref", ref=ENRICHED
    ),
    # resources.json whose resource lost its role.
    "resources": lambda ws: (ws.meta_dir / "resources.json").write_bytes(
        (ws.meta_dir / "resources.json").read_bytes().replace(b'"role"', b'"rolle"', 1)
    ),
}


def _repair(ws: Workspace, rows: dict, resources: bytes) -> None:
    """Put back what was damaged, as restoring the store's rows from a backup would."""
    (ws.meta_dir / "resources.json").write_bytes(resources)
    for record_id, body in ((row[0], row[-1]) for row in rows["dws_records"]):
        sql(ws, "UPDATE dws_records SET body = :body WHERE id = :id", body=body, id=record_id)
    for row in rows["dws_refs"]:
        sql(ws, "UPDATE dws_refs SET owner = :owner WHERE ref = :ref", owner=row[2], ref=row[1])


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_corrupt_workspace_file_or_store_fails_the_step_and_writes_nothing(
    spark, tmp_path: Path, instance, damage: str
) -> None:
    ws = make_workspace(tmp_path / "ws")
    assets = build_assets()
    run(assets, ws, instance, selection=["trips", "zones", "enriched"])
    before_records = dict(Workspace.open(ws.root).store.items())
    rows = db_dump(ws)
    resources = (ws.meta_dir / "resources.json").read_bytes()
    DAMAGE[damage](Workspace.open(ws.root))
    before = workspace_state(ws)

    with pytest.raises(Exception) as caught:  # Dagster wraps what the IO manager raised
        materialize(
            assets,
            instance=instance,
            selection=["hourly"],
            resources={"io_manager": io_manager(ws)},
        )
    error = root_cause(caught.value)
    assert isinstance(error, WorkspaceConfigError), repr(error)
    named = (
        str(ws.meta_dir / "resources.json")
        if damage == "resources"
        else f"workspace store {ws.store.shown}"
    )
    assert named in str(error)
    after = workspace_state(ws)
    # Spark's staging and Dagster's own files aside, nothing under the workspace changed.
    assert {k: v for k, v in after[0].items() if not k.startswith("inter/hourly")} == {
        k: v for k, v in before[0].items() if not k.startswith("inter/hourly")
    }
    assert after[1] == before[1]  # nor in the store
    assert not (ws.root / "inter/hourly").exists()

    _repair(ws, rows, resources)
    materialize(
        assets, instance=instance, selection=["hourly"], resources={"io_manager": io_manager(ws)}
    )
    store = Workspace.open(ws.root).store
    for ref, state in before_records.items():
        assert store.get(ref) is not None and store.get(ref).record == state.record, ref
    assert store.get("intermediate-data/hourly").status == "ok"
