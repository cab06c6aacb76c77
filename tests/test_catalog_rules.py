"""The catalog rules themselves (tests/catalog_rules.py) on hand-made events: a rule that
cannot fail would prove nothing about the example's events."""

from __future__ import annotations

from typing import Any

from . import catalog_rules

NS = "dws://ws"


def _event(
    kind: str,
    run_id: str,
    job: str,
    *,
    inputs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    depends_on: tuple[str, ...] = (),
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
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
