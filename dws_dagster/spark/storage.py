"""Atomic DataFrame storage at a location, with a content version computed during the write.

A write goes to a hidden staging folder beside the target and is swapped into place only when
Spark has committed every file, so readers and crashes see the old data or the new, whole. The
version (`row_version`) is computed by Spark in the same pass as the write, and kept with the
data in its marker (`version_marker`); plain paths are swapped with local renames, URIs through
Hadoop's FileSystem API (`locations`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession

from dws_dagster.errors import StorageError
from dws_dagster.spark.locations import (
    check_reachable,
    hadoop_fs,
    is_local,
    local_path,
)
from dws_dagster.spark.row_version import observed, version_of_metrics
from dws_dagster.spark.session_kind import is_connect
from dws_dagster.spark.version_marker import schema_columns, write_local_marker
from dws_dagster.spark.write_stats import described, rows_written
from dws_dagster.workspace.files import canonical_json
from dws_dagster.workspace.swap import (
    old_name,
    recover,
    staging_name,
    staging_path,
    swap_into_place,
)
from dws_dagster.workspace.trees import make_folders, remove_tree
from dws_dagster.workspace.versions import (
    DESCRIPTION_FILES,
    MARKER_NAME,
    MARKER_SCHEME,
    content_version,
    data_size,
)

FORMATS = ("parquet", "csv", "json", "orc")
VERSIONINGS = ("rows", "files")


@dataclass(frozen=True)
class WriteResult:
    location: str
    version: str
    row_count: int
    size_bytes: int | None
    format: str


def dataframe_writer(
    df: DataFrame, fmt: str, options: Mapping[str, Any] | None, partition_by: Sequence[str] | None
) -> Any:
    if fmt not in FORMATS:
        raise StorageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    # "error" (errorifexists): the staging folder is new; Spark Connect knows only this name.
    writer = df.write.format(fmt).mode("error")
    if fmt == "csv":
        writer = writer.option("header", "true")
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    return writer


def write_atomic(
    df: DataFrame,
    location: str,
    *,
    fmt: str = "parquet",
    options: Mapping[str, Any] | None = None,
    partition_by: Sequence[str] | None = None,
    keep_old_as: str | None = None,
    what: str = "output",
    lineage: Callable[[str, int], Mapping[str, Any]] | None = None,
    versioning: str = "rows",
) -> WriteResult:
    """Write `df` to `location` atomically and return its content version.

    `versioning="rows"` hashes every row in the write pass: the version ignores row order and
    file layout, so an unchanged result keeps its version whatever the shuffles did.
    `versioning="files"` (local locations) takes the byte version of the written files instead:
    no per-row work, but a reordering of identical rows gives a new version.

    `keep_old_as` (a location) receives the data being replaced instead of deleting it, so a
    snapshot restore can bring it back. `lineage(version, rows)` gives the lineage record kept
    in the marker: swapped in with the data, it survives a crash before the lineage store has
    it (the reader commits it then).
    """
    if versioning not in VERSIONINGS:
        raise StorageError(
            f"{what}: unknown versioning {versioning!r}; choose one of {', '.join(VERSIONINGS)}"
        )
    check_reachable(df.sparkSession, location, what)
    by_files = versioning == "files" and is_local(location)
    with_version, observation = (df, None) if by_files else observed(df)
    writer = dataframe_writer(with_version, fmt, options, partition_by)
    if observation is not None and not is_local(location):
        return _write_remote(df, writer, observation, location, fmt, keep_old_as, lineage)
    target = local_path(location)
    make_folders(target.parent)
    recover(target)
    staging = staging_path(target)
    try:
        if observation is None:
            with described(df.sparkSession, what) as description:
                writer.save(str(staging))
            _check_written_here(df, staging, location, what)
            rows = rows_written(df.sparkSession, description)
            if rows is None:
                rows = _written_rows(df, staging, fmt)
            version = content = content_version(staging)
        else:
            writer.save(str(staging))
            _check_written_here(df, staging, location, what)
            content = content_version(staging)
            version, rows = version_of_metrics(df.schema.json(), observation.get)
        write_local_marker(
            staging,
            version=version,
            rows=rows,
            content=content,
            fmt=fmt,
            versioning=versioning,
            columns=schema_columns(df),
            lineage=lineage(version, rows) if lineage else None,
        )
        swap_into_place(
            staging, target, keep_old_as=local_path(keep_old_as) if keep_old_as else None
        )
    except BaseException as exc:
        _remove_local(staging)
        problem = disk_problem(exc)
        if problem is not None:
            raise StorageError(
                f"{what}: writing {location} failed: {problem}; the previous data is unchanged. "
                f"Free space or make {target.parent} writable, then re-run"
            ) from exc
        raise
    return WriteResult(str(target), version, rows, data_size(target), fmt)


def _check_written_here(df: DataFrame, staging: Path, location: str, what: str) -> None:
    """A Spark Connect server writes a plain path on its own machine: the staging folder must be
    visible here for the marker and the swap (the same machine, or a shared mount)."""
    if staging.is_dir() or not is_connect(df):
        return
    raise StorageError(
        f"{what}: the Spark Connect server wrote {location} on its own filesystem, which this "
        f"process does not see (no {staging} here); the previous data is unchanged. Give the "
        "resource a path that this process and the Connect server share (the same machine or "
        "a mount at the same path), or use a classic Spark session"
    )


def _written_rows(df: DataFrame, staging: Path, fmt: str) -> int:
    """Rows in freshly written files, when Spark's record of the write cannot be read: Parquet
    and ORC answer from their footers; CSV and JSON are scanned. The schema is known, so Spark
    infers none."""
    reader = df.sparkSession.read.format(fmt).schema(df.schema)
    if fmt == "csv":
        reader = reader.option("header", "true")
    return reader.load(str(staging)).count()


#: Storage faults a user can fix, by errno and by the text Java gives them (Spark's writes).
_DISK_ERRNOS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the filesystem is read-only",
}
_DISK_TEXTS = {
    "No space left on device": "the disk is full",
    "Disk quota exceeded": "the disk quota is exceeded",
    "Read-only file system": "the filesystem is read-only",
}


def disk_problem(exc: BaseException) -> str | None:
    """What a failed write ran into, when it is the disk (full, over quota, read-only)."""
    seen: BaseException | None = exc
    for _ in range(8):  # the exception and its causes
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in _DISK_ERRNOS:
            return _DISK_ERRNOS[seen.errno]
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    return next((meaning for needle, meaning in _DISK_TEXTS.items() if needle in text), None)


def _remove_local(path: Path) -> None:
    if path.is_dir():
        remove_tree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


def _write_remote(
    df: DataFrame,
    writer: Any,
    observation: Observation,
    location: str,
    fmt: str,
    keep_old_as: str | None,
    lineage: Callable[[str, int], Mapping[str, Any]] | None,
) -> WriteResult:
    """Staging and rename through the Hadoop FileSystem API (HDFS, abfss, file://...).

    A rename is atomic on HDFS and local filesystems; on S3-style stores it is a copy, so a
    crash during the swap can leave the target missing until the next write recovers it.
    """
    spark = df.sparkSession
    fs, jvm = hadoop_fs(spark, location)
    target = jvm.org.apache.hadoop.fs.Path(location)
    parent = target.getParent()
    # Fixed-length names (see swap.py): a target named near the 255-byte limit still fits.
    staging = jvm.org.apache.hadoop.fs.Path(parent, staging_name(target.getName()))
    old = jvm.org.apache.hadoop.fs.Path(parent, old_name(target.getName()))
    try:
        writer.save(staging.toString())
        version, rows = version_of_metrics(df.schema.json(), observation.get)
        marker = fs.create(jvm.org.apache.hadoop.fs.Path(staging, MARKER_NAME), True)
        try:
            marker.write(
                bytearray(
                    canonical_json(
                        {
                            "format": 1,
                            "scheme": MARKER_SCHEME,
                            "version": version,
                            "rows": rows,
                            "file_format": fmt,
                            "columns": schema_columns(df),
                            **({"lineage": dict(lineage(version, rows))} if lineage else {}),
                        }
                    )
                )
            )
        finally:
            marker.close()
        had_old = fs.exists(target)
        aside = old
        if had_old and keep_old_as:  # straight to where it is kept: one rename (an S3 copy)
            keep = jvm.org.apache.hadoop.fs.Path(keep_old_as)
            if not fs.exists(keep):
                fs.mkdirs(keep.getParent())
                aside = keep
        if had_old and not fs.rename(target, aside):
            raise StorageError(f"could not move {location} aside; the previous data is intact")
        if not fs.rename(staging, target):
            if had_old:
                fs.rename(aside, target)
            raise StorageError(
                f"could not move new data into {location}; the previous data is intact"
            )
        if had_old and aside == old:  # not kept, or that version is kept already
            fs.delete(old, True)
    except BaseException:
        if fs.exists(staging):
            fs.delete(staging, True)
        raise
    size = fs.getContentSummary(target).getLength()
    return WriteResult(location, version, rows, int(size), fmt)


def read(
    spark: SparkSession,
    location: str | Sequence[str],
    *,
    fmt: str = "parquet",
    options: Mapping[str, Any] | None = None,
    base_path: str | None = None,
    what: str = "input",
) -> DataFrame:
    """Read the data at `location` (several locations: their union, as one scan), after
    undoing what a crashed swap may have left. `base_path` lets Spark restore `col=value`
    folder names below it as columns."""
    if fmt not in FORMATS:
        raise StorageError(f"{what}: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    locations = [location] if isinstance(location, str) else list(location)
    if not locations:
        raise StorageError(f"{what}: nothing to read (no locations given)")
    for item in locations:
        if is_local(item):
            target = local_path(item)
            recover(target)
            if not target.exists():
                raise StorageError(f"{what}: no data at {item}; materialize it first")
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    if base_path is not None:
        reader = reader.option("basePath", base_path)
    if "pathGlobFilter" not in (options or {}) and any(
        is_local(item) and _has_description_files(local_path(item)) for item in locations
    ):
        # results.json beside a results asset's data is not data: read the part files only.
        reader = reader.option("pathGlobFilter", "part-*")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load(locations[0] if len(locations) == 1 else locations)


def _has_description_files(folder: Path) -> bool:
    return any((folder / name).is_file() for name in DESCRIPTION_FILES)


def exists(spark: SparkSession | None, location: str) -> bool:
    """Whether there is data at `location` (after recovering a crashed swap)."""
    if is_local(location):
        target = local_path(location)
        recover(target)
        return target.exists()
    if spark is None:
        return True
    fs, jvm = hadoop_fs(spark, location)
    return bool(fs.exists(jvm.org.apache.hadoop.fs.Path(location)))
