"""Which files the rows of a DataFrame were read from, known while it is written: so that a range
of partitions written in one step records, for each partition, the files read by path whose
rows it holds, as one run per partition records the files that run read.

Spark names the file a task is reading (`input_file_name()`), which is the file a row came from
only while the row is still the row a scan produced: once rows are shuffled, joined, aggregated,
sorted or batched through Python, the name is empty, or the name of the other side of a join, or
of the next file. So a DataFrame's rows are traced to their files only when its plan keeps rows
whole from the scans to the write: projections, filters, unions, `explode` and samples over file
scans (or rows from no file: ranges, local data). That is read from Spark's optimized logical
plan (node names of its tree string: one text, on a classic session from the driver and on a
Spark Connect session from the server, with no private API beyond getting the text), which also
shows subqueries (a file read in a subquery changes rows it does not give). Any other node makes
the rows untraceable, and the caller records every file for every partition instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from pyspark.sql import DataFrame

from dws_dagster.spark.session_kind import is_connect, sql_column
from dws_dagster.spark.sql_quoting import quoted_name

#: The derived column holding each row's file while it is written (never in the files).
FILE_COLUMN = "__dws_input_file"

#: Plan nodes that keep each row the row one scan read: its file is still the task's file.
ROW_KEEPING_NODES = frozenset(
    {
        "Project",
        "Filter",
        "Union",
        "Generate",
        "Sample",
        "SubqueryAlias",
        "View",
        "ResolvedHint",
        "CollectMetrics",
        # leaves: file scans, and rows that come from no file
        "Relation",
        "RelationV2",
        "LocalRelation",
        "Range",
        "OneRowRelation",
        "LogicalRDD",
    }
)
_NODE = re.compile(r"^[\s:+\-|]*([A-Za-z][A-Za-z0-9]*)")
#: How subquery expressions print in a plan (their plans print as inner children too).
_SUBQUERY = re.compile(r"\b(?:scalar-subquery|lateral-subquery|exists|list)#\d+")
_OPTIMIZED = "== Optimized Logical Plan =="
_PHYSICAL = "== Physical Plan =="


def untraceable(df: DataFrame) -> str | None:
    """Why the files of `df`'s rows cannot be told while it is written (a short reason for a
    log line), or None when each row's file is the file its scan task reads."""
    try:
        text = optimized_plan(df)
    except Exception as exc:  # the plan cannot be read: nothing is traced
        return f"its Spark plan could not be read ({type(exc).__name__})"
    if _SUBQUERY.search(text):
        return "its plan has a subquery"
    nodes = [match[1] for line in text.splitlines() if (match := _NODE.match(line))]
    others = sorted({node for node in nodes if node not in ROW_KEEPING_NODES})
    if not nodes:
        return "its Spark plan could not be read"
    if others:
        return f"its plan combines or reorders rows ({', '.join(others)})"
    return None


def optimized_plan(df: DataFrame) -> str:
    """The tree string of `df`'s optimized logical plan."""
    if is_connect(df):
        connect: Any = df  # pyspark.sql.connect.dataframe.DataFrame
        explained = connect._explain_string(extended=True)
        start = explained.index(_OPTIMIZED) + len(_OPTIMIZED)
        end = explained.find(_PHYSICAL, start)
        return explained[start : end if end >= 0 else None].strip("\n")
    return str(df._jdf.queryExecution().optimizedPlan().treeString())


def with_files(df: DataFrame) -> DataFrame:
    """`df` with FILE_COLUMN: the file each row was read from ('' for rows read from no file).
    A projection of its own: Spark evaluates `input_file_name()` there, not inside observed
    metrics, which refuse to initialize it."""
    return df.withColumn(FILE_COLUMN, sql_column(df, "input_file_name()"))


def files_aggregate_sql(key_column: str) -> str:
    """The set of (key, file) pairs of the rows, as SQL of an aggregate for observed metrics
    over a DataFrame `with_files` (named `dws_files`)."""
    key, file = quoted_name(key_column), quoted_name(FILE_COLUMN)
    return f"collect_set(named_struct('k', {key}, 'f', {file})) AS dws_files"


def files_by_key(observed: Iterable[Any] | None) -> dict[int, set[str]]:
    """{key: the local paths of its rows' files} from the aggregate's value (rows read from no
    file are left out)."""
    found: dict[int, set[str]] = {}
    for pair in observed or ():
        key, uri = (pair["k"], pair["f"]) if isinstance(pair, Mapping) else (pair.k, pair.f)
        if key is None or not uri:
            continue
        found.setdefault(int(key), set()).add(file_path(str(uri)))
    return found


def file_path(uri: str) -> str:
    """A local path from the URI Spark names a file by (`file:///a%20b.csv` is `/a b.csv`);
    other URIs stay as they are."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return unquote(parts.path)
    return uri


def under(path: str, roots: Iterable[str]) -> bool:
    """Whether `path` is one of `roots` or inside one of them."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)
