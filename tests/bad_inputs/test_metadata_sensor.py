"""The lineage sensor facing a corrupt workspace store: the tick fails with the
WorkspaceConfigError and its cursor stays, so once the store is repaired the same events are
applied — none is skipped for good. A real Dagster instance (temporary SQLite home); no Spark
run is needed: the event is a run cancelled before it started."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import Definitions, asset

from dws_dagster import WorkspaceConfigError, dws_ref, process_events
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import LineageRecord, StepInfo
from tests.support.pipeline import make_workspace
from tests.support.store_db import db_dump, sql, workspace_state


def cancelled_before_running(instance) -> Definitions:
    """A run planning the asset `never` (intermediate-data/never), cancelled while queued."""

    @asset(metadata=dws_ref("intermediate-data", "never"))
    def never() -> int:
        return 1

    defs = Definitions(assets=[never])
    job = defs.resolve_implicit_global_asset_job_def()
    instance.report_run_canceled(instance.create_run_for_job(job_def=job))
    return defs


DAMAGE = {
    # The record of the ref the event is about is not JSON any more.
    "record": "UPDATE dws_records SET body = '{\"ref\": ' WHERE ref = 'intermediate-data/never'",
    # Its writer is not a step name.
    "owner": "UPDATE dws_refs SET owner = x'07' WHERE ref = 'intermediate-data/never'",
    # A snapshot index entry whose hash is a path.
    "index": "INSERT INTO dws_snapshots (workspace_id, hash, position, message, created, "
    "results) VALUES (:ws, '../../x', 1, '', '', '[]')",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_corrupt_workspace_store_fails_the_tick_and_keeps_its_cursor(
    tmp_path: Path, instance, damage: str
) -> None:
    ws = make_workspace(tmp_path / "ws")
    ws.store.claim("other", ["intermediate-data/other"])
    ws.store.commit(
        [
            LineageRecord(  # a good record, older than the cancelled run
                ref="intermediate-data/never",
                version="v0",
                step=StepInfo(name="never"),
                start_time="2020-01-01T00:00:00+00:00",
                end_time="2020-01-01T00:00:01+00:00",
            )
        ]
    )
    defs = cancelled_before_running(instance)
    original = db_dump(ws)
    sql(ws, DAMAGE[damage])
    before = workspace_state(ws)
    saved: list[int] = []

    def tick(workspace: Workspace):
        return process_events(
            instance,
            workspace,
            repository_def=defs.get_repository_def(),
            openlineage=False,
            snapshot_on_results=damage == "index",
            save_cursor=saved.append,
        )

    if damage == "index":
        # The index is read only when a snapshot is due; a cancelled run has no results, so
        # the event applies: the tick must not fail for a table it did not need.
        outcome = tick(Workspace.open(ws.root))
        assert outcome.applied.failures == 1 and saved
        return
    with pytest.raises(WorkspaceConfigError) as caught:
        tick(Workspace.open(ws.root))
    assert f"workspace store {ws.store.shown}" in str(caught.value)
    assert "intermediate-data/never" in str(caught.value)
    assert saved == []  # the cursor did not move
    assert workspace_state(ws) == before  # and nothing was written

    # Repaired (from a backup): the same event is applied now.
    [(body,)] = [row[-1:] for row in original["dws_records"] if row[2] == "intermediate-data/never"]
    sql(ws, "UPDATE dws_records SET body = :body WHERE ref = 'intermediate-data/never'", body=body)
    sql(ws, "UPDATE dws_refs SET owner = 'never' WHERE ref = 'intermediate-data/never'")
    outcome = tick(Workspace.open(ws.root))
    assert outcome.applied.failures == 1 and saved
    state = Workspace.open(ws.root).store.get("intermediate-data/never")
    assert state is not None and state.status == "failed" and state.version == "v0"
    assert Workspace.open(ws.root).store.get("intermediate-data/other").owner == "other"


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "text",
        ["a"],
        {"r": "not a list"},
        {"r": [["c"]]},
        {"r": [[1, "int", True]]},
        {"r": [["c", {"nested": 1}, True]]},
    ],
)
def test_malformed_input_schemas_give_inputs_no_schema(raw):
    """`dws/input_schemas` is read from the event log: untrusted; bad entries are left out."""
    from dws_dagster.sensor.catalog_events.datasets import input_schemas

    assert input_schemas({"dws/input_schemas": raw}) == {}


def test_input_schemas_and_ref_root_are_read_back():
    from dagster import MetadataValue

    from dws_dagster.sensor.catalog_events.datasets import input_schemas, root_from_metadata

    metadata = {
        "dws/input_schemas": MetadataValue.json({"src/a": [["c", "int", False]]}),
        "dws/ref_root": MetadataValue.text("inter/hourly"),
    }
    assert input_schemas(metadata) == {"src/a": (("c", "int", False),)}
    assert str(root_from_metadata(metadata)) == "inter/hourly"
    assert root_from_metadata({"dws/ref_root": "../escape"}) is None
    assert root_from_metadata({}) is None
