"""A range of partitions written from one DataFrame in one Spark write, each partition swapped
into its own location with its own content version, as if each had been written on its own.

The whole range is written once to a hidden staging folder with `partitionBy` on a derived
column holding each row's partition *index* (the caller's expression; null: the row belongs to
no partition of the range). That column exists only for the write: `partitionBy` keeps it out
of the files, so each `index=i` folder holds exactly the columns of the DataFrame, as a
one-partition write does. Each partition's version is the one a one-partition write of the same
rows gives (`row_version.version_of_metrics`: the DataFrame's schema, the row count and the two
row-hash sums). For a range of a few partitions the sums are observed in the write pass, one
set per partition; observed metrics have no grouping, so each row feeds every partition's sums,
which stops paying beyond a few. Larger ranges are versioned by one grouped aggregation over
the rows written. Parquet and ORC give back exactly the values written, so their files are read
back with the DataFrame's schema, in groups of folders Spark lists on the driver (more at once
and Spark lists them with a job of its own). Other formats, and writes Spark partitions
further, do not; their rows are computed once and cached for the write and the aggregation
both, since a second run of the plan may give other rows. A partition with no
row becomes what a one-partition write of an empty DataFrame gives: a dataset with the schema
and no rows.

When asked (`read_files`), the file each row was read from is collected too (`row_files`), by
the job that reads the DataFrame's sources, so the caller can tell each partition the files
its rows came from.

Each partition's folder gets its marker (version, lineage record) and is then swapped into
place, one atomic rename each: a failure or crash part-way leaves every partition whole, old or
new. `RangeWriteError.written` tells the caller which partitions are new.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from dws_dagster.errors import RangeWriteError, RowsOutsideRangeError, StorageError
from dws_dagster.spark import locations, row_files, row_version, storage, version_marker
from dws_dagster.spark.session_kind import new_observation, sql_column
from dws_dagster.spark.sql_quoting import quoted_name
from dws_dagster.workspace.swap import STAGING_PREFIX, copy_data, recover, swap_into_place
from dws_dagster.workspace.trees import remove_tree
from dws_dagster.workspace.versions import content_version, data_size

#: The derived column the range is partitioned by while it is written (never in the files).
INDEX_COLUMN = "__dws_partition_index"
#: Formats whose files give back exactly the values written (so the versions can be computed
#: from them); CSV and JSON text may not (timestamps lose digits).
_EXACT_FORMATS = ("parquet", "orc")
#: Up to this many partitions, their versions are observed in the write pass (each row feeds
#: every partition's sums: 7 aggregates a partition); beyond, a second pass groups them.
_OBSERVED_PARTITIONS = 4
#: The row hashes, computed once per row for the observed per-partition sums (never in files).
_HASH_COLUMNS = ("__dws_row_hash", "__dws_row_rehash")
#: Spark lists up to this many paths on the driver; more, and it runs a Spark job to list them
#: (`spark.sql.sources.parallelPartitionDiscovery.threshold`, whose default this is).
_LISTED_ON_DRIVER = 32


@dataclass(frozen=True)
class RangeTarget:
    """One partition of a range: its key, where it goes, where its replaced data is kept."""

    key: str
    location: str
    keep_old_as: str | None = None


@dataclass
class RangeResult:
    results: dict[str, storage.WriteResult] = field(default_factory=dict)


def write_range_atomic(
    df: DataFrame,
    targets: Sequence[RangeTarget],
    index: Column,
    *,
    staging_parent: str,
    fmt: str = "parquet",
    options: Mapping[str, Any] | None = None,
    partition_by: Sequence[str] | None = None,
    what: str = "output",
    lineage: Callable[[str, str, int], Mapping[str, Any]] | None = None,
    versioning: str = "rows",
    read_files: Callable[[Mapping[str, frozenset[str]]], None] | None = None,
) -> RangeResult:
    """Write the rows of `df` to the partitions `targets`: `index` gives each row the position
    of its partition in `targets` (null: none of them, which is refused before anything is
    swapped). `lineage(key, version, rows)` gives each partition's record, kept in its marker
    like `storage.write_atomic` keeps it. `read_files`, when given, is called once after the
    write and before any `lineage` call with {key: the local paths of the files its rows were
    read from} for each partition that got rows (a partition with none is left out); the
    caller checks first that `df`'s rows can be traced (`row_files.untraceable`). Local
    locations only."""
    if versioning not in storage.VERSIONINGS:
        raise StorageError(
            f"{what}: unknown versioning {versioning!r}; choose one of "
            f"{', '.join(storage.VERSIONINGS)}"
        )
    remote = [t.location for t in targets if not locations.is_local(t.location)]
    if remote or not locations.is_local(staging_parent):
        raise StorageError(
            f"{what}: a range of partitions is written in one step to local or mounted storage "
            f"only ({(remote or [staging_parent])[0]} is remote); give the asset "
            "BackfillPolicy.multi_run(1) to write one partition per run"
        )
    for reserved in (INDEX_COLUMN, row_files.FILE_COLUMN, *_HASH_COLUMNS):
        if reserved in df.columns:
            raise StorageError(f"{what}: column {reserved} is reserved; rename it")
    parent = locations.local_path(staging_parent)
    parent.mkdir(parents=True, exist_ok=True)
    recover(parent / "range")  # stale staging folders of crashed range writes
    staging = parent / f"{STAGING_PREFIX}range-{uuid.uuid4().hex}"
    result = RangeResult()
    kept: DataFrame | None = None
    try:
        keyed = df.withColumn(INDEX_COLUMN, index)
        if len(targets) > _OBSERVED_PARTITIONS and not _exact(fmt, partition_by):
            kept = _kept_rows(keyed, read_files is not None)
            written_df, observed = kept.drop(row_files.FILE_COLUMN), None
        else:
            written_df, observed = _observed(df, keyed, len(targets), read_files is not None)
        writer = storage.dataframe_writer(
            written_df, fmt, options, [INDEX_COLUMN, *(partition_by or ())]
        )
        writer.save(str(staging))
        folders = _partition_folders(staging, len(targets), what)
        got = observed.get if observed is not None else {}
        if kept is not None:
            metrics = _metrics(df, kept, with_files=read_files is not None)
            _release(kept)
            file_pairs: Any = [
                {"k": i, "f": uri} for i, m in metrics.items() for uri in m.pop("dws_files", ())
            ]
        else:
            if len(targets) <= _OBSERVED_PARTITIONS:
                metrics = {i: row_version.keyed_metrics(got, i) for i in folders}
            elif folders:
                metrics = _metrics(df, _read_written(df, staging, fmt, folders))
            else:
                metrics = {}
            file_pairs = got.get("dws_files")
        if read_files is not None:
            found = row_files.files_by_key(file_pairs)
            read_files(
                {
                    target.key: frozenset(found.get(i, ()))
                    for i, target in enumerate(targets)
                    if i in folders
                }
            )
        empty = [i for i in range(len(targets)) if i not in folders]
        if empty:
            _write_empty(df, staging, fmt, options, partition_by, folders, empty)
        schema_json = df.schema.json()
        columns = version_marker.schema_columns(df)
        by_files = versioning == "files"
        for i, target in enumerate(targets):
            folder = folders[i]
            content = content_version(folder)
            version, rows = row_version.version_of_metrics(schema_json, metrics.get(i, {}))
            if by_files:
                version = content
            version_marker.write_local_marker(
                folder,
                version=version,
                rows=rows,
                content=content,
                fmt=fmt,
                versioning=versioning,
                columns=columns,
                lineage=lineage(target.key, version, rows) if lineage else None,
            )
            result.results[target.key] = storage.WriteResult(
                str(locations.local_path(target.location)), version, rows, None, fmt
            )
        written: dict[str, storage.WriteResult] = {}
        for i, target in enumerate(targets):
            location = locations.local_path(target.location)
            location.parent.mkdir(parents=True, exist_ok=True)
            try:
                swap_into_place(
                    folders[i],
                    location,
                    keep_old_as=locations.local_path(target.keep_old_as)
                    if target.keep_old_as
                    else None,
                )
            except BaseException as exc:
                raise RangeWriteError(
                    f"{what}: putting partition {target.key} in place failed: {exc}; "
                    f"{len(written)} of {len(targets)} partitions hold the new data, the "
                    "others their previous data; re-run the range",
                    written,
                ) from exc
            done = result.results[target.key]
            written[target.key] = storage.WriteResult(
                done.location, done.version, done.row_count, data_size(location), fmt
            )
        result.results = written
    except RangeWriteError:
        remove_tree(staging, ignore_errors=True)
        raise
    except BaseException as exc:
        _release(kept)
        remove_tree(staging, ignore_errors=True)
        problem = storage.disk_problem(exc)
        if problem is not None:
            raise StorageError(
                f"{what}: writing the range failed: {problem}; the previous data is unchanged. "
                f"Free space or make {parent} writable, then re-run"
            ) from exc
        raise
    remove_tree(staging, ignore_errors=True)
    return result


def _observed(
    df: DataFrame, keyed: DataFrame, count: int, read_files: bool
) -> tuple[DataFrame, Observation | None]:
    """What is written (`keyed`, with observed metrics attached when there are any): each
    partition's version aggregates for a range of few partitions, the file each row was read
    from when asked. Helper columns are computed by a projection below the observation and
    dropped above it."""
    aggregates: list[str] = []
    helpers: list[str] = []
    tagged = keyed
    if count <= _OBSERVED_PARTITIONS:
        hashes = row_version.row_hashes(df)
        if hashes is not None:
            tagged = tagged.selectExpr(
                "*", *(f"{sql} AS {name}" for sql, name in zip(hashes, _HASH_COLUMNS, strict=True))
            )
            helpers += _HASH_COLUMNS
        aggregates += row_version.keyed_version_aggregates(
            INDEX_COLUMN, count, _HASH_COLUMNS if hashes is not None else None
        )
    if read_files:
        tagged = row_files.with_files(tagged)
        helpers.append(row_files.FILE_COLUMN)
        aggregates.append(row_files.files_aggregate_sql(INDEX_COLUMN))
    if not aggregates:
        return keyed, None
    observation = new_observation(df, f"dws_range_{uuid.uuid4().hex}")
    observed = tagged.observe(observation, *[sql_column(df, sql) for sql in aggregates])
    return observed.drop(*helpers), observation


def _partition_folders(staging: Path, count: int, what: str) -> dict[int, Path]:
    """The `index=i` folders Spark wrote, by index; rows whose index was null are refused."""
    folders: dict[int, Path] = {}
    for entry in staging.iterdir():
        name = entry.name
        if not entry.is_dir() or not name.startswith(f"{INDEX_COLUMN}="):
            continue
        value = name.partition("=")[2]
        if not value.isdigit() or int(value) >= count:
            raise RowsOutsideRangeError(
                f"{what}: some rows belong to no partition of the range being written (their "
                "partition column is empty or outside the range); nothing was written. Filter "
                "the DataFrame to the partitions of the run (context.partition_time_window / "
                "partition_keys)"
            )
        folders[int(value)] = entry
    return folders


def _exact(fmt: str, partition_by: Sequence[str] | None) -> bool:
    """Whether the written files give back exactly the values written."""
    return fmt in _EXACT_FORMATS and not partition_by


def _kept_rows(keyed: DataFrame, with_files: bool) -> DataFrame:
    """The rows of `keyed` (and the file each was read from, when asked) computed once and
    cached by Spark, then written and aggregated from the cache: a second run of the
    DataFrame's plan may give other rows (`current_timestamp()` is read once per query,
    `uuid()`, a source changed in between), and a version must be the version of the rows
    written. The cache holds the optimized plan too, so a block Spark loses is computed again
    with the same clock and seeds. The caller unpersists it (`_release`)."""
    rows = row_files.with_files(keyed) if with_files else keyed
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
    rows.count()  # every row cached before the write reads them
    return rows


def _release(kept: DataFrame | None) -> None:
    """Drop the cached rows of `_kept_rows` (a failure to do so is Spark's to clean up)."""
    if kept is not None:
        with contextlib.suppress(Exception):
            kept.unpersist()


def _metrics(df: DataFrame, source: DataFrame, *, with_files: bool = False) -> dict[int, dict]:
    """The version aggregates of each partition, by index, grouped from `source` (the rows
    written, with their index); with `with_files`, each partition's set of files too
    (`dws_files`)."""
    aggregates = row_version.version_aggregates(df)
    if with_files:
        file = quoted_name(row_files.FILE_COLUMN)
        aggregates.append(sql_column(df, f"collect_set({file}) AS dws_files"))
    rows = source.groupBy(INDEX_COLUMN).agg(*aggregates).collect()
    return {int(row[INDEX_COLUMN]): row.asDict() for row in rows}


def _read_written(df: DataFrame, staging: Path, fmt: str, folders: Mapping[int, Path]) -> DataFrame:
    """The written files with their partition index, as one DataFrame: read with the
    DataFrame's own schema (no schema inference, which reads files), in groups of folders Spark
    lists on the driver."""
    schema = StructType([*df.schema.fields, StructField(INDEX_COLUMN, IntegerType())])
    reader = df.sparkSession.read.format(fmt).schema(schema).option("basePath", str(staging))
    paths = [str(folders[i]) for i in sorted(folders)]
    parts = [
        reader.load(paths[start : start + _LISTED_ON_DRIVER])
        for start in range(0, len(paths), _LISTED_ON_DRIVER)
    ]
    written = functools.reduce(DataFrame.unionAll, parts)
    return written.select(*[F.col(quoted_name(c)) for c in df.columns], INDEX_COLUMN)


def _write_empty(
    df: DataFrame,
    staging: Path,
    fmt: str,
    options: Mapping[str, Any] | None,
    partition_by: Sequence[str] | None,
    folders: dict[int, Path],
    empty: Sequence[int],
) -> None:
    """What a one-partition write of an empty DataFrame gives (files with the schema, no
    rows), written once and copied to each partition of the range that got no row."""
    template = staging / "_empty"
    storage.dataframe_writer(df.limit(0), fmt, options, partition_by).save(str(template))
    for i in empty:
        folder = staging / f"{INDEX_COLUMN}={i}"
        copy_data(template, folder)
        folders[i] = folder
