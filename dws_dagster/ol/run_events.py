"""OpenLineage RunEvents of a Dagster run itself: the parent (and root) of its assets' runs.

Every asset run's `parent` facet names the Dagster run; a catalog that never sees an event for
that run creates it from the children's facets and shows it running forever (Marquez does).
So the run has events of its own, a START when it starts and a COMPLETE, FAIL or ABORT when it
ends, as a run of `job_names.DAGSTER_JOB`, the one job of every Dagster run: catalogs name a
child job after its parent's, so a job per Dagster job would split each asset into a job per
Dagster job that ran it. Which Dagster job it executes, and what launched it (schedule,
sensor, backfill, partition), are the run's tags.

Pure functions, like `events.py`, with the same producer, schema URLs and facet shape
(`facets`). The run id is the one the children's parent facets carry
(`events.dagster_run_ol_id`), so the two cannot drift apart. The Dagster run is the root of
the hierarchy, so its events carry no `parent` facet: the spec's root is "the run at the
top", which the children name and this run is.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from dws_dagster._version import __version__
from dws_dagster.errors import EventBuildError
from dws_dagster.ol.events import DAGSTER_JOB_TAG, dagster_run_ol_id
from dws_dagster.ol.facets import INTEGRATION, PRODUCER, TAG_SOURCE, SchemaURL, facet
from dws_dagster.ol.job_names import DAGSTER_JOB
from dws_dagster.ol.timestamps import iso_utc
from dws_dagster.workspace.redaction import redact_text

__all__ = ["DAGSTER_JOB_TYPE", "DagsterRunEvent", "build_dagster_run_event"]

#: `jobType.jobType` of a Dagster run's job: a job of steps, as Airflow's DAG is a "DAG"
DAGSTER_JOB_TYPE = "JOB"
_STATES = frozenset({"START", "COMPLETE", "FAIL", "ABORT"})


@dataclass(frozen=True)
class DagsterRunEvent:
    """One state change of a Dagster run, to become one OpenLineage RunEvent."""

    kind: Literal["START", "COMPLETE", "FAIL", "ABORT"]
    event_time: dt.datetime
    #: the job namespace, the one the asset runs' parent facets name
    namespace: str
    dagster_run_id: str
    dagster_job: str
    error_message: str | None = None
    dagster_version: str | None = None
    #: Dagster's tags of the run that say what launched it (schedule, sensor, backfill,
    #: partition or partition range), as (key, value)
    tags: tuple[tuple[str, str], ...] = ()


def build_dagster_run_event(event: DagsterRunEvent, *, producer: str = PRODUCER) -> dict[str, Any]:
    """The OpenLineage RunEvent of one state change of a Dagster run, as the JSON-ready dict
    transports send. It reads and writes no dataset: its assets' runs do."""
    where = f"Dagster run of job '{event.dagster_job}'"
    if not isinstance(event.kind, str) or event.kind not in _STATES:
        raise EventBuildError(
            f"{where}: event kind {event.kind!r} is not one of START, COMPLETE, FAIL, ABORT"
        )
    if not isinstance(event.dagster_job, str) or not event.dagster_job:
        raise EventBuildError(f"Dagster run {event.dagster_run_id!r}: no job name")
    run_id = dagster_run_ol_id(event.dagster_run_id, where)
    facets: dict[str, Any] = {}
    if event.dagster_version:
        facets["processing_engine"] = facet(
            SchemaURL.PROCESSING_ENGINE,
            producer,
            version=event.dagster_version,
            name="dagster",
            openlineageAdapterVersion=__version__,
        )
    if event.kind == "FAIL" and event.error_message:
        facets["errorMessage"] = facet(
            SchemaURL.ERROR_MESSAGE,
            producer,
            message=redact_text(event.error_message),
            programmingLanguage="python",
        )
    tags = {DAGSTER_JOB_TAG: event.dagster_job, **dict(event.tags)}
    facets["tags"] = facet(
        SchemaURL.RUN_TAGS,
        producer,
        tags=[
            {"key": key, "value": str(value), "source": TAG_SOURCE} for key, value in tags.items()
        ],
    )
    return {
        "eventTime": iso_utc(event.event_time, f"{where}: event time"),
        "producer": producer,
        "schemaURL": SchemaURL.RUN_EVENT,
        "run": {"runId": run_id, "facets": facets},
        "job": {
            "namespace": event.namespace,
            "name": DAGSTER_JOB,
            "facets": {
                "jobType": facet(
                    SchemaURL.JOB_TYPE,
                    producer,
                    processingType="BATCH",
                    integration=INTEGRATION,
                    jobType=DAGSTER_JOB_TYPE,
                )
            },
        },
        "eventType": event.kind,
        "inputs": [],
        "outputs": [],
    }
