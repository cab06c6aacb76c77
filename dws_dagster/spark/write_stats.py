"""How many rows a write wrote, from Spark's own record of it.

Spark counts the rows every file write commits (the "number of output rows" metric its SQL UI
shows for the write). Reading it back costs a few milliseconds, where counting the written
files again costs a Spark job (~10% of writing 5M rows). The record is reached through
Spark's SQL status store, which is not a stable API: anything unexpected gives None and the
caller counts the files instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from dws_dagster.spark.session_kind import is_connect

_DESCRIPTION = "spark.job.description"
_ROWS_METRIC = "number of output rows"
#: The plan node of a file write (DataFrameWriter.save to a path).
_WRITE_NODE = "Execute InsertIntoHadoopFsRelationCommand"
#: How many of the newest SQL executions are searched for the write (other threads of the
#: session may have run some since).
_RECENT = 32


@contextmanager
def described(spark: SparkSession, what: str) -> Iterator[str]:
    """Run the block's Spark work under a unique description (shown in the Spark UI), by which
    `rows_written` finds the write. A Spark Connect session has no SparkContext here: the
    description is only returned (and `rows_written` gives None)."""
    description = f"dws_dagster: write {what} [{uuid.uuid4().hex[:12]}]"
    if is_connect(spark):
        yield description
        return
    context = spark.sparkContext
    previous = context.getLocalProperty(_DESCRIPTION)
    context.setLocalProperty(_DESCRIPTION, description)
    try:
        yield description
    finally:
        context.setLocalProperty(_DESCRIPTION, previous)  # type: ignore[arg-type]


def rows_written(spark: SparkSession, description: str) -> int | None:
    """The rows the write described by `description` committed, or None when Spark's record
    of it cannot be read (a Spark Connect session: the status store is in the server's JVM)."""
    if is_connect(spark):
        return None
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
        store = spark._jsparkSession.sharedState().statusStore()
        count = int(store.executionsCount())
        recent = store.executionsList(max(0, count - _RECENT), _RECENT).reverseIterator()
        while recent.hasNext():
            execution = recent.next()
            if execution.description() == description:
                return _rows_metric(store, execution)
    except (Py4JError, AttributeError, TypeError, ValueError):
        return None
    return None


def _rows_metric(store: Any, execution: Any) -> int | None:
    """The row metric of the write command's node: other nodes of the plan (a scan, a range
    sampled for a sort) have row metrics of their own."""
    values = store.executionMetrics(execution.executionId())
    nodes = store.planGraph(execution.executionId()).allNodes().iterator()
    while nodes.hasNext():
        node = nodes.next()
        if not str(node.name()).startswith(_WRITE_NODE):
            continue
        metrics = node.metrics().iterator()
        while metrics.hasNext():
            metric = metrics.next()
            if metric.name() == _ROWS_METRIC:
                value = values.get(metric.accumulatorId())
                if value is None or value.isEmpty():
                    return None
                text = str(value.get()).replace(",", "").strip()
                return int(text) if text.isdigit() else None
    return None
