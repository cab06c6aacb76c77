"""The Dagster run's own OpenLineage events (`dws_dagster.ol.run_events`): valid against the
spec and the client's classes, under the exact run id and job its assets' runs name as parent
and root, dated as given, with errors redacted and bad input refused by name."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid

import pytest

from dws_dagster import DwsError
from dws_dagster.ol.events import build_run_event
from dws_dagster.ol.run_events import DagsterRunEvent, build_dagster_run_event
from tests.ol.ol_client import check_client_roundtrip
from tests.ol.ol_parents import check_parents
from tests.ol.ol_spec import validate_run_event
from tests.ol.test_events import NOW, RUN_ID, TEST_PRODUCER, full_event, locate


def parent_event(kind: str = "START", **changes: object) -> DagsterRunEvent:
    event = DagsterRunEvent(
        kind=kind,
        event_time=NOW,
        namespace="dagster-demo",  # type: ignore[arg-type]
        dagster_run_id=RUN_ID,
        dagster_job="__ASSET_JOB",
        dagster_version="1.10.3",
        error_message="ValueError: bad" if kind == "FAIL" else None,
    )
    return dataclasses.replace(event, **changes) if changes else event


def render(event: DagsterRunEvent) -> dict:
    return build_dagster_run_event(event, producer=TEST_PRODUCER)


@pytest.mark.parametrize("kind", ["START", "COMPLETE", "FAIL", "ABORT"])
def test_events_validate_and_are_the_clients_classes(kind: str) -> None:
    data = render(parent_event(kind))
    validate_run_event(data)
    check_client_roundtrip(data)
    assert data["eventType"] == kind and data["inputs"] == data["outputs"] == []
    job_type = data["job"]["facets"]["jobType"]
    assert (job_type["integration"], job_type["processingType"], job_type["jobType"]) == (
        "DAGSTER",
        "BATCH",
        "JOB",
    )
    assert ("errorMessage" in data["run"]["facets"]) == (kind == "FAIL")
    # Every Dagster run is a run of one job; its own Dagster job and launch are tags.
    assert data["job"]["name"] == "dagster"
    assert data["run"]["facets"]["tags"]["tags"] == [
        {"key": "dagster/job", "value": "__ASSET_JOB", "source": "DAGSTER"}
    ]


def test_what_launched_the_run_is_its_tags() -> None:
    launched = (("dagster/schedule_name", "taxi_monthly_schedule"), ("dagster/partition", "p"))
    data = render(parent_event(dagster_job="taxi_monthly_job", tags=launched))
    validate_run_event(data)
    check_client_roundtrip(data)
    assert [(t["key"], t["value"]) for t in data["run"]["facets"]["tags"]["tags"]] == [
        ("dagster/job", "taxi_monthly_job"),
        *launched,
    ]


def test_the_run_is_the_one_its_assets_name_as_parent_and_root() -> None:
    child = build_run_event(full_event("COMPLETE"), locate=locate, producer=TEST_PRODUCER)
    start, end = render(parent_event("START")), render(parent_event("COMPLETE"))
    parent = child["run"]["facets"]["parent"]
    for event in (start, end):
        assert event["run"]["runId"] == parent["run"]["runId"] == parent["root"]["run"]["runId"]
        assert (
            (event["job"]["namespace"], event["job"]["name"])
            == (parent["job"]["namespace"], parent["job"]["name"])
            == (parent["root"]["job"]["namespace"], parent["root"]["job"]["name"])
        )
        assert "parent" not in event["run"]["facets"]  # the root names no parent
    # Different keys in the outbox: the Dagster run's UUID4 is no asset run's UUIDv7.
    assert uuid.UUID(start["run"]["runId"]).version == 4
    assert uuid.UUID(child["run"]["runId"]).version == 7
    assert check_parents([start, child, end]) == {RUN_ID}
    with pytest.raises(AssertionError):
        check_parents([child, start, end])  # the helper tells a child before its parent
    with pytest.raises(AssertionError):
        check_parents([start, end, child])  # and a parent ending before its child


def test_times_are_the_given_ones_in_utc() -> None:
    local = dt.datetime(2024, 5, 1, 14, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert render(parent_event(event_time=local))["eventTime"] == "2024-05-01T12:30:00+00:00"
    with pytest.raises(DwsError, match="no time zone"):
        render(parent_event(event_time=dt.datetime(2024, 5, 1)))


def test_error_messages_are_redacted() -> None:
    data = render(parent_event("FAIL", error_message="failed reading s3a://key:secret@b/x"))
    assert "secret" not in json.dumps(data)
    assert data["run"]["facets"]["errorMessage"]["message"].startswith("failed reading")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dagster_run_id": "not-a-uuid"}, "is not a UUID"),
        ({"kind": "RESTART"}, "is not one of"),
        ({"dagster_job": ""}, "no job name"),
    ],
)
def test_bad_input_is_refused_by_name(changes: dict, message: str) -> None:
    with pytest.raises(DwsError, match=message):
        render(parent_event(**changes))
