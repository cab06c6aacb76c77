"""What the lineage sensor knows about one asset's run, as plain data.

The sensor fills these from Dagster (event log, asset definitions, materialization metadata);
`events.py` (with `dataset_facets.py`) turns them into OpenLineage events, raising
`EventBuildError` (defined here so the builders and `timestamps`, which checks their times,
share it without importing each other).
Nothing here imports Dagster or Spark, so the event builders are testable on their own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal["START", "COMPLETE", "FAIL", "ABORT"]


@dataclass(frozen=True)
class PartitionInfo:
    """One partition of a partitioned asset's data: where it lies below the asset's root."""

    #: the Dagster partition key (or, for data read by path, the subpath)
    identifier: str
    #: the partition's folder below the asset's root, e.g. `2024-01-01` or `date=2024-01-01`
    subpath: str
    version: str | None = None


@dataclass(frozen=True)
class Assertion:
    """One verdict of a data-quality check on a dataset (a Dagster asset check evaluation)."""

    #: the check's name
    name: str
    success: bool
    #: `error` or `warn` (Dagster's check severity)
    severity: str | None = None
    #: the column the check is about; None: the whole dataset
    column: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class DatasetAbout:
    """What describes a dataset in a catalog, which people search datasets by: the description,
    owners, tags and kinds of the asset that writes it."""

    description: str | None = None
    #: Dagster asset owners: e-mail addresses or `team:name`
    owners: tuple[str, ...] = ()
    #: the asset's Dagster tags (key, value), its kinds apart
    tags: tuple[tuple[str, str], ...] = ()
    #: the asset's Dagster kinds (`spark`, `parquet`)
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset an asset reads or writes.

    `location` is where the data lives: an absolute local path, a `file://` URI, or a URI such
    as `s3a://bucket/key`, `hdfs://host:8020/path`, `abfss://container@account.dfs.core.windows.net/p`;
    `ref` is the workspace's logical name for it (`resource/subpath`), None outside the workspace.
    """

    location: str
    ref: str | None = None
    version: str | None = None
    #: for a partitioned asset, `location` and `ref` name its root and these the partitions
    #: read or written (the subset facets' conditions); empty: the whole dataset
    partitions: tuple[PartitionInfo, ...] = ()
    #: the columns of an input as it was read (name, Spark simple type, nullable)
    schema: tuple[tuple[str, str, bool], ...] = ()
    #: the verdicts of the checks of an input (the dataset a checks run reads)
    assertions: tuple[Assertion, ...] = ()
    #: what describes the dataset (None: not an asset's, or unknown)
    about: DatasetAbout | None = None


@dataclass(frozen=True)
class OutputInfo:
    """An asset's output with what its materialization recorded."""

    dataset: DatasetInfo
    #: (column name, Spark simple type such as `bigint` or `array<string>`, nullable)
    schema: tuple[tuple[str, str, bool], ...] = ()
    rows: int | None = None
    size_bytes: int | None = None
    #: parquet, csv, json or orc
    file_format: str | None = None
    #: the `dws/column_lineage` metadata as the IO manager recorded it:
    #: {"columns": {out_col: [source, ...]}, "dataset": [source, ...], "complete": bool}, each
    #: source {"ref": str|None, "column": str, "kind": "DIRECT"|"INDIRECT", "subtype": str,
    #: "location"?: str (when ref is None), "asset"?: str}
    column_lineage: Mapping[str, Any] | None = None
    #: a results asset's metrics (name, number, text or boolean), as `results.json` has them
    metrics: tuple[tuple[str, float | int | str | bool], ...] = ()


@dataclass(frozen=True)
class JobInfo:
    """The OpenLineage job of one asset, or of its checks (`checks`): one job each, named by
    `job_names`."""

    namespace: str
    #: the asset key as a user string, e.g. `yellow_rides_hourly_forecast` or `taxi/raw`
    name: str
    description: str | None = None
    #: Dagster asset owners: e-mail addresses or `team:name`
    owners: tuple[str, ...] = ()
    #: the job of the asset's checks rather than of its materializations
    checks: bool = False
    #: source code of the asset function
    source_code: str | None = None
    #: file of the asset function: relative to the git repository root when known, else absolute
    source_path: str | None = None
    git_url: str | None = None
    git_commit: str | None = None
    git_branch: str | None = None
    code_version: str | None = None
    #: the git repository's folder: names the code as a `file` URL when it has no remote
    git_root: str | None = None


@dataclass(frozen=True)
class RunInfo:
    """The Dagster run an asset's OpenLineage run belongs to (its parent and root)."""

    dagster_run_id: str
    #: the Dagster job the run executes (e.g. `__ASSET_JOB` or a named asset job)
    dagster_job: str
    #: when the Dagster run was created: with the ids, makes the OpenLineage run id deterministic
    dagster_run_created: dt.datetime
    partition: str | None = None
    #: time window of a time-partition (nominal time)
    nominal_start: dt.datetime | None = None
    nominal_end: dt.datetime | None = None
    #: asset keys this asset depends on without loading their data (Dagster `deps=`)
    dependencies: tuple[str, ...] = ()
    dagster_version: str | None = None
    spark_version: str | None = None


@dataclass(frozen=True)
class AssetRunEvent:
    """One state change of one asset's run, to become one OpenLineage RunEvent."""

    kind: EventKind
    event_time: dt.datetime
    job: JobInfo
    run: RunInfo
    inputs: tuple[DatasetInfo, ...] = ()
    outputs: tuple[OutputInfo, ...] = ()
    error_message: str | None = None
    stack_trace: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
