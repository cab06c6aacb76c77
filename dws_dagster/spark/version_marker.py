"""The version marker written with the data (`_dws_version.json`, ignored by Spark readers and
by byte versions): the version and, for local data, the byte version of the files it
describes, so the workspace layer can give the same version without Spark and notice any later
change to the files; and the lineage record of the write, which survives a crash before the
lineage store has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession

from dws_dagster.spark.locations import hadoop_fs, is_local, local_path
from dws_dagster.workspace.files import atomic_write_json
from dws_dagster.workspace.versions import MARKER_NAME, MARKER_SCHEME, checked_marker


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


def read_marker(spark: SparkSession | None, location: str) -> dict[str, Any] | None:
    """The version marker written with the data at `location`, or None (data written outside
    dws_dagster, or a marker that cannot be read)."""
    try:
        if is_local(location):
            raw = (local_path(location) / MARKER_NAME).read_bytes()
        else:
            if spark is None:
                return None
            fs, jvm = hadoop_fs(spark, location)
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
