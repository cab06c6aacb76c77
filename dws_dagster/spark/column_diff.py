"""Which columns of two datasets differ, compared by Spark without joining them.

Replayed data rarely comes back in the recorded row order (shuffles), and rows have no key to
join on, so each column is compared as a multiset: per column, the count and two exact,
order-independent sums of 64-bit hashes of its values (the same construction the version
uses for whole rows, in `storage`). A column whose values moved between rows but kept their
multiset is not named: then no column differs though the rows do, and the caller says so.
One pass over each dataset, however many columns.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from dws_dagster.errors import StorageError
from dws_dagster.spark.remote_data import configured_connect
from dws_dagster.spark.row_version import exact_sum, hash_inputs, limb_sums
from dws_dagster.spark.session_kind import sql_column
from dws_dagster.workspace.files import stderr_to

_SALT = "dws-dagster/columns"


def differing_columns(
    spark: SparkSession, recorded: Path, reproduced: Path, fmt: str
) -> tuple[str, ...]:
    """The columns in which the data at `reproduced` differs from the data at `recorded`:
    removed, retyped or holding other values (in the recorded order), then added ones."""
    before, schema_before = _read(spark, recorded, fmt)
    after, schema_after = _read(spark, reproduced, fmt)
    types_before = {f.name: f.dataType for f in schema_before.fields}
    types_after = {f.name: f.dataType for f in schema_after.fields}
    shared = [
        name
        for name in types_before
        if name in types_after and types_before[name] == types_after[name]
    ]
    try:
        sums_before = _column_sums(before, shared)
        sums_after = _column_sums(after, shared)
    except PySparkException as exc:  # Spark reads lazily: unreadable data shows up here
        raise StorageError(
            f"Spark cannot compare {recorded} with {reproduced} as {fmt}: {_first_line(exc)}"
        ) from None
    differ = [
        name for name in types_before if name not in shared or sums_before[name] != sums_after[name]
    ]
    return (*differ, *(name for name in types_after if name not in types_before))


def _read(spark: SparkSession, path: Path, fmt: str) -> tuple[DataFrame, StructType]:
    """The data at `path` and its schema (on a Spark Connect session the server reads the path
    only when asked for the schema: a path it does not see fails there)."""
    reader = spark.read.format(fmt)
    if fmt == "csv":  # as the IO manager writes it
        reader = reader.option("header", "true")
    try:
        df = reader.load(str(path))
        return df, df.schema
    except PySparkException as exc:
        raise StorageError(f"Spark cannot read {path} as {fmt}: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    said = str(exc).strip()
    return said.splitlines()[0] if said else type(exc).__name__


def _column_sums(df: DataFrame, names: list[str]) -> dict[str, tuple[int, int]]:
    """Each column's two hash sums (the count of rows is in each, through the hash of null)."""
    if not names:
        return {}
    inputs = dict(zip([f.name for f in df.schema.fields], hash_inputs(df), strict=True))
    aggregates = []
    for index, name in enumerate(names):
        value = f"xxhash64({inputs[name]})"
        aggregates += limb_sums(f"h{index}_", value)
        aggregates += limb_sums(f"g{index}_", f"xxhash64('{_SALT}', {value})")
    row = df.agg(*(sql_column(df, text) for text in aggregates)).collect()[0].asDict()
    return {
        name: (exact_sum(row, f"h{index}_"), exact_sum(row, f"g{index}_"))
        for index, name in enumerate(names)
    }


class SparkColumnComparer:
    """A `replay_compare.ColumnComparer` that starts Spark only when first asked (most
    replays reproduce, and need no Spark in the command's own process).

    The data compared is on this machine: a local session, listening on loopback only,
    whatever cluster the machine's Spark configuration names. Where Spark Connect is
    configured (`SPARK_REMOTE`), pyspark makes no local session: the Connect session compares,
    its server reading the same paths (as it writes them for the IO manager); a server that
    does not see them gives a verdict that says its columns could not be compared.

    Spark says nothing on the command's standard error: the JVM's console output (its
    start-up warnings come before any log level can be set, its progress bars after) goes
    to `log` (default: nowhere), the log level is ERROR and console progress is off."""

    def __init__(self, log: Path | None = None) -> None:
        self._spark: SparkSession | None = None
        self._log = log

    def __call__(self, recorded: Path, reproduced: Path, fmt: str) -> tuple[str, ...]:
        if self._spark is None and configured_connect() is not None:
            try:
                self._spark = SparkSession.builder.getOrCreate()
            except PySparkException as exc:
                raise StorageError(
                    f"the Spark Connect session could not be made: {_first_line(exc)}"
                ) from None
        if self._spark is None:
            builder = (
                SparkSession.builder.master("local[*]")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.driver.host", "127.0.0.1")
            )
            with stderr_to(self._log):
                self._spark = builder.getOrCreate()
            self._spark.sparkContext.setLogLevel("ERROR")
        return differing_columns(self._spark, recorded, reproduced, fmt)
