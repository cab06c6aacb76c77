"""A snapshot's metrics and archive when the results step wrote `results.json` itself, as code
ported from Data Workspaces does, rather than through `write_results`. Real workspaces, real
snapshots on the SQLite store (the metrics are read from files, not from the store)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.snapshots.results_metrics import (
    MAX_RESULTS_FILE_BYTES,
    user_results_metrics,
)
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace.records import REDACTED
from tests.conftest import write
from tests.support.store_db import on_store

RESULTS = "results/exp"


@pytest.fixture(params=["sqlite"])
def ws(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    yield from on_store(request, tmp_path, monkeypatch)


def results_step(
    ws: Workspace, files: dict[str, bytes | str | Path], *, metrics: dict[str, Any] | None = None
) -> None:
    """A Data Workspaces-style results step whose code writes its own files (`results.json`
    among them; a Path is linked to), recording its metrics through the lineage only when
    `metrics` is given."""
    write(ws.root / "data/src/trips.csv", "a,b\n1,2\n")
    folder = ws.local_path(RESULTS)
    with (
        LineageBuilder()
        .with_step_name("evaluate")
        .with_parameters({"gamma": 0.1})
        .with_workspace_directory(ws.root)
        .with_input_refs(["src/trips.csv"])
        .as_results_step(folder)
        .eval() as lineage
    ):
        for name, content in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                os.symlink(content, path)
            else:
                path.write_bytes(content if isinstance(content, bytes) else content.encode())
        if metrics is not None:
            lineage.write_results(metrics)


def dws_results_json(metrics: Any) -> str:
    """`results.json` in the layout Data Workspaces' `write_results` gives it."""
    return json.dumps(
        {
            "step": "evaluate",
            "start_time": "2026-01-01T00:00:00",
            "execution_time_seconds": 1.5,
            "parameters": {"gamma": 0.1},
            "run_description": None,
            "metrics": metrics,
        }
    )


def test_metrics_of_a_results_json_the_code_wrote_and_every_file_archived(ws) -> None:
    results_step(
        ws,
        {
            "results.json": dws_results_json({"accuracy": 0.93, "f1": 0.9}),
            "report.csv": "class,precision\na,0.9\n",
            "plots/roc.txt": "0,0\n1,1\n",
        },
    )
    outcome = take_snapshot(ws, "v1")
    assert outcome.created and outcome.warnings == []
    assert outcome.info.metrics == {"accuracy": 0.93, "f1": 0.9}
    archived = ws.resource_root("results") / "snapshots" / "v1" / "exp"
    found = sorted(str(p.relative_to(archived)) for p in archived.rglob("*") if p.is_file())
    assert found == ["lineage.json", "plots/roc.txt", "report.csv", "results.json"]
    source = ws.local_path(RESULTS)
    for name in ("plots/roc.txt", "report.csv", "results.json"):
        assert (archived / name).read_bytes() == (source / name).read_bytes()


def test_a_flat_results_json_gives_its_top_level_scalars(ws) -> None:
    results_step(
        ws,
        {
            "results.json": json.dumps(
                {
                    "accuracy": 0.5,
                    "model": "forest",
                    "converged": True,
                    "runs": 3,
                    "confusion": [[1, 2], [3, 4]],
                    "step": "evaluate",
                    "execution_time_seconds": 2.0,
                    "api_token": "s3cret-value",
                }
            )
        },
    )
    outcome = take_snapshot(ws)
    assert outcome.warnings == []
    assert outcome.info.metrics == {
        "accuracy": 0.5,
        "model": "forest",
        "converged": True,
        "runs": 3,
        "api_token": REDACTED,
    }
    assert "s3cret-value" not in json.dumps(outcome.info.to_json())


def test_metrics_recorded_through_the_lineage_come_first(ws) -> None:
    results_step(ws, {}, metrics={"mae": 1.5})
    assert take_snapshot(ws).info.metrics == {"mae": 1.5}


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (b"{not json", "is not valid JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (json.dumps({"metrics": [1, 2]}).encode(), "'metrics' in"),
        (json.dumps({"metrics": {"": 1}}).encode(), "metric names must be non-empty"),
        (b" " * (MAX_RESULTS_FILE_BYTES + 1), "more than a metrics file holds"),
    ],
)
def test_a_results_json_that_is_not_metrics_is_named_and_the_snapshot_goes_on(
    ws, content: bytes, named: str
) -> None:
    results_step(ws, {"results.json": content})
    outcome = take_snapshot(ws, "v1")
    assert outcome.created and outcome.info.metrics is None
    [warning] = outcome.warnings
    assert RESULTS in warning and str(ws.local_path(RESULTS) / "results.json") in warning
    assert named in warning and "metrics are not shown" in warning


def test_a_results_json_linked_out_of_the_workspace_is_not_read(ws, tmp_path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"metrics": {"stolen": "outside-content"}}))
    results_step(ws, {"report.csv": "x\n1\n", "results.json": outside})
    outcome = take_snapshot(ws, "v1")
    assert outcome.info.metrics is None
    [warning] = outcome.warnings
    assert "symbolic link" in warning and RESULTS in warning
    assert "outside-content" not in json.dumps(outcome.info.to_json())


def test_no_results_json_no_metrics_no_warning(ws) -> None:
    results_step(ws, {"report.csv": "x\n1\n"})
    outcome = take_snapshot(ws)
    assert outcome.info.metrics is None and outcome.warnings == []


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    content=st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=10), inner, max_size=4)
            ),
            max_leaves=20,
        ).map(lambda value: json.dumps(value).encode()),
    )
)
def test_any_results_json_gives_metrics_or_a_named_warning(ws, content: bytes) -> None:
    """Whatever the file holds: a dict of metrics, nothing, or one warning naming the file;
    never an exception."""
    path = ws.local_path(RESULTS)
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.json").write_bytes(content)
    warnings: list[str] = []
    found = user_results_metrics(ws, RESULTS, warnings)
    assert found is None or (isinstance(found, dict) and found)
    assert len(warnings) <= 1
    if warnings:
        assert found is None and str(path / "results.json") in warnings[0]
