"""The datasets of an asset's RunEvents: inputs and outputs with their facets (version,
workspace ref as symlink, schema, storage, statistics, partitions read or written) and the
column lineage of each output, whose sources are named as the inputs are.

A dataset written by an asset is described as the asset is, which is what catalogs show and
search datasets by: its outputs carry `documentation` (the description), `ownership` (the
Dagster owners) and `tags` (the Dagster tags and kinds), and wherever else the dataset is
named (an input) it carries the `documentation` too: Marquez sets a dataset's description from
every event naming it, so an input without one would erase it. A results asset's output
carries its metrics (`dws_metrics`, `custom_facets`). The dataset a checks run reads carries
the checks' verdicts as `dataQualityAssertions`, which the spec makes an input facet: a
verdict is about data a check read, never about data being written.

A partitioned asset is ONE dataset, named by its root (its ref above the partition folders),
as catalogs keep only each job's latest inputs and outputs: a dataset per partition folder would
be replaced at every run and left without its producer. The partitions written or read go in
the `subset` output/input facets (PartitionSubsetCondition). An asset's run writes one
partition, so an output's version is that partition's; an input reading several partitions
gets a digest of their (subpath, version) pairs, so reading another version of any partition
is reading another version of the dataset.

Kept apart from `events`, which builds the run and job facets and calls `input_dataset` and
`output_dataset`, so that what an event says of its datasets reads on its own; schema fields'
nested types are parsed in `spark_types`.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from dws_dagster.errors import EventBuildError
from dws_dagster.ol.custom_facets import METRICS_FACET
from dws_dagster.ol.facets import TAG_SOURCE, SchemaURL, facet, owner_entry
from dws_dagster.ol.model import (
    Assertion,
    DatasetAbout,
    DatasetInfo,
    JobInfo,
    OutputInfo,
    PartitionInfo,
)
from dws_dagster.ol.naming import dataset_name
from dws_dagster.ol.spark_types import schema_field
from dws_dagster.workspace.redaction import redact_text

__all__ = [
    "ASSERTIONS_FACET",
    "KIND_TAG",
    "REF_SYMLINK_TYPE",
    "SUBSET_FACET",
    "SourceNames",
    "dataset_version",
    "input_dataset",
    "output_dataset",
    "workspace_namespace",
]

#: symlink type of a dataset's workspace ref: the ref is the logical table, the path its storage
REF_SYMLINK_TYPE = "TABLE"
#: key of the subset facets among `inputFacets` / `outputFacets` (the spec file's property)
SUBSET_FACET = "subset"
#: key of the checks' verdicts among `inputFacets`
ASSERTIONS_FACET = "dataQualityAssertions"
#: key of a Dagster kind (`spark`, `parquet`) in a dataset's `tags` facet
KIND_TAG = "dagster/kind"
#: Dagster keeps each kind as a tag of its own too (`dagster/kind/spark`): left out of the
#: tags, which name each kind once, by `KIND_TAG`
_KIND_TAG_PREFIX = "dagster/kind/"
_HIVE_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.+)")
_KINDS = ("DIRECT", "INDIRECT")


def workspace_namespace(job_namespace: str) -> str:
    """Namespace of the workspace's logical datasets (refs), used in `symlinks` facets.

    Refs are names inside one dws workspace, which the Dagster deployment's job namespace
    identifies; `dws://` keeps them apart from storage namespaces (`file`, `s3://...`).
    """
    return f"dws://{job_namespace}"


class SourceNames:
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
    if info.about is not None and info.about.description:
        facets.update(orjson.loads(_documentation_json(info.about.description, producer)))
    version = dataset_version(info)
    if version:
        facets["version"] = facet(SchemaURL.DATASET_VERSION, producer, datasetVersion=version)
    if info.ref:
        facets["symlinks"] = facet(
            SchemaURL.SYMLINKS,
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


def input_dataset(info: DatasetInfo, job: JobInfo, producer: str) -> dict[str, Any]:
    """An event's input dataset: its identity, facets and the partitions read."""
    namespace, name = dataset_name(info.location)
    facets = _dataset_facets(info, job, producer)
    if info.schema:
        facets["schema"] = orjson.loads(_schema_facet_json(info.schema, producer))
    dataset: dict[str, Any] = {"namespace": namespace, "name": name, "facets": facets}
    input_facets: dict[str, Any] = {}
    if info.partitions:
        input_facets[SUBSET_FACET] = facet(
            SchemaURL.INPUT_SUBSET, producer, inputCondition=_condition(info.partitions)
        )
    if info.assertions:
        input_facets[ASSERTIONS_FACET] = facet(
            SchemaURL.DATA_QUALITY_ASSERTIONS,
            producer,
            assertions=[_assertion(item) for item in info.assertions],
        )
    if input_facets:
        dataset["inputFacets"] = input_facets
    return dataset


def _assertion(item: Assertion) -> dict[str, Any]:
    """One verdict: `assertion` (the check, as the spec's own producers name it) and `name`
    say the check's name, `success` whether it passed."""
    found: dict[str, Any] = {"assertion": item.name, "success": bool(item.success)}
    for key, value in (
        ("column", item.column),
        ("severity", item.severity),
        ("name", item.name),
        ("description", item.description),
    ):
        if value:
            found[key] = value
    return found


def output_dataset(
    info: OutputInfo, job: JobInfo, names: SourceNames, producer: str
) -> dict[str, Any]:
    """An event's output dataset: its identity, facets (column lineage sources named by
    `names`), statistics and the partition written."""
    namespace, name = dataset_name(info.dataset.location)
    facets = _dataset_facets(info.dataset, job, producer)
    if info.schema:
        facets["schema"] = orjson.loads(_schema_facet_json(info.schema, producer))
    lineage = _column_lineage(info, names, f"asset '{job.name}', output {name}", producer)
    if lineage is not None:
        facets["columnLineage"] = lineage
    facets["storage"] = facet(
        SchemaURL.STORAGE, producer, storageLayer="file", fileFormat=info.file_format or None
    )
    if info.dataset.about is not None:
        facets.update(orjson.loads(_owned_json(info.dataset.about, producer)))
    if info.metrics:
        facets[METRICS_FACET] = facet(
            SchemaURL.DWS_METRICS, producer, metrics=dict(_metrics(info.metrics))
        )
    output: dict[str, Any] = {"namespace": namespace, "name": name, "facets": facets}
    output_facets: dict[str, Any] = {}
    if info.rows is not None or info.size_bytes is not None:
        output_facets["outputStatistics"] = facet(
            SchemaURL.OUTPUT_STATISTICS, producer, rowCount=info.rows, size=info.size_bytes
        )
    if info.dataset.partitions:
        output_facets[SUBSET_FACET] = facet(
            SchemaURL.OUTPUT_SUBSET, producer, outputCondition=_condition(info.dataset.partitions)
        )
    if output_facets:
        output["outputFacets"] = output_facets
    return output


@functools.lru_cache(maxsize=1024)
def _documentation_json(description: str, producer: str) -> bytes:
    """A dataset's `documentation` facet, built once per description (every event naming
    the dataset carries it)."""
    # Dagster renders asset descriptions as Markdown.
    return orjson.dumps(
        {
            "documentation": facet(
                SchemaURL.DATASET_DOCUMENTATION,
                producer,
                description=redact_text(description),
                contentType="text/markdown",
            )
        }
    )


@functools.lru_cache(maxsize=1024)
def _owned_json(about: DatasetAbout, producer: str) -> bytes:
    """Who owns a dataset and how it is tagged (its Dagster tags and kinds), as the facets
    of the asset's output, built once per asset (as its job's facets are)."""
    facets: dict[str, Any] = {}
    owners = list(dict.fromkeys(about.owners))
    if owners:
        facets["ownership"] = facet(
            SchemaURL.DATASET_OWNERSHIP, producer, owners=[owner_entry(o) for o in owners]
        )
    tags = [
        {"key": key, "value": value, "source": TAG_SOURCE}
        for key, value in dict(about.tags).items()
        if not key.startswith(_KIND_TAG_PREFIX)
    ]
    tags += [
        {"key": KIND_TAG, "value": kind, "source": TAG_SOURCE}
        for kind in sorted(dict.fromkeys(about.kinds))
    ]
    if tags:
        facets["tags"] = facet(SchemaURL.DATASET_TAGS, producer, tags=tags)
    return orjson.dumps(facets)


def _metrics(
    metrics: Sequence[tuple[str, Any]],
) -> Iterator[tuple[str, float | int | str | bool]]:
    """Metrics as the facet's schema has them: numbers, texts and booleans as they are, any
    other value (a list, a mapping, a number JSON cannot hold) as its JSON text."""
    for name, value in metrics:
        if isinstance(value, bool | str) or (
            isinstance(value, int | float) and math.isfinite(value)
        ):
            yield str(name), value
        else:
            yield str(name), orjson.dumps(value, default=str).decode()


@functools.lru_cache(maxsize=1024)
def _schema_facet_json(schema: tuple[tuple[str, str, bool], ...], producer: str) -> bytes:
    """An output's schema facet as JSON, built once per schema (as the job's facets are)."""
    return orjson.dumps(
        facet(
            SchemaURL.SCHEMA,
            producer,
            fields=[
                schema_field(column, spark_type, position)
                for position, (column, spark_type, _nullable) in enumerate(schema, 1)
            ],
        )
    )


# ------------------------------------------------------------------------ column lineage


def _column_lineage(
    info: OutputInfo, names: SourceNames, where: str, producer: str
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
    return facet(SchemaURL.COLUMN_LINEAGE, producer, fields=fields, dataset=dataset)


def _input_fields(sources: Any, names: SourceNames, where: str) -> list[dict[str, Any]]:
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
