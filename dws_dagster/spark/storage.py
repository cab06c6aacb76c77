"""Atomic DataFrame storage at a location, with a content version computed during the write.

A write goes to a hidden staging folder beside the target and is swapped into place only when
Spark has committed every file, so readers and crashes see the old data or the new, whole.
The version is order-independent and computed by Spark itself in the same pass as the write
(`DataFrame.observe`): schema, row count and two independent sums of 64-bit row hashes. Parquet
bytes differ between JVMs for identical data, and shuffles reorder rows, so hashing files would
give a new version on every run of an unchanged asset; this does not.

A marker file (`_dws_version.json`, ignored by Spark readers and by byte versions) records the
version and, for local data, the byte version of the files it describes, so the workspace layer
can give the same version without Spark and notice any later change to the files.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import xxhash
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql.types import MapType

from dws_dagster.errors import DwsError
from dws_dagster.spark.session_kind import (
    is_connect,
    new_observation,
    refuse_on_connect,
    sql_column,
)
from dws_dagster.spark.write_stats import described, rows_written
from dws_dagster.workspace.files import atomic_write_json, canonical_json
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
    LISTING_PREFIX,
    MARKER_NAME,
    MARKER_SCHEME,
    checked_marker,
    content_version,
    data_size,
)

FORMATS = ("parquet", "csv", "json", "orc")
VERSIONINGS = ("rows", "files")
_SALT = "dws-dagster/3"


class StorageError(DwsError):
    """A DataFrame could not be written or read at a location.

    Examples:
        .. code-block:: python

            from dagster import asset, materialize
            from pyspark.sql import DataFrame, SparkSession

            from dws_dagster import (
                SparkWorkspaceIOManager,
                StorageError,
                WorkspaceResource,
                dws_ref,
            )

            @asset(metadata=dws_ref("intermediate-data", "zones"))
            def zones() -> DataFrame:
                spark = SparkSession.builder.getOrCreate()
                return spark.createDataFrame([(1, "Newark Airport")], ["zone", "name"])

            io_manager = SparkWorkspaceIOManager(workspace=WorkspaceResource())
            try:
                materialize([zones], resources={"io_manager": io_manager})
            except Exception as exc:  # Dagster wraps the step's error
                cause = exc
                while cause is not None and not isinstance(cause, StorageError):
                    cause = cause.__cause__
                print(cause)  # ... writing ... failed: ...; the previous data is unchanged. ...
    """


@dataclass(frozen=True)
class WriteResult:
    location: str
    version: str
    row_count: int
    size_bytes: int | None
    format: str


def is_local(location: str) -> bool:
    """Plain paths are written with local renames; any URI (file:// too) through Hadoop."""
    scheme = urlsplit(location).scheme
    return scheme == "" or (len(scheme) == 1 and os.name == "nt")


def local_path(location: str) -> Path:
    return Path(location)


def hash_inputs(df: DataFrame) -> list[str]:
    """SQL for each column's hash input. Map columns cannot be hashed by Spark; the JSON form
    of their entries sorted by key can. Sorted, because a map's entry order is not its value:
    the same Python dict becomes entries in one order through a classic session and in
    another through Spark Connect, and one logical map must have one version."""
    inputs = []
    for field in df.schema.fields:
        quoted = "`" + field.name.replace("`", "``") + "`"
        inputs.append(_sorted_map_json(quoted) if isinstance(field.dataType, MapType) else quoted)
    return inputs


def _sorted_map_json(column: str) -> str:
    """JSON of a map's entries in key order (keys are unique and orderable: maps cannot be
    keys), null for a null map and `[]` for an empty one."""
    by_key = "(l, r) -> CASE WHEN l.key < r.key THEN -1 WHEN l.key > r.key THEN 1 ELSE 0 END"
    return f"to_json(array_sort(map_entries({column}), {by_key}))"


#: Each 64-bit row hash is summed as three limbs (21, 21 and 22 bits) in 64-bit longs: exact
#: sums with no overflow below 2^41 rows, several times cheaper than decimal sums.
_LIMB_BITS = 21
_LIMB_MASK = (1 << _LIMB_BITS) - 1


def _limbs(value: str) -> list[str]:
    return [
        f"({value}) & {_LIMB_MASK}",
        f"shiftright({value}, {_LIMB_BITS}) & {_LIMB_MASK}",
        f"shiftright({value}, {2 * _LIMB_BITS})",
    ]


def limb_sums(name: str, value: str) -> list[str]:
    return [f"sum({limb}) AS {name}{i}" for i, limb in enumerate(_limbs(value))]


def row_hashes(df: DataFrame) -> tuple[str, str] | None:
    """SQL of the two hashes of each row the version sums (None: no column to hash)."""
    columns = hash_inputs(df)
    if not columns:
        return None
    row_hash = f"xxhash64({', '.join(columns)})"
    return row_hash, f"xxhash64('{_SALT}', {row_hash})"


def keyed_version_aggregates(key: str, groups: int, hashes: tuple[str, str] | None) -> list[str]:
    """The version aggregates of each of `groups` groups of rows in one aggregation without
    grouping (observed metrics have none): `key` is the SQL of a row's group (0 to groups - 1),
    `hashes` the SQL of its two row hashes (columns computed once per row). Each row feeds
    every group's sums, so this is for few groups. `keyed_metrics` reads them back."""
    aggregates = []
    for i in range(groups):
        when = f"{key} = {i}"
        aggregates.append(f"count_if({when}) AS k{i}_rows")
        for name, value in zip("hg", hashes or (), strict=False):
            aggregates += [
                f"sum(CASE WHEN {when} THEN {limb} END) AS k{i}_{name}{n}"
                for n, limb in enumerate(_limbs(value))
            ]
    return aggregates


def keyed_metrics(observed: Mapping[str, Any], group: int) -> dict[str, Any]:
    """One group's metrics from `keyed_version_aggregates`, as `version_of_metrics` reads them."""
    prefix = f"k{group}_"
    return {
        name[len(prefix) :]: value for name, value in observed.items() if name.startswith(prefix)
    }


def _version_aggregates(df: DataFrame) -> list[Column]:
    """Row count and two order-independent checksums of the rows: the sum of a 64-bit hash of
    each row, and the sum of a salted rehash of it (a second, nonlinear checksum, so two
    different datasets must agree on count and both sums to share a version).

    Built as SQL text: one py4j call per aggregate instead of one per column operation, which
    is most of a small write's fixed cost. The same SQL on a Spark Connect session: the server
    computes the same numbers, so a version does not depend on how Spark was reached."""
    aggregates = ["count(1) AS rows"]
    hashes = row_hashes(df)
    if hashes is not None:
        aggregates += limb_sums("h", hashes[0])
        aggregates += limb_sums("g", hashes[1])
    return [sql_column(df, aggregate) for aggregate in aggregates]


def exact_sum(metrics: Mapping[str, Any], name: str) -> int:
    return sum(int(metrics.get(f"{name}{i}") or 0) << (_LIMB_BITS * i) for i in range(3))


def observed(df: DataFrame) -> tuple[DataFrame, Observation]:
    """`df` with the version's aggregates attached, filled in by the next action on it."""
    observation = new_observation(df, f"dws_version_{uuid.uuid4().hex}")
    return df.observe(observation, *_version_aggregates(df)), observation


def version_of_metrics(schema_json: str, metrics: Mapping[str, Any]) -> tuple[str, int]:
    """The version and row count from the observed aggregates."""
    rows = int(metrics.get("rows") or 0)
    body = {
        "scheme": MARKER_SCHEME,
        "schema": schema_json,
        "rows": rows,
        "h": str(exact_sum(metrics, "h")),
        "g": str(exact_sum(metrics, "g")),
    }
    return xxhash.xxh3_128_hexdigest(canonical_json(body)), rows


def write_local_marker(
    folder: Path,
    *,
    version: str,
    rows: int,
    content: str,
    fmt: str,
    versioning: str,
    columns: list[list[str]],
    lineage: Mapping[str, Any] | None,
) -> None:
    """The version marker of data written to a local `folder` (a one-partition write, or each
    partition of a range): one shape, so both kinds of write are read back alike."""
    atomic_write_json(
        folder / MARKER_NAME,
        {
            "format": 1,
            "scheme": MARKER_SCHEME,
            "version": version,
            "rows": rows,
            "content": content,
            "file_format": fmt,
            "versioning": versioning,
            "columns": columns,
            **({"lineage": dict(lineage)} if lineage is not None else {}),
        },
    )


def schema_columns(df: DataFrame) -> list[list[str]]:
    """The columns as `[name, type]` pairs, kept in the marker so that readers of several
    partitions can tell, without opening any data file, whether they share one schema."""
    return [[field.name, field.dataType.simpleString()] for field in df.schema.fields]


def dataframe_version(df: DataFrame) -> tuple[str, int]:
    """Version of a DataFrame's content, by running one aggregation job (no write)."""
    row = df.agg(*_version_aggregates(df)).collect()[0].asDict()
    return version_of_metrics(df.schema.json(), row)


def _writer(
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
    writer = _writer(with_version, fmt, options, partition_by)
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
        problem = _disk_problem(exc)
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


def check_reachable(spark: SparkSession | None, location: str, what: str) -> None:
    """Refuse, before anything is written, remote data on a Spark Connect session: dws_dagster
    reaches Hadoop filesystem URIs (staging, atomic rename, markers, listings) through the
    driver's JVM, which a Connect client does not have."""
    if is_local(location):
        return
    refuse_on_connect(
        spark,
        f"{what}: {location} is a Hadoop filesystem URI; reaching it (staging, atomic rename, "
        "version markers, listings)",
        "Use a classic Spark session (with the filesystem's Hadoop settings) for this resource, "
        "or a local or mounted path that this process and the Connect server share",
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


def _disk_problem(exc: BaseException) -> str | None:
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


def _hadoop_fs(spark: SparkSession, location: str) -> tuple[Any, Any]:
    check_reachable(spark, location, "remote data")
    jvm: Any = spark.sparkContext._jvm  # the Hadoop FileSystem API has no Python face
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), jvm


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
    fs, jvm = _hadoop_fs(spark, location)
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
    fs, jvm = _hadoop_fs(spark, location)
    return bool(fs.exists(jvm.org.apache.hadoop.fs.Path(location)))


def read_marker(spark: SparkSession | None, location: str) -> dict[str, Any] | None:
    """The version marker written with the data at `location`, or None (data written outside
    dws_dagster, or a marker that cannot be read)."""
    try:
        if is_local(location):
            raw = (local_path(location) / MARKER_NAME).read_bytes()
        else:
            if spark is None:
                return None
            fs, jvm = _hadoop_fs(spark, location)
            path = jvm.org.apache.hadoop.fs.Path(location, MARKER_NAME)
            if not fs.exists(path):
                return None
            stream = fs.open(path)
            try:
                raw = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            finally:
                stream.close()
        data = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError):
        return None
    return checked_marker(data)


def remote_listing_version(spark: SparkSession, location: str) -> str:
    """A listing version (names, sizes, modification times) of remote data, through Hadoop:
    for object-store resources configured with `versioning: listing`."""
    fs, jvm = _hadoop_fs(spark, location)
    root = jvm.org.apache.hadoop.fs.Path(location)
    if not fs.exists(root):
        raise StorageError(f"no data at {location}; write it first, or check the URI")
    prefix = fs.getFileStatus(root).getPath().toString().rstrip("/")
    files = fs.listFiles(root, True)
    entries: list[tuple[str, int, int]] = []
    while files.hasNext():
        status = files.next()
        relative = status.getPath().toString()[len(prefix) :].lstrip("/")
        if any(part.startswith((".", "_")) for part in relative.split("/")) or relative.endswith(
            ".crc"
        ):
            continue
        entries.append((relative, int(status.getLen()), int(status.getModificationTime())))
    digest = xxhash.xxh3_128()
    for relative, size, mtime in sorted(entries):
        digest.update(f"{relative}\0{size}\0{mtime}\n".encode())
    return f"{LISTING_PREFIX}{digest.hexdigest()}"
