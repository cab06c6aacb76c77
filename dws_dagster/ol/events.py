"""OpenLineage RunEvents for one asset's run, built from the plain data of `model`.

Pure functions over the openlineage-python classes: no Dagster, no Spark, no I/O (the only
outside call is `locate`, which the caller supplies), so every event can be checked against
the official JSON Schemas in tests. One OpenLineage job per asset, one OpenLineage run per
(Dagster run, asset, partition); the Dagster run is the parent and the root of that run.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit
from uuid import UUID

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    DatasetFacet,
    JobFacet,
    OutputDatasetFacet,
    RunFacet,
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

from .. import __version__
from ..errors import DwsError
from .model import AssetRunEvent, DatasetInfo, JobInfo, OutputInfo, RunInfo
from .naming import dataset_name

__all__ = [
    "INTEGRATION",
    "PARTITION_TAG",
    "PRODUCER",
    "EventBuildError",
    "build_run_event",
    "event_to_dict",
    "ol_run_id",
    "spark_type_fields",
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
_KNOWN_FORGES = {"github.com": "/blob/", "gitlab.com": "/-/blob/", "bitbucket.org": "/src/"}


class EventBuildError(DwsError, ValueError):
    """The data given for an asset's run cannot become a valid OpenLineage event."""


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
    created = _aware(run.dagster_run_created, "RunInfo.dagster_run_created")
    data = json.dumps([run.dagster_run_id, job_name, run.partition]).encode("utf-8")
    return str(generate_static_uuid(created, data))


def build_run_event(event: AssetRunEvent, *, locate: Callable[[str], str],
                    producer: str = PRODUCER) -> RunEvent:
    """The OpenLineage RunEvent of one state change of one asset's run.

    `locate(ref)` gives the location of a workspace ref; it is called only for column-lineage
    sources that name a ref but no location, and its errors propagate. Optional facets are
    emitted only when their required fields can be filled, so every event validates.
    """
    try:
        state = RunState(event.kind)
    except ValueError:
        raise EventBuildError(
            f"asset '{event.job.name}': event kind {event.kind!r} is not one of "
            "START, COMPLETE, FAIL, ABORT"
        ) from None
    event_time = _iso(event.event_time, "AssetRunEvent.event_time")
    run_id = ol_run_id(event.run, event.job.name)
    names = _Names(locate)
    return RunEvent(
        eventType=state,
        eventTime=event_time,
        run=Run(runId=run_id, facets=_run_facets(event, producer)),
        job=Job(namespace=event.job.namespace, name=event.job.name,
                facets=_job_facets(event.job, producer)),
        inputs=[_input(info, event.job, producer) for info in event.inputs],
        outputs=[_output(info, event.job, names, producer) for info in event.outputs],
        producer=producer,
    )


def event_to_dict(event: RunEvent) -> dict[str, Any]:
    """JSON-ready dict of an event (no None values, enums as strings), as transports send it.

    The same dict as the client's `Serde.to_dict` (attrs → dicts, then nulls and enums
    removed), in one pass instead of two: the lineage sensor renders every event it spools.
    """
    return _plain(event)


_SCALARS = frozenset({str, int, float, bool})
#: Field names of attrs classes, None for other classes: `attr.has` and `attr.fields` per
#: value cost more than converting it.
_ATTRS_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _attrs_fields(cls: type) -> tuple[str, ...] | None:
    try:
        return _ATTRS_FIELDS[cls]
    except KeyError:
        names = tuple(f.name for f in attr.fields(cls)) if attr.has(cls) else None
        _ATTRS_FIELDS[cls] = names
        return names


def _plain(value: Any) -> Any:
    """`Serde.remove_nulls_and_enums(attr.asdict(value))`, in one recursive pass (scalars,
    most of an event's leaves, are kept without a call)."""
    cls = type(value)
    if cls in _SCALARS or value is None:
        return value
    if cls is list or cls is tuple:
        out_list = []
        for item in value:
            if item is None:
                continue
            if type(item) not in _SCALARS:
                item = _plain(item)
                if item is None or item == {}:
                    continue
            out_list.append(item)
        return out_list
    fields = _attrs_fields(cls)
    if fields is not None:
        out = {}
        for name in fields:
            item = getattr(value, name)
            if item is None:
                continue
            if type(item) not in _SCALARS:
                item = _plain(item)
                if item is None:
                    continue
            out[name] = item
        return out
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            plain = _plain(item)
            if plain is not None:
                out[key] = plain
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, list | tuple | set | frozenset):
        return _plain(list(value))
    if cls.__name__ == "int64":  # numpy
        return int(value)
    return value


# ------------------------------------------------------------------------------------ run


def _run_facets(event: AssetRunEvent, producer: str) -> dict[str, RunFacet]:
    run, job = event.run, event.job
    facets: dict[str, RunFacet] = {"parent": _parent(run, job, producer)}
    if run.dagster_version:
        facets["processing_engine"] = processing_engine_run.ProcessingEngineRunFacet(
            version=run.dagster_version, name="dagster", openlineageAdapterVersion=__version__,
            producer=producer)
    if run.nominal_start is not None:
        end = run.nominal_end
        facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=_iso(run.nominal_start, "RunInfo.nominal_start"),
            nominalEndTime=_iso(end, "RunInfo.nominal_end") if end is not None else None,
            producer=producer)
    dependencies = _unique(run.dependencies)
    if dependencies:
        facets["jobDependencies"] = job_dependencies_run.JobDependenciesRunFacet(
            upstream=[job_dependencies_run.JobDependency(
                job=job_dependencies_run.JobIdentifier(namespace=job.namespace, name=name),
                dependency_type="IMPLICIT_DEPENDENCY") for name in dependencies],
            downstream=None, producer=producer)
    if event.kind == "FAIL" and event.error_message:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=event.error_message, programmingLanguage="python",
            stackTrace=event.stack_trace or None, producer=producer)
    tags = [(PARTITION_TAG, run.partition), (SPARK_VERSION_TAG, run.spark_version)]
    if any(value is not None for _key, value in tags):
        facets["tags"] = tags_run.TagsRunFacet(
            tags=[tags_run.TagsRunFacetFields(key=key, value=value, source=_TAG_SOURCE)
                  for key, value in tags if value is not None],
            producer=producer)
    return facets


def _parent(run: RunInfo, job: JobInfo, producer: str) -> parent_run.ParentRunFacet:
    """The Dagster run: parent of the asset's run and root of the hierarchy."""
    try:
        dagster_run_id = str(UUID(run.dagster_run_id))
    except (ValueError, TypeError):
        raise EventBuildError(
            f"asset '{job.name}': Dagster run id {run.dagster_run_id!r} is not a UUID; "
            "pass the run's own id (DagsterRun.run_id)"
        ) from None
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=dagster_run_id, facets=None),
        job=parent_run.Job(namespace=job.namespace, name=run.dagster_job, facets=None),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=dagster_run_id, facets=None),
            job=parent_run.RootJob(namespace=job.namespace, name=run.dagster_job, facets=None)),
        producer=producer)


# ------------------------------------------------------------------------------------ job


def _job_facets(job: JobInfo, producer: str) -> dict[str, JobFacet]:
    """The job's facets, built once per job: every event of an asset carries the same ones."""
    return dict(_cached_job_facets(job, producer))


@functools.lru_cache(maxsize=1024)
def _cached_job_facets(job: JobInfo, producer: str) -> dict[str, JobFacet]:
    facets: dict[str, JobFacet] = {"jobType": job_type_job.JobTypeJobFacet(
        processingType="BATCH", integration=INTEGRATION, jobType="ASSET", producer=producer)}
    if job.source_code:
        facets["sourceCode"] = source_code_job.SourceCodeJobFacet(
            language="python", sourceCode=job.source_code, producer=producer)
    location = _source_code_location(job, producer)
    if location is not None:
        facets["sourceCodeLocation"] = location
    if job.description:
        # Dagster renders asset descriptions as Markdown.
        facets["documentation"] = documentation_job.DocumentationJobFacet(
            description=job.description, contentType="text/markdown", producer=producer)
    owners = _unique(job.owners)
    if owners:
        facets["ownership"] = ownership_job.OwnershipJobFacet(
            owners=[_owner(owner) for owner in owners], producer=producer)
    if job.code_version:
        facets["tags"] = tags_job.TagsJobFacet(
            tags=[tags_job.TagsJobFacetFields(key=CODE_VERSION_TAG, value=job.code_version,
                                              source=_TAG_SOURCE)],
            producer=producer)
    return facets


def _owner(owner: str) -> ownership_job.Owner:
    """Dagster owners are `team:name` or e-mail addresses."""
    if owner.startswith("team:") and owner[len("team:"):]:
        return ownership_job.Owner(name=owner[len("team:"):], type="team")
    if re.fullmatch(r"[^@\s]+@[^@\s]+", owner):
        return ownership_job.Owner(name=owner, type="user")
    return ownership_job.Owner(name=owner)


def _source_code_location(job: JobInfo, producer: str
                          ) -> source_code_location_job.SourceCodeLocationJobFacet | None:
    """Where the asset's code is kept: `url` (required, a URI) is the file's page on a known
    forge, else the repository; without a repository, the absolute file itself."""
    repo = _repo_uri(job.git_url) if job.git_url else None
    path = job.source_path or None
    if repo is not None:
        revision = job.git_commit or job.git_branch
        url = _forge_file_url(repo, revision, path) or repo
        kind = "git"
    elif path is not None and os.path.isabs(path):
        url = _path_uri(path)
        kind = "git" if job.git_commit else "file"
    else:
        return None
    return source_code_location_job.SourceCodeLocationJobFacet(
        type=kind, url=url, repoUrl=repo, path=path, version=job.git_commit or None,
        branch=job.git_branch or None, producer=producer)


_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^/:]+):(?P<path>(?!//).*)$")
_URI_SAFE = "/:@-._~!$&'()*+,;=%"


def _repo_uri(git_url: str) -> str | None:
    """The repository as a URI without secrets: scp-like `git@host:org/r.git` becomes
    `ssh://git@host/org/r.git`; http(s) loses all user-info (tokens are sent as user names),
    other schemes lose passwords; a local path becomes a `file://` URI."""
    text = git_url.strip()
    if os.path.isabs(text):
        return _path_uri(text)
    parts = urlsplit(text)
    if parts.scheme.lower() == "file":
        return _path_uri(parts.path) if parts.path else None
    match = _SCP_LIKE.match(text) if "://" not in text else None
    if match:
        user = f"{match['user']}@" if match["user"] else ""
        path = match["path"].lstrip("/")
        return f"ssh://{user}{match['host']}/{quote(path, safe=_URI_SAFE)}"
    if not parts.hostname:
        return None
    userinfo, _at, host_port = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    keep_user = bool(user) and ":" not in userinfo and parts.scheme not in ("http", "https")
    authority = f"{user}@{host_port}" if keep_user else host_port
    return f"{parts.scheme.lower()}://{authority}{quote(parts.path, safe=_URI_SAFE)}"


def _forge_file_url(repo: str, revision: str | None, path: str | None) -> str | None:
    """The https page of a file at a revision, on GitHub, GitLab and Bitbucket."""
    if not revision or not path or os.path.isabs(path):
        return None
    parts = urlsplit(repo)
    host = (parts.hostname or "").lower()
    marker = _KNOWN_FORGES.get(host)
    if marker is None or parts.scheme not in ("https", "http", "ssh", "git"):
        return None
    project = parts.path.removesuffix("/").removesuffix(".git").strip("/")
    if not project:
        return None
    file_path = quote(PurePosixPath(path).as_posix().lstrip("/"), safe=_URI_SAFE)
    return f"https://{host}/{project}{marker}{quote(revision, safe='')}/{file_path}"


def _path_uri(path: str) -> str:
    return "file://" + quote(os.path.normpath(path), safe=_URI_SAFE)


# ------------------------------------------------------------------------------- datasets


class _Names:
    """(namespace, name) of column-lineage sources, each ref located once."""

    def __init__(self, locate: Callable[[str], str]) -> None:
        self._locate = locate
        self._refs: dict[str, tuple[str, str]] = {}

    def of_source(self, source: Mapping[str, Any], where: str) -> tuple[str, str]:
        ref = source.get("ref")
        if isinstance(ref, str) and ref:
            if ref not in self._refs:
                self._refs[ref] = dataset_name(self._locate(ref))
            return self._refs[ref]
        location = source.get("location")
        if isinstance(location, str) and location:
            return dataset_name(location)
        raise EventBuildError(f"{where}: a column-lineage source has neither a ref nor a location")


def _dataset_facets(info: DatasetInfo, job: JobInfo, producer: str) -> dict[str, DatasetFacet]:
    facets: dict[str, DatasetFacet] = {}
    if info.version:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=info.version, producer=producer)
    if info.ref:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[symlinks_dataset.Identifier(
                namespace=workspace_namespace(job.namespace), name=info.ref,
                type=REF_SYMLINK_TYPE)],
            producer=producer)
    return facets


def _input(info: DatasetInfo, job: JobInfo, producer: str) -> InputDataset:
    namespace, name = dataset_name(info.location)
    return InputDataset(namespace=namespace, name=name,
                        facets=_dataset_facets(info, job, producer), inputFacets=None)


def _output(info: OutputInfo, job: JobInfo, names: _Names, producer: str) -> OutputDataset:
    namespace, name = dataset_name(info.dataset.location)
    facets = _dataset_facets(info.dataset, job, producer)
    if info.schema:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[_schema_field(column, spark_type, position)
                    for position, (column, spark_type, _nullable) in enumerate(info.schema, 1)],
            producer=producer)
    lineage = _column_lineage(info, names, f"asset '{job.name}', output {name}", producer)
    if lineage is not None:
        facets["columnLineage"] = lineage
    facets["storage"] = storage_dataset.StorageDatasetFacet(
        storageLayer="file", fileFormat=info.file_format or None, producer=producer)
    output_facets: dict[str, OutputDatasetFacet] = {}
    if info.rows is not None or info.size_bytes is not None:
        output_facets["outputStatistics"] = (
            output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=info.rows, size=info.size_bytes, producer=producer))
    return OutputDataset(namespace=namespace, name=name, facets=facets,
                         outputFacets=output_facets or None)


# ------------------------------------------------------------------------ column lineage


def _column_lineage(info: OutputInfo, names: _Names, where: str, producer: str
                    ) -> column_lineage_dataset.ColumnLineageDatasetFacet | None:
    """`dws/column_lineage` as the facet: one input field per source column, with all the
    ways (transformations) the output depends on it; columns with no source are left out,
    as OpenLineage's Spark integration does. Whole-dataset sources (filters, joins, group-bys)
    go to the facet's `dataset` list."""
    recorded = info.column_lineage
    if not recorded:
        return None
    columns = recorded.get("columns") or {}
    if not isinstance(columns, Mapping):
        raise EventBuildError(f"{where}: column lineage 'columns' must map output columns to "
                              f"sources, got {type(columns).__name__}")
    fields: dict[str, column_lineage_dataset.Fields] = {}
    for column, sources in columns.items():
        input_fields = _input_fields(sources, names, f"{where}, column {column!r}")
        if input_fields:
            fields[str(column)] = column_lineage_dataset.Fields(inputFields=input_fields)
    dataset = _input_fields(recorded.get("dataset") or [], names, f"{where}, dataset sources")
    if not fields and not dataset:
        return None
    return column_lineage_dataset.ColumnLineageDatasetFacet(
        fields=fields, dataset=dataset, producer=producer)


def _input_fields(sources: Any, names: _Names, where: str
                  ) -> list[column_lineage_dataset.InputField]:
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
                f"{where}: source kind {source.get('kind')!r} is not DIRECT or INDIRECT")
        subtype = source.get("subtype")
        description = source.get("description")
        namespace, name = names.of_source(source, where)
        transformation = (kind, str(subtype).upper() if subtype else None,
                          str(description) if description else None)
        grouped.setdefault((namespace, name, column), {})[transformation] = None
    return [
        column_lineage_dataset.InputField(
            namespace=namespace, name=name, field=column,
            transformations=[column_lineage_dataset.Transformation(
                type=kind, subtype=subtype, description=description, masking=False)
                for kind, subtype, description in transformations])
        for (namespace, name, column), transformations in grouped.items()
    ]


# -------------------------------------------------------------------------------- schema


class _Unparsable(Exception):
    """A type string this parser does not follow (e.g. Spark's truncated `... N more`)."""


def spark_type_fields(spark_type: str) -> list[schema_dataset.SchemaDatasetFacetFields] | None:
    """Nested fields of a Spark simple type string, or None when it has no struct inside.

    `struct<a:int,b:string>` gives fields a and b; `array<struct<...>>` an `_element` field and
    `map<k,struct<...>>` `key` and `value` fields, as OpenLineage's Spark integration names
    them; a string this does not parse (Spark truncates wide structs) gives None.
    """
    try:
        _text, children, end = _parse_type(spark_type, 0)
    except (_Unparsable, IndexError, ValueError):
        return None
    if end != len(spark_type):
        return None
    return children


def _schema_field(column: str, spark_type: str, position: int | None
                  ) -> schema_dataset.SchemaDatasetFacetFields:
    return schema_dataset.SchemaDatasetFacetFields(
        name=column, type=spark_type, ordinal_position=position,
        fields=spark_type_fields(spark_type))


def _parse_type(text: str, start: int
                ) -> tuple[str, list[schema_dataset.SchemaDatasetFacetFields] | None, int]:
    """(type string, nested fields or None, end index) of the type starting at `start`."""
    if text.startswith("struct<", start):
        return _parse_struct(text, start)
    if text.startswith("array<", start):
        element, children, end = _parse_type(text, start + len("array<"))
        end = _expect(text, end, ">")
        nested = [_nested("_element", element, children)] if children is not None else None
        return text[start:end], nested, end
    if text.startswith("map<", start):
        key, key_children, end = _parse_type(text, start + len("map<"))
        end = _expect(text, end, ",")
        value, value_children, end = _parse_type(text, end)
        end = _expect(text, end, ">")
        nested = None
        if key_children is not None or value_children is not None:
            nested = [_nested("key", key, key_children), _nested("value", value, value_children)]
        return text[start:end], nested, end
    depth, end = 0, start
    while end < len(text):
        char = text[end]
        if char in "(<":
            depth += 1
        elif char in ")>" and depth:
            depth -= 1
        elif char in ",>" and not depth:
            break
        end += 1
    if end == start:
        raise _Unparsable(text)
    return text[start:end], None, end


def _parse_struct(text: str, start: int
                  ) -> tuple[str, list[schema_dataset.SchemaDatasetFacetFields], int]:
    position = start + len("struct<")
    fields: list[schema_dataset.SchemaDatasetFacetFields] = []
    if text.startswith(">", position):
        return text[start:position + 1], fields, position + 1
    while True:
        colon = text.index(":", position)
        name = text[position:colon]
        if not name or any(char in name for char in "<>,"):
            raise _Unparsable(text)
        field_type, children, position = _parse_type(text, colon + 1)
        fields.append(schema_dataset.SchemaDatasetFacetFields(
            name=name, type=field_type, ordinal_position=len(fields) + 1, fields=children))
        if text.startswith(",", position):
            position += 1
            continue
        end = _expect(text, position, ">")
        return text[start:end], fields, end


def _nested(name: str, spark_type: str,
            children: list[schema_dataset.SchemaDatasetFacetFields] | None
            ) -> schema_dataset.SchemaDatasetFacetFields:
    return schema_dataset.SchemaDatasetFacetFields(name=name, type=spark_type, fields=children)


def _expect(text: str, position: int, char: str) -> int:
    if not text.startswith(char, position):
        raise _Unparsable(text)
    return position + 1


# ----------------------------------------------------------------------------------- time


def _aware(value: dt.datetime, what: str) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        raise EventBuildError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise EventBuildError(
            f"{what} ({value.isoformat()}) has no time zone; give an aware datetime "
            "(e.g. datetime.fromtimestamp(ts, tz=timezone.utc)) so ids and times do not "
            "depend on the machine's zone")
    return value


def _iso(value: dt.datetime, what: str) -> str:
    """RFC 3339 in UTC, as the spec's `date-time` format wants."""
    return _aware(value, what).astimezone(dt.UTC).isoformat()


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
