"""The replays a workspace keeps (`workspace.snapshots.replay_record`): read back as untrusted
input, the newest of a snapshot drawn, a damaged one named with what to do, never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.replay.record import latest_replay, replays_dir, save_replay
from dws_dagster.snapshots.index import resolve_snapshot
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace.definition import Workspace
from tests.conftest import run_step, write
from tests.views.lineage_page_graphs import replay_document, verdict

VERSION = "0" * 32


def _document(snapshot: str, at: str, **changes: Any) -> dict[str, Any]:
    judged = verdict("results/out", "train", "reproduced", VERSION, VERSION)
    document = replay_document(judged, snapshot=snapshot, into="/somewhere/else", replayed_at=at)
    document.update(changes)
    return document


@pytest.fixture
def snapshotted(ws: Workspace) -> tuple[Workspace, str]:
    write(ws.root / "data/src/a.csv", "a\n1\n")
    run_step(ws, "train", inputs=["src/a.csv"], outputs={"results/out": "x\n"})
    take_snapshot(ws, "v1")
    return ws, resolve_snapshot(ws, "v1").hash


def test_the_newest_replay_of_the_snapshot_is_read_back(snapshotted) -> None:
    ws, snapshot = snapshotted
    assert latest_replay(ws, snapshot) is None  # never replayed
    save_replay(ws, _document(snapshot, "2026-11-25T01:00:00+00:00"), "v1-a")
    save_replay(ws, _document(snapshot, "2026-11-25T03:00:00+00:00", reproduced=False), "v1-b")
    save_replay(ws, _document("f" * 32, "2026-11-26T00:00:00+00:00"), "other")
    found = latest_replay(ws, snapshot)
    assert found is not None and found["replayed_at"].startswith("2026-11-25T03")
    assert found["reproduced"] is False


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (b"{not json", "is not valid JSON"),
        (b"[]", "replay record"),
        (json.dumps({"format": 2}).encode(), "format"),
        (None, "refs[0].verdict"),  # a verdict no replay gives
        ("version", "refs[0].recorded"),  # a version that is a path
        ("ref", "refs[0].ref"),
    ],
)
def test_a_damaged_record_is_named_with_what_to_do(
    snapshotted, cli, damage: Any, named: str
) -> None:
    ws, snapshot = snapshotted
    document = _document(snapshot, "2026-11-25T01:00:00+00:00")
    path = replays_dir(ws) / "v1-x.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(damage, bytes):
        path.write_bytes(damage)
    else:
        entry = document["refs"][0]
        if damage is None:
            entry["verdict"] = "probably fine"
        elif damage == "version":
            entry["recorded"] = "../../../etc/passwd"
        else:
            entry["ref"] = "results/../../outside"
        path.write_text(json.dumps(document))
    with pytest.raises(WorkspaceConfigError) as raised:
        latest_replay(ws, snapshot)
    assert str(path) in str(raised.value) and named in str(raised.value)
    assert "delete that file (it only records a past replay)" in str(raised.value)
    code, out, err = cli("lineage", "results/out", "--snapshot", "v1", "--format", "html",
                         "-w", ws.root)  # fmt: skip
    assert code == 1 and out == "" and "Traceback" not in err
    assert str(path) in err


def test_a_record_that_is_a_link_is_not_followed(snapshotted, tmp_path: Path) -> None:
    ws, snapshot = snapshotted
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(_document(snapshot, "2026-11-25T01:00:00+00:00")))
    folder = replays_dir(ws)
    folder.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, folder / "v1-link.json")
    assert latest_replay(ws, snapshot) is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=st.sampled_from(["format", "snapshot", "replayed_at", "reproduced", "refs", "into"]),
       value=_json)  # fmt: skip
def test_any_value_in_any_field_is_read_or_refused_cleanly(snapshotted, key: str, value) -> None:
    ws, snapshot = snapshotted
    document = _document(snapshot, "2026-11-25T01:00:00+00:00")
    document[key] = value
    path = replays_dir(ws) / "v1-fuzz.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    try:
        found = latest_replay(ws, snapshot)
    except WorkspaceConfigError as exc:
        refused = str(exc)
    else:
        assert found is None or found[key] == value
        return
    assert (str(path) in refused and "delete that file" in refused) or "not valid JSON" in refused
