"""The catalog rules themselves (tests/ol/catalog_rules.py) on hand-made events: a rule that
cannot fail would prove nothing about the example's events."""

from __future__ import annotations

from typing import Any

from tests.ol import catalog_rules

NS = "dws://ws"


def _event(
    kind: str,
    run_id: str,
    job: str,
    *,
    inputs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    depends_on: tuple[str, ...] = (),
    parent: tuple[str, str] | None = None,
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if parent is not None:
        facets["parent"] = {
            "run": {"runId": parent[0]},
            "job": {"namespace": NS, "name": parent[1]},
        }
    if depends_on:
        facets["jobDependencies"] = {
            "upstream": [{"job": {"namespace": NS, "name": name}} for name in depends_on]
        }
    return {
        "eventType": kind,
        "run": {"runId": run_id, "facets": facets},
        "job": {"namespace": NS, "name": job},
        "inputs": [{"namespace": "file", "name": name} for name in inputs],
        "outputs": [{"namespace": "file", "name": name} for name in outputs],
    }


WEATHER = [
    _event("START", "w", "weather", outputs=("/ws/weather",)),
    _event("COMPLETE", "w", "weather", outputs=("/ws/weather",)),
]


def test_equal_start_and_complete_pass():
    events = [
        *WEATHER,
        _event("START", "f", "forecast", inputs=("/ws/train",), outputs=("/ws/forecast",)),
        _event("COMPLETE", "f", "forecast", inputs=("/ws/train",), outputs=("/ws/forecast",)),
    ]
    assert catalog_rules.start_complete_differences(events) == []


def test_a_read_the_start_announced_as_a_dependency_passes():
    events = [
        *WEATHER,
        _event(
            "START",
            "f",
            "forecast",
            inputs=("/ws/train",),
            outputs=("/ws/forecast",),
            depends_on=("weather",),
        ),
        _event(
            "COMPLETE",
            "f",
            "forecast",
            inputs=("/ws/train", "/ws/weather"),
            outputs=("/ws/forecast",),
        ),
    ]
    assert catalog_rules.start_complete_differences(events) == []


def test_an_unannounced_input_is_reported():
    events = [
        *WEATHER,
        _event("START", "f", "forecast", inputs=("/ws/train",), outputs=("/ws/forecast",)),
        _event(
            "COMPLETE",
            "f",
            "forecast",
            inputs=("/ws/train", "/ws/weather"),
            outputs=("/ws/forecast",),
        ),
    ]
    [problem] = catalog_rules.start_complete_differences(events)
    assert "forecast" in problem and "/ws/weather" in problem


def test_a_phantom_start_input_is_reported_even_when_announced():
    # The training_data case: START names a folder its COMPLETE never reads.
    events = [
        *WEATHER,
        _event(
            "START",
            "t",
            "training",
            inputs=("/ws/actuals",),
            outputs=("/ws/t",),
            depends_on=("weather",),
        ),
        _event("COMPLETE", "t", "training", inputs=("/ws/actuals/2024-01",), outputs=("/ws/t",)),
    ]
    assert len(catalog_rules.start_complete_differences(events)) == 1


def test_different_outputs_are_reported():
    events = [
        _event("START", "r", "raw", outputs=("/ws/raw",)),
        _event("COMPLETE", "r", "raw", outputs=("/ws/raw/2024-01",)),
    ]
    assert len(catalog_rules.start_complete_differences(events)) == 1


# ------------------------------------------------------------------- Marquez's job names


def _dagster_run(run_id: str, job: str) -> list[dict[str, Any]]:
    return [_event("START", run_id, job), _event("COMPLETE", run_id, job)]


def test_a_child_is_named_after_its_parent_unless_it_says_it():
    events = [
        *_dagster_run("d1", "taxi_job"),
        _event("COMPLETE", "a1", "raw", outputs=("/ws/raw",), parent=("d1", "taxi_job")),
        _event("COMPLETE", "a2", "taxi_job.raw", outputs=("/ws/raw",), parent=("d1", "taxi_job")),
        _event("COMPLETE", "a3", "raw", outputs=("/ws/raw",)),
    ]
    assert catalog_rules.marquez_job_ids(events)[2:] == [
        (NS, "taxi_job.raw"),
        (NS, "taxi_job.raw"),
        (NS, "raw"),
    ]
    assert catalog_rules.renamed_jobs(events) == [
        f"job {(NS, 'raw')} is {(NS, 'taxi_job.raw')} in Marquez"
    ]


def test_one_asset_run_by_two_dagster_jobs_is_two_producers_unless_named_for_one():
    split = [
        *_dagster_run("d1", "taxi_job"),
        *_dagster_run("d2", "__ASSET_JOB"),
        _event("COMPLETE", "a1", "raw", outputs=("/ws/raw",), parent=("d1", "taxi_job")),
        _event("COMPLETE", "a2", "raw", outputs=("/ws/raw",), parent=("d2", "__ASSET_JOB")),
    ]
    [problem] = catalog_rules.datasets_with_several_producers(split)
    assert "taxi_job.raw" in problem and "__ASSET_JOB.raw" in problem
    # Each job holds part of the dataset's runs, and the graph shows two producers.
    assert catalog_rules.producers(split)[("file", "/ws/raw")] == {
        (NS, "taxi_job.raw"),
        (NS, "__ASSET_JOB.raw"),
    }
    one = [
        *_dagster_run("d1", "dagster"),
        *_dagster_run("d2", "dagster"),
        _event("COMPLETE", "a1", "dagster.raw", outputs=("/ws/raw",), parent=("d1", "dagster")),
        _event("COMPLETE", "a2", "dagster.raw", outputs=("/ws/raw",), parent=("d2", "dagster")),
    ]
    assert catalog_rules.datasets_with_several_producers(one) == []
    assert catalog_rules.renamed_jobs(one) == []


def test_a_parent_run_marquez_holds_under_another_job_is_a_new_parent():
    """Marquez takes a parent facet naming a run it holds under another job for a clash of
    run ids and files the child under the facet's job."""
    events = [
        *_dagster_run("d1", "taxi_job"),
        _event("COMPLETE", "a1", "raw", outputs=("/ws/raw",), parent=("d1", "dagster")),
    ]
    assert catalog_rules.marquez_job_ids(events)[-1] == (NS, "dagster.raw")
    # A parent facet naming the child's own job: the parent is that name up to its last dot.
    selfish = [_event("COMPLETE", "a1", "dagster.raw", parent=("d9", "dagster.raw"))]
    assert catalog_rules.marquez_job_ids(selfish) == [(NS, "dagster.raw")]


def test_described_outputs_and_quality_facets_in_their_place():
    described = _event("COMPLETE", "r", "raw", outputs=("/ws/raw",))
    [problem] = catalog_rules.undescribed_outputs([described])
    assert "documentation, ownership, tags" in problem
    for name in catalog_rules.DESCRIBING_FACETS:
        described["outputs"][0].setdefault("facets", {})[name] = {}
    assert catalog_rules.undescribed_outputs([described]) == []
    checked = _event("COMPLETE", "c", "raw.checks", inputs=("/ws/raw",))
    verdicts = {"assertions": [{"assertion": "not_null", "success": True}]}
    checked["inputs"][0]["inputFacets"] = {"dataQualityAssertions": verdicts}
    assert catalog_rules.misplaced_quality_facets([checked]) == []
    assert catalog_rules.assertions([checked]) == [
        {
            "assertion": "not_null",
            "success": True,
            "dataset": ("file", "/ws/raw"),
            "partitions": [],
            "run": "c",
            "parent_run": None,
            "eventType": "COMPLETE",
        }
    ]
    # Marquez takes a dataset's description from every event naming it.
    reader = _event("COMPLETE", "t", "training", inputs=("/ws/raw",))
    assert catalog_rules.erased_descriptions([reader, described]) == []
    described["outputs"][0]["facets"]["documentation"] = {"description": "Raw rows."}
    [problem] = catalog_rules.erased_descriptions([described, reader])
    assert "training (COMPLETE) names ('file', '/ws/raw') without its description" in problem
    reader["inputs"][0]["facets"] = {"documentation": {"description": "Raw rows."}}
    assert catalog_rules.erased_descriptions([described, reader]) == []
    described["outputs"][0]["facets"]["dataQualityAssertions"] = verdicts
    [problem] = catalog_rules.misplaced_quality_facets([described])
    assert "dataQualityAssertions in the facets of output" in problem
