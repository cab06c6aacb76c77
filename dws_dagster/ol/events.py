"""OpenLineage RunEvents for one asset's run, built from the plain data of `model`.

Pure functions: no Dagster, no Spark, no I/O (the only outside call is `locate`, which the
caller supplies), so every event can be checked against the official JSON Schemas in tests.
One OpenLineage job per asset (and one per asset's checks), named by `job_names` so that it
stays one job in catalogs whichever Dagster job ran it; one OpenLineage run per (Dagster run,
asset, partition); the Dagster run is the parent and the root of that run.

This module builds the event with its run facets (parent, engine, times, dependencies, tags,
error) and its job facets (type, source code, documentation, owners, tags); the inputs and
outputs come from `dataset_facets`, the producer, schema URLs and facet shape from `facets`.
Source-code URLs are made in `source_urls`, times checked in `timestamps`.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

import orjson
from openlineage.client.uuid import generate_static_uuid

from dws_dagster._version import __version__
from dws_dagster.errors import EventBuildError
from dws_dagster.ol.dataset_facets import SourceNames, input_dataset, output_dataset
from dws_dagster.ol.facets import (
    INTEGRATION,
    PRODUCER,
    TAG_SOURCE,
    SchemaURL,
    facet,
    owner_entry,
)
from dws_dagster.ol.job_names import DAGSTER_JOB, asset_job_name, checks_job_name
from dws_dagster.ol.model import AssetRunEvent, JobInfo, RunInfo
from dws_dagster.ol.source_urls import forge_file_url, path_uri, repo_uri
from dws_dagster.ol.timestamps import iso_utc, require_aware
from dws_dagster.workspace.redaction import redact_text

__all__ = [
    "ASSET_CHECKS_JOB_TYPE",
    "ASSET_JOB_TYPE",
    "DAGSTER_JOB_TAG",
    "PARTITION_TAG",
    "build_run_event",
    "dagster_run_ol_id",
    "job_name",
    "ol_run_id",
]

#: run tag holding the Dagster partition key (Dagster's own tag name)
PARTITION_TAG = "dagster/partition"
#: run tag naming the Dagster job a run executes (its runs are all runs of `DAGSTER_JOB`)
DAGSTER_JOB_TAG = "dagster/job"
SPARK_VERSION_TAG = "spark/version"
CODE_VERSION_TAG = "dagster/code_version"
#: `jobType.jobType` of an asset's job and of its checks' job
ASSET_JOB_TYPE = "ASSET"
ASSET_CHECKS_JOB_TYPE = "ASSET_CHECK"
_STATES = frozenset({"START", "COMPLETE", "FAIL", "ABORT"})


def job_name(job: JobInfo) -> str:
    """The OpenLineage name of the job of an asset or of its checks."""
    return checks_job_name(job.name) if job.checks else asset_job_name(job.name)


def _run_key(job: JobInfo) -> str:
    """What a run id is derived from besides the Dagster run and partition: the asset key for
    an asset's runs (its id does not depend on how its job is named, so the outbox's keys of
    its events do not either), the checks job's name for its checks' runs."""
    return job_name(job) if job.checks else job.name


def ol_run_id(run: RunInfo, job_name: str) -> str:
    """The OpenLineage run id of one asset (job) in one Dagster run and partition.

    Deterministic, so a START and its COMPLETE (emitted by different sensor ticks, possibly
    after a restart) share one id; the Dagster run's creation time leads the UUIDv7, so ids
    sort by run. JSON encoding keeps (`a`, None) and (`a`, "") apart.
    """
    created = require_aware(run.dagster_run_created, "RunInfo.dagster_run_created")
    parts = (created, run.dagster_run_id, job_name, run.partition)
    try:
        return _cached_run_id(*parts)
    except TypeError:  # an unhashable id: refused later, with a clear error
        return _static_run_id(*parts)


def _static_run_id(
    created: dt.datetime, dagster_run_id: str, job_name: str, partition: str | None
) -> str:
    data = json.dumps([dagster_run_id, job_name, partition]).encode("utf-8")
    return str(generate_static_uuid(created, data))


#: Memoized: an asset's START and COMPLETE, rendered apart, share the id.
_cached_run_id = functools.lru_cache(maxsize=4096)(_static_run_id)


def build_run_event(
    event: AssetRunEvent, *, locate: Callable[[str], str], producer: str = PRODUCER
) -> dict[str, Any]:
    """The OpenLineage RunEvent of one state change of one asset's run, as the JSON-ready
    dict transports send.

    `locate(ref)` gives the location of a workspace ref; it is called only for column-lineage
    sources that name a ref but no location, and its errors propagate. Optional facets are
    emitted only when their required fields can be filled, so every event validates.
    """
    if not isinstance(event.kind, str) or event.kind not in _STATES:
        raise EventBuildError(
            f"asset '{event.job.name}': event kind {event.kind!r} is not one of "
            "START, COMPLETE, FAIL, ABORT"
        )
    event_time = iso_utc(event.event_time, "AssetRunEvent.event_time")
    job = event.job
    run_id = ol_run_id(event.run, _run_key(job))
    names = SourceNames(locate, event.inputs)
    return {
        "eventTime": event_time,
        "producer": producer,
        "schemaURL": SchemaURL.RUN_EVENT,
        "run": {"runId": run_id, "facets": _run_facets(event, producer)},
        "job": {
            "namespace": job.namespace,
            "name": job_name(job),
            "facets": orjson.loads(_job_facets_json(job, producer)),
        },
        "eventType": event.kind,
        "inputs": [input_dataset(info, job, producer) for info in event.inputs],
        "outputs": [output_dataset(info, job, names, producer) for info in event.outputs],
    }


# ------------------------------------------------------------------------------------ run


def _run_facets(event: AssetRunEvent, producer: str) -> dict[str, Any]:
    run, job = event.run, event.job
    try:
        facets = orjson.loads(_shared_run_facets_json(run, job.namespace, job.name, producer))
    except TypeError:  # an unhashable field: built uncached, refused with a clear error
        facets = _shared_run_facets(run, job.namespace, job.name, producer)
    if event.kind == "FAIL" and event.error_message:
        facets["errorMessage"] = facet(
            SchemaURL.ERROR_MESSAGE,
            producer,
            message=redact_text(event.error_message),
            programmingLanguage="python",
            stackTrace=redact_text(event.stack_trace) if event.stack_trace else None,
        )
    return facets


@functools.lru_cache(maxsize=4096)
def _shared_run_facets_json(run: RunInfo, namespace: str, name: str, producer: str) -> bytes:
    """The run facets an asset's START and COMPLETE share, built once (as the job's are)."""
    return orjson.dumps(_shared_run_facets(run, namespace, name, producer))


def _shared_run_facets(run: RunInfo, namespace: str, name: str, producer: str) -> dict[str, Any]:
    facets: dict[str, Any] = {"parent": _parent(run, namespace, name, producer)}
    if run.dagster_version:
        facets["processing_engine"] = facet(
            SchemaURL.PROCESSING_ENGINE,
            producer,
            version=run.dagster_version,
            name="dagster",
            openlineageAdapterVersion=__version__,
        )
    if run.nominal_start is not None:
        end = run.nominal_end
        facets["nominalTime"] = facet(
            SchemaURL.NOMINAL_TIME,
            producer,
            nominalStartTime=iso_utc(run.nominal_start, "RunInfo.nominal_start"),
            nominalEndTime=iso_utc(end, "RunInfo.nominal_end") if end is not None else None,
        )
    dependencies = _unique(run.dependencies)
    if dependencies:
        facets["jobDependencies"] = facet(
            SchemaURL.JOB_DEPENDENCIES,
            producer,
            upstream=[
                {
                    "job": {"namespace": namespace, "name": asset_job_name(dependency)},
                    "dependency_type": "IMPLICIT_DEPENDENCY",
                }
                for dependency in dependencies
            ],
        )
    tags = [
        (PARTITION_TAG, run.partition),
        (DAGSTER_JOB_TAG, run.dagster_job or None),
        (SPARK_VERSION_TAG, run.spark_version),
    ]
    if any(value is not None for _key, value in tags):
        facets["tags"] = facet(
            SchemaURL.RUN_TAGS,
            producer,
            tags=[
                {"key": key, "value": value, "source": TAG_SOURCE}
                for key, value in tags
                if value is not None
            ],
        )
    return facets


def dagster_run_ol_id(dagster_run_id: str, where: str) -> str:
    """The OpenLineage run id of a Dagster run itself: its own id, a UUID4, which the parent
    facets of its assets' runs name and its own events carry. It never equals an asset run's
    id (`ol_run_id`, a UUIDv7), so the outbox's (runId, eventType) keys cannot collide."""
    try:
        return str(UUID(dagster_run_id))
    except (ValueError, TypeError, AttributeError):
        raise EventBuildError(
            f"{where}: Dagster run id {dagster_run_id!r} is not a UUID; "
            "pass the run's own id (DagsterRun.run_id)"
        ) from None


def _parent(run: RunInfo, namespace: str, asset: str, producer: str) -> dict[str, Any]:
    """The Dagster run: parent of the asset's run and root of the hierarchy, a run of the one
    job of Dagster runs (`job_names`), which keeps the asset one job in catalogs."""
    dagster_run_id = dagster_run_ol_id(run.dagster_run_id, f"asset '{asset}'")
    return facet(
        SchemaURL.PARENT,
        producer,
        run={"runId": dagster_run_id},
        job={"namespace": namespace, "name": DAGSTER_JOB},
        root={
            "run": {"runId": dagster_run_id},
            "job": {"namespace": namespace, "name": DAGSTER_JOB},
        },
    )


# ------------------------------------------------------------------------------------ job


@functools.lru_cache(maxsize=1024)
def _job_facets_json(job: JobInfo, producer: str) -> bytes:
    """The job's facets, built once per job (every event of an asset carries the same ones)
    and kept as JSON: parsing it gives each event dicts of its own, faster than building them."""
    return orjson.dumps(_job_facets(job, producer))


def _job_facets(job: JobInfo, producer: str) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "jobType": facet(
            SchemaURL.JOB_TYPE,
            producer,
            processingType="BATCH",
            integration=INTEGRATION,
            jobType=ASSET_CHECKS_JOB_TYPE if job.checks else ASSET_JOB_TYPE,
        )
    }
    if job.source_code:
        facets["sourceCode"] = facet(
            SchemaURL.SOURCE_CODE,
            producer,
            language="python",
            sourceCode=redact_text(job.source_code),
        )
    location = _source_code_location(job, producer)
    if location is not None:
        facets["sourceCodeLocation"] = location
    if job.description:
        # Dagster renders asset descriptions as Markdown.
        facets["documentation"] = facet(
            SchemaURL.DOCUMENTATION,
            producer,
            description=redact_text(job.description),
            contentType="text/markdown",
        )
    owners = _unique(job.owners)
    if owners:
        facets["ownership"] = facet(
            SchemaURL.OWNERSHIP, producer, owners=[owner_entry(owner) for owner in owners]
        )
    if job.code_version:
        facets["tags"] = facet(
            SchemaURL.JOB_TAGS,
            producer,
            tags=[{"key": CODE_VERSION_TAG, "value": job.code_version, "source": TAG_SOURCE}],
        )
    return facets


def _source_code_location(job: JobInfo, producer: str) -> dict[str, Any] | None:
    """Where the asset's code is kept: `url` (required, a URI) is the file's page on a known
    forge, else the repository; without a repository, the absolute file itself."""
    repo = repo_uri(job.git_url) if job.git_url else None
    path = job.source_path or None
    if repo is not None:
        revision = job.git_commit or job.git_branch
        url = forge_file_url(repo, revision, path) or repo
        kind = "git"
    elif path is not None and os.path.isabs(path):
        url = path_uri(path)
        kind = "git" if job.git_commit else "file"
    elif path is not None and job.git_root and os.path.isabs(job.git_root):
        # A repository without a remote: the file in the local clone, at the known commit.
        repo = path_uri(job.git_root)
        url = path_uri(os.path.join(job.git_root, path))
        kind = "git"
    else:
        return None
    return facet(
        SchemaURL.SOURCE_CODE_LOCATION,
        producer,
        type=kind,
        url=url,
        repoUrl=repo,
        path=path,
        version=job.git_commit or None,
        branch=job.git_branch or None,
    )


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
