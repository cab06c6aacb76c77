"""The lineage sensor facing a corrupt workspace file: the tick fails with the
WorkspaceConfigError and its cursor stays, so once the file is repaired the same events are
applied — none is skipped for good. A real Dagster instance (temporary SQLite home); no Spark
run is needed: the event is a run cancelled before it started."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import Definitions, asset

from dws_dagster import WorkspaceConfigError, dws_ref, process_events
from dws_dagster.workspace.config import Workspace

from .conftest import tree_state
from .pipeline import make_workspace


def cancelled_before_running(instance) -> Definitions:
    """A run planning the asset `never` (intermediate-data/never), cancelled while queued."""

    @asset(metadata=dws_ref("intermediate-data", "never"))
    def never() -> int:
        return 1

    defs = Definitions(assets=[never])
    job = defs.resolve_implicit_global_asset_job_def()
    instance.report_run_canceled(instance.create_run_for_job(job_def=job))
    return defs


@pytest.mark.parametrize("damage", ["journal", "current", "index"])
def test_a_corrupt_workspace_file_fails_the_tick_and_keeps_its_cursor(
        tmp_path: Path, instance, damage: str) -> None:
    ws = make_workspace(tmp_path / "ws")
    ws.store.claim("other", ["intermediate-data/other"])
    if damage == "current":
        ws.store.compact()
    defs = cancelled_before_running(instance)
    lineage = ws.meta_dir / "lineage"
    path = {"journal": sorted((lineage / "journal").glob("*.jsonl"))[-1],
            "current": lineage / "current.json",
            "index": ws.meta_dir / "snapshots" / "index.json"}[damage]
    original = path.read_bytes() if path.exists() else None
    if damage == "journal":
        path.write_bytes(original + b'{"op": "forget", "ref": ["not", "a", "ref"]}\n')
    elif damage == "current":
        path.write_bytes(original.replace(b'"owner":"other"', b'"owner":7'))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"format": 1, "snapshots": [{"hash": "../../x"}]}')
    before = tree_state(ws.root)
    saved: list[int] = []

    def tick(workspace: Workspace):
        return process_events(instance, workspace, repository_def=defs.get_repository_def(),
                              openlineage=False, snapshot_on_results=damage == "index",
                              save_cursor=saved.append)

    if damage == "index":
        # The index is read only when a snapshot is due; a cancelled run has no results, so
        # the event applies: the tick must not fail for a file it did not need.
        outcome = tick(Workspace.open(ws.root))
        assert outcome.applied.failures == 1 and saved
        return
    with pytest.raises(WorkspaceConfigError) as caught:
        tick(Workspace.open(ws.root))
    assert str(path) in str(caught.value)
    assert saved == []  # the cursor did not move
    assert tree_state(ws.root) == before  # and nothing was written

    path.write_bytes(original)  # repaired: the same event is applied now
    outcome = tick(Workspace.open(ws.root))
    assert outcome.applied.failures == 1 and saved
    state = Workspace.open(ws.root).store.get("intermediate-data/never")
    assert state is not None and state.status == "failed"
    assert Workspace.open(ws.root).store.get("intermediate-data/other").owner == "other"


@pytest.mark.parametrize("raw", [
    None, "text", ["a"], {"r": "not a list"}, {"r": [["c"]]}, {"r": [[1, "int", True]]},
    {"r": [["c", {"nested": 1}, True]]},
])
def test_malformed_input_schemas_give_inputs_no_schema(raw):
    """`dws/input_schemas` is read from the event log: untrusted; bad entries are left out."""
    from dws_dagster.sensor_events import _input_schemas

    assert _input_schemas({"dws/input_schemas": raw}) == {}


def test_input_schemas_and_ref_root_are_read_back():
    from dagster import MetadataValue

    from dws_dagster.sensor_events import _input_schemas, _root_from_metadata

    metadata = {"dws/input_schemas": MetadataValue.json({"src/a": [["c", "int", False]]}),
                "dws/ref_root": MetadataValue.text("inter/hourly")}
    assert _input_schemas(metadata) == {"src/a": (("c", "int", False),)}
    assert str(_root_from_metadata(metadata)) == "inter/hourly"
    assert _root_from_metadata({"dws/ref_root": "../escape"}) is None
    assert _root_from_metadata({}) is None
