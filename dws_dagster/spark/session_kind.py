"""Which kind of Spark session a DataFrame comes from, and the pieces that differ between them.

A classic session drives a JVM in this process (py4j: `_jvm`, `_jsc`, `_jdf`); a Spark Connect
session (`pyspark.sql.connect`, `sc://host:port`, Databricks Connect) is a thin gRPC client
with no JVM here: whatever dws_dagster reaches through py4j must take another way, or be
refused, on it (docs/spark-connect.md).

pyspark picks the flavour of `functions.*` and `Observation` from a process-wide switch (set
when any Connect session is made), not from the DataFrame at hand; the helpers here pick by the
DataFrame, so a process that holds both kinds of session builds each one's own objects.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from dws_dagster.errors import ConnectUnsupportedError


def is_connect(obj: Any) -> bool:
    """Whether `obj` (a SparkSession or DataFrame) belongs to a Spark Connect client."""
    return type(obj).__module__.startswith("pyspark.sql.connect.")


def sql_column(df: DataFrame, text: str) -> Column:
    """The SQL expression `text` as a Column of `df`'s kind of session."""
    if is_connect(df):
        from pyspark.sql.connect.functions import expr

        return expr(text)
    # pyspark's `expr` wraps the classic one, which it calls unless the process is in Connect
    # mode; the wrapped function is the classic one whatever the mode.
    classic = getattr(F.expr, "__wrapped__", F.expr)
    return classic(text)


def new_observation(df: DataFrame, name: str) -> Observation:
    """An Observation (named metrics filled in by the next action on the observed DataFrame)
    of `df`'s kind of session."""
    if is_connect(df):
        from pyspark.sql.connect.observation import Observation as ConnectObservation

        return ConnectObservation(name)  # type: ignore[return-value]
    observation = object.__new__(Observation)  # not pyspark's mode switch in Observation.__new__
    observation.__init__(name)  # type: ignore[misc]
    return observation


def refuse_on_connect(spark: Any, feature: str, alternative: str) -> None:
    """Raise ConnectUnsupportedError when `spark` is a Spark Connect session: `feature` needs
    the JVM, which such a session does not have; `alternative` says what works instead."""
    if spark is not None and is_connect(spark):
        raise ConnectUnsupportedError(
            f"{feature} needs the Spark driver's JVM in this process, which a Spark Connect "
            f"session (spark.remote / sc://...) does not have; nothing was written. "
            f"{alternative} (docs/spark-connect.md)"
        )
