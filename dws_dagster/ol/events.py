"""OpenLineage RunEvents for one asset's run, built from the plain data of `model`.

Pure functions: no Dagster, no Spark, no I/O (the only outside call is `locate`, which the
caller supplies), so every event can be checked against the official JSON Schemas in tests.
One OpenLineage job per asset, one OpenLineage run per (Dagster run, asset, partition); the
Dagster run is the parent and the root of that run.

A partitioned asset is ONE dataset, named by its root (its ref above the partition folders),
as catalogs keep only each job's latest inputs and outputs: a dataset per partition folder would
be replaced at every run and left without its producer. The partitions written or read go in
the `subset` output/input facets (PartitionSubsetCondition). An asset's run writes one
partition, so an output's version is that partition's; an input reading several partitions
gets a digest of their (subpath, version) pairs, so reading another version of any partition
is reading another version of the dataset.

Events are built as the JSON-ready dicts transports send (what the client's `Serde.to_dict`
makes of its `RunEvent` classes: no None values, enums as strings) rather than through those
classes: the lineage sensor renders every event it spools, and the attrs objects (whose
validators parse every URL) would only be converted back to dicts. The schema URLs are the
client's own (`_get_schema()` of each class), so events follow the spec version of the
installed client, and tests load every event back into the client's classes.

Source-code URLs are made in `source_urls`, schema fields' nested types parsed in
`spark_types`, times checked in `timestamps`.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

import orjson
from openlineage.client.event_v2 import RunEvent
from openlineage.client.facet_v2 import (
    base_subset_dataset,
    column_lineage_dataset,
    dataset_version_dataset,
    documentation_job,
    error_message_run,
    job_dependencies_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    ownership_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    source_code_job,
    source_code_location_job,
    storage_dataset,
    symlinks_dataset,
    tags_job,
    tags_run,
)
from openlineage.client.uuid import generate_static_uuid

from dws_dagster import __version__
from dws_dagster.ol.model import (
    AssetRunEvent,
    DatasetInfo,
    EventBuildError,
    JobInfo,
    OutputInfo,
    PartitionInfo,
    RunInfo,
)
from dws_dagster.ol.naming import dataset_name
from dws_dagster.ol.source_urls import forge_file_url, path_uri, repo_uri
from dws_dagster.ol.spark_types import schema_field
from dws_dagster.ol.timestamps import iso_utc, require_aware
from dws_dagster.workspace.redaction import redact_text

__all__ = [
    "INTEGRATION",
    "PARTITION_TAG",
    "PRODUCER",
    "build_run_event",
    "ol_run_id",
    "workspace_namespace",
]

#: `producer` of every event and facet: this package's source at this version
PRODUCER = f"https://github.com/dws-dagster/dws_dagster/tree/{__version__}"
#: `jobType.integration`: names the system whose jobs these are, as SPARK or AIRFLOW do
INTEGRATION = "DAGSTER"
#: run tag holding the Dagster partition key (Dagster's own tag name)
PARTITION_TAG = "dagster/partition"
SPARK_VERSION_TAG = "spark/version"
CODE_VERSION_TAG = "dagster/code_version"
#: symlink type of a dataset's workspace ref: the ref is the logical table, the path its storage
REF_SYMLINK_TYPE = "TABLE"
_TAG_SOURCE = "DAGSTER"
_KINDS = ("DIRECT", "INDIRECT")
_STATES = frozenset({"START", "COMPLETE", "FAIL", "ABORT"})

#: `schemaURL` of a RunEvent and `_schemaURL` of each facet, from the client's classes
_RUN_EVENT_SCHEMA = RunEvent._get_schema()
_PARENT = parent_run.ParentRunFacet._get_schema()
_PROCESSING_ENGINE = processing_engine_run.ProcessingEngineRunFacet._get_schema()
_NOMINAL_TIME = nominal_time_run.NominalTimeRunFacet._get_schema()
_JOB_DEPENDENCIES = job_dependencies_run.JobDependenciesRunFacet._get_schema()
_ERROR_MESSAGE = error_message_run.ErrorMessageRunFacet._get_schema()
_RUN_TAGS = tags_run.TagsRunFacet._get_schema()
_JOB_TYPE = job_type_job.JobTypeJobFacet._get_schema()
_SOURCE_CODE = source_code_job.SourceCodeJobFacet._get_schema()
_SOURCE_CODE_LOCATION = source_code_location_job.SourceCodeLocationJobFacet._get_schema()
_DOCUMENTATION = documentation_job.DocumentationJobFacet._get_schema()
_OWNERSHIP = ownership_job.OwnershipJobFacet._get_schema()
_JOB_TAGS = tags_job.TagsJobFacet._get_schema()
_DATASET_VERSION = dataset_version_dataset.DatasetVersionDatasetFacet._get_schema()
_SYMLINKS = symlinks_dataset.SymlinksDatasetFacet._get_schema()
_SCHEMA = schema_dataset.SchemaDatasetFacet._get_schema()
_COLUMN_LINEAGE = column_lineage_dataset.ColumnLineageDatasetFacet._get_schema()
_STORAGE = storage_dataset.StorageDatasetFacet._get_schema()
_INPUT_SUBSET = base_subset_dataset.InputSubsetInputDatasetFacet._get_schema()
_OUTPUT_SUBSET = base_subset_dataset.OutputSubsetOutputDatasetFacet._get_schema()
#: key of the subset facets among `inputFacets` / `outputFacets` (the spec file's property)
SUBSET_FACET = "subset"
_HIVE_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.+)")
_OUTPUT_STATISTICS = (
    output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet._get_schema()
)


def workspace_namespace(job_namespace: str) -> str:
    """Namespace of the workspace's logical datasets (refs), used in `symlinks` facets.

    Refs are names inside one dws workspace, which the Dagster deployment's job namespace
    identifies; `dws://` keeps them apart from storage namespaces (`file`, `s3://...`).
    """
    return f"dws://{job_namespace}"


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
    run_id = ol_run_id(event.run, event.job.name)
    job = event.job
    names = _Names(locate, event.inputs)
    return {
        "eventTime": event_time,
        "producer": producer,
        "schemaURL": _RUN_EVENT_SCHEMA,
        "run": {"runId": run_id, "facets": _run_facets(event, producer)},
        "job": {
            "namespace": job.namespace,
            "name": job.name,
            "facets": orjson.loads(_job_facets_json(job, producer)),
        },
        "eventType": event.kind,
        "inputs": [_input(info, job, producer) for info in event.inputs],
        "outputs": [_output(info, job, names, producer) for info in event.outputs],
    }


def _facet(schema_url: str, producer: str, **fields: Any) -> dict[str, Any]:
    """A facet: its fields without the None ones, after `_producer` and `_schemaURL`."""
    facet = {"_producer": producer, "_schemaURL": schema_url}
    for name, value in fields.items():
        if value is not None:
            facet[name] = value
    return facet


# ------------------------------------------------------------------------------------ run


def _run_facets(event: AssetRunEvent, producer: str) -> dict[str, Any]:
    run, job = event.run, event.job
    try:
        facets = orjson.loads(_shared_run_facets_json(run, job.namespace, job.name, producer))
    except TypeError:  # an unhashable field: built uncached, refused with a clear error
        facets = _shared_run_facets(run, job.namespace, job.name, producer)
    if event.kind == "FAIL" and event.error_message:
        facets["errorMessage"] = _facet(
            _ERROR_MESSAGE,
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
        facets["processing_engine"] = _facet(
            _PROCESSING_ENGINE,
            producer,
            version=run.dagster_version,
            name="dagster",
            openlineageAdapterVersion=__version__,
        )
    if run.nominal_start is not None:
        end = run.nominal_end
        facets["nominalTime"] = _facet(
            _NOMINAL_TIME,
            producer,
            nominalStartTime=iso_utc(run.nominal_start, "RunInfo.nominal_start"),
            nominalEndTime=iso_utc(end, "RunInfo.nominal_end") if end is not None else None,
        )
    dependencies = _unique(run.dependencies)
    if dependencies:
        facets["jobDependencies"] = _facet(
            _JOB_DEPENDENCIES,
            producer,
            upstream=[
                {
                    "job": {"namespace": namespace, "name": dependency},
                    "dependency_type": "IMPLICIT_DEPENDENCY",
                }
                for dependency in dependencies
            ],
        )
    tags = [(PARTITION_TAG, run.partition), (SPARK_VERSION_TAG, run.spark_version)]
    if any(value is not None for _key, value in tags):
        facets["tags"] = _facet(
            _RUN_TAGS,
            producer,
            tags=[
                {"key": key, "value": value, "source": _TAG_SOURCE}
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
    """The Dagster run: parent of the asset's run and root of the hierarchy."""
    dagster_run_id = dagster_run_ol_id(run.dagster_run_id, f"asset '{asset}'")
    return _facet(
        _PARENT,
        producer,
        run={"runId": dagster_run_id},
        job={"namespace": namespace, "name": run.dagster_job},
        root={
            "run": {"runId": dagster_run_id},
            "job": {"namespace": namespace, "name": run.dagster_job},
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
        "jobType": _facet(
            _JOB_TYPE, producer, processingType="BATCH", integration=INTEGRATION, jobType="ASSET"
        )
    }
    if job.source_code:
        facets["sourceCode"] = _facet(
            _SOURCE_CODE, producer, language="python", sourceCode=redact_text(job.source_code)
        )
    location = _source_code_location(job, producer)
    if location is not None:
        facets["sourceCodeLocation"] = location
    if job.description:
        # Dagster renders asset descriptions as Markdown.
        facets["documentation"] = _facet(
            _DOCUMENTATION,
            producer,
            description=redact_text(job.description),
            contentType="text/markdown",
        )
    owners = _unique(job.owners)
    if owners:
        facets["ownership"] = _facet(
            _OWNERSHIP, producer, owners=[_owner(owner) for owner in owners]
        )
    if job.code_version:
        facets["tags"] = _facet(
            _JOB_TAGS,
            producer,
            tags=[{"key": CODE_VERSION_TAG, "value": job.code_version, "source": _TAG_SOURCE}],
        )
    return facets


def _owner(owner: str) -> dict[str, str]:
    """Dagster owners are `team:name` or e-mail addresses."""
    if owner.startswith("team:") and owner[len("team:") :]:
        return {"name": owner[len("team:") :], "type": "team"}
    if re.fullmatch(r"[^@\s]+@[^@\s]+", owner):
        return {"name": owner, "type": "user"}
    return {"name": owner}


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
    return _facet(
        _SOURCE_CODE_LOCATION,
        producer,
        type=kind,
        url=url,
        repoUrl=repo,
        path=path,
        version=job.git_commit or None,
        branch=job.git_branch or None,
    )


# ------------------------------------------------------------------------------- datasets


class _Names:
    """(namespace, name) of column-lineage sources, each ref located once; a source inside a
    partitioned input (a partition's ref or path) is named by that input's root, so column
    lineage and the inputs list name one dataset by one identity."""

    def __init__(self, locate: Callable[[str], str], inputs: Sequence[DatasetInfo] = ()) -> None:
        self._locate = locate
        self._refs: dict[str, tuple[str, str]] = {}
        #: (namespace, name) of each partitioned input's root
        self._roots: list[tuple[str, str]] = []
        for info in inputs:
            if info.partitions:
                root = dataset_name(info.location)
                self._roots.append(root)
                if info.ref:
                    self._refs[info.ref] = root
                    for part in info.partitions:
                        self._refs[f"{info.ref}/{part.subpath}"] = root

    def of_source(self, source: Mapping[str, Any], where: str) -> tuple[str, str]:
        ref = source.get("ref")
        if isinstance(ref, str) and ref:
            if ref not in self._refs:
                self._refs[ref] = self._rooted(dataset_name(self._locate(ref)))
            return self._refs[ref]
        location = source.get("location")
        if isinstance(location, str) and location:
            return self._rooted(dataset_name(location))
        raise EventBuildError(f"{where}: a column-lineage source has neither a ref nor a location")

    def _rooted(self, name: tuple[str, str]) -> tuple[str, str]:
        for namespace, root in self._roots:
            if name[0] == namespace and (
                name[1] == root or name[1].startswith(root.rstrip("/") + "/")
            ):
                return namespace, root
        return name


def dataset_version(info: DatasetInfo) -> str | None:
    """The version of what an event's dataset names: the whole dataset's, else, for partitions,
    the one partition's version, or for several partitions (an input reading many) a digest of
    each partition's subpath and version, so that another set or version of any partition is
    another dataset version; None when a partition's version is unknown."""
    if info.version or not info.partitions:
        return info.version or None
    if len(info.partitions) == 1:
        return info.partitions[0].version or None
    if any(not part.version for part in info.partitions):
        return None
    pairs = sorted((part.subpath, part.version or "") for part in info.partitions)
    return "partitions:" + hashlib.sha256(orjson.dumps(pairs)).hexdigest()[:32]


def _condition(partitions: Sequence[PartitionInfo]) -> dict[str, Any]:
    """A PartitionSubsetCondition: each partition by its key (`identifier`) and its
    dimensions: the `column=value` folders of a Hive-style subpath, else `partition`: key."""
    listed = []
    for part in partitions:
        segments = part.subpath.split("/")
        hive = [_HIVE_SEGMENT.fullmatch(segment) for segment in segments]
        dimensions = (
            {m[1]: m[2] for m in hive if m is not None}
            if all(hive)
            else {"partition": part.identifier}
        )
        listed.append({"identifier": part.identifier, "dimensions": dimensions})
    return {"type": "partition", "partitions": listed}


def _dataset_facets(info: DatasetInfo, job: JobInfo, producer: str) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    version = dataset_version(info)
    if version:
        facets["version"] = _facet(_DATASET_VERSION, producer, datasetVersion=version)
    if info.ref:
        facets["symlinks"] = _facet(
            _SYMLINKS,
            producer,
            identifiers=[
                {
                    "namespace": workspace_namespace(job.namespace),
                    "name": info.ref,
                    "type": REF_SYMLINK_TYPE,
                }
            ],
        )
    return facets


def _input(info: DatasetInfo, job: JobInfo, producer: str) -> dict[str, Any]:
    namespace, name = dataset_name(info.location)
    facets = _dataset_facets(info, job, producer)
    if info.schema:
        facets["schema"] = orjson.loads(_schema_facet_json(info.schema, producer))
    dataset: dict[str, Any] = {"namespace": namespace, "name": name, "facets": facets}
    if info.partitions:
        dataset["inputFacets"] = {
            SUBSET_FACET: _facet(
                _INPUT_SUBSET, producer, inputCondition=_condition(info.partitions)
            )
        }
    return dataset


def _output(info: OutputInfo, job: JobInfo, names: _Names, producer: str) -> dict[str, Any]:
    namespace, name = dataset_name(info.dataset.location)
    facets = _dataset_facets(info.dataset, job, producer)
    if info.schema:
        facets["schema"] = orjson.loads(_schema_facet_json(info.schema, producer))
    lineage = _column_lineage(info, names, f"asset '{job.name}', output {name}", producer)
    if lineage is not None:
        facets["columnLineage"] = lineage
    facets["storage"] = _facet(
        _STORAGE, producer, storageLayer="file", fileFormat=info.file_format or None
    )
    output: dict[str, Any] = {"namespace": namespace, "name": name, "facets": facets}
    output_facets: dict[str, Any] = {}
    if info.rows is not None or info.size_bytes is not None:
        output_facets["outputStatistics"] = _facet(
            _OUTPUT_STATISTICS, producer, rowCount=info.rows, size=info.size_bytes
        )
    if info.dataset.partitions:
        output_facets[SUBSET_FACET] = _facet(
            _OUTPUT_SUBSET, producer, outputCondition=_condition(info.dataset.partitions)
        )
    if output_facets:
        output["outputFacets"] = output_facets
    return output


@functools.lru_cache(maxsize=1024)
def _schema_facet_json(schema: tuple[tuple[str, str, bool], ...], producer: str) -> bytes:
    """An output's schema facet as JSON, built once per schema (as the job's facets are)."""
    return orjson.dumps(
        _facet(
            _SCHEMA,
            producer,
            fields=[
                schema_field(column, spark_type, position)
                for position, (column, spark_type, _nullable) in enumerate(schema, 1)
            ],
        )
    )


# ------------------------------------------------------------------------ column lineage


def _column_lineage(
    info: OutputInfo, names: _Names, where: str, producer: str
) -> dict[str, Any] | None:
    """`dws/column_lineage` as the facet: one input field per source column, with all the
    ways (transformations) the output depends on it; columns with no source are left out,
    as OpenLineage's Spark integration does. Whole-dataset sources (filters, joins, group-bys)
    go to the facet's `dataset` list."""
    recorded = info.column_lineage
    if not recorded:
        return None
    columns = recorded.get("columns") or {}
    if not isinstance(columns, Mapping):
        raise EventBuildError(
            f"{where}: column lineage 'columns' must map output columns to "
            f"sources, got {type(columns).__name__}"
        )
    fields: dict[str, Any] = {}
    for column, sources in columns.items():
        input_fields = _input_fields(sources, names, f"{where}, column {column!r}")
        if input_fields:
            fields[str(column)] = {"inputFields": input_fields}
    dataset = _input_fields(recorded.get("dataset") or [], names, f"{where}, dataset sources")
    if not fields and not dataset:
        return None
    return _facet(_COLUMN_LINEAGE, producer, fields=fields, dataset=dataset)


def _input_fields(sources: Any, names: _Names, where: str) -> list[dict[str, Any]]:
    if not isinstance(sources, Sequence) or isinstance(sources, str | bytes):
        raise EventBuildError(f"{where}: sources must be a list, got {type(sources).__name__}")
    grouped: dict[tuple[str, str, str], dict[tuple[str, str | None, str | None], None]] = {}
    for source in sources:
        if not isinstance(source, Mapping):
            raise EventBuildError(f"{where}: a source must be a mapping, got {source!r}")
        column = source.get("column")
        if not isinstance(column, str) or not column:
            raise EventBuildError(f"{where}: source {dict(source)!r} names no column")
        kind = str(source.get("kind", "")).upper()
        if kind not in _KINDS:
            raise EventBuildError(
                f"{where}: source kind {source.get('kind')!r} is not DIRECT or INDIRECT"
            )
        subtype = source.get("subtype")
        description = source.get("description")
        namespace, name = names.of_source(source, where)
        transformation = (
            kind,
            str(subtype).upper() if subtype else None,
            str(description) if description else None,
        )
        grouped.setdefault((namespace, name, column), {})[transformation] = None
    return [
        {
            "namespace": namespace,
            "name": name,
            "field": column,
            "transformations": [
                _transformation(*transformation) for transformation in transformations
            ],
        }
        for (namespace, name, column), transformations in grouped.items()
    ]


def _transformation(kind: str, subtype: str | None, description: str | None) -> dict[str, Any]:
    transformation: dict[str, Any] = {"type": kind}
    if subtype is not None:
        transformation["subtype"] = subtype
    if description is not None:
        transformation["description"] = description
    transformation["masking"] = False
    return transformation


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
