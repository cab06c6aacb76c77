"""The content version of a DataFrame's rows, computed by Spark itself: schema, row count and
two independent sums of 64-bit row hashes, so the version is order-independent. Parquet bytes
differ between JVMs for identical data, and shuffles reorder rows, so hashing files would give
a new version on every run of an unchanged asset; this does not.

The aggregates are observed during the write (`observed`: no second pass over the data), or
run as one aggregation job (`dataframe_version`), and are the same SQL on a classic session and
on Spark Connect, so a version does not depend on how Spark was reached.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import xxhash
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql.types import MapType

from dws_dagster.spark.session_kind import new_observation, sql_column
from dws_dagster.spark.sql_quoting import quoted_name
from dws_dagster.workspace.files import canonical_json
from dws_dagster.workspace.versions import MARKER_SCHEME

_SALT = "dws-dagster/3"


def hash_inputs(df: DataFrame) -> list[str]:
    """SQL for each column's hash input. Map columns cannot be hashed by Spark; the JSON form
    of their entries sorted by key can. Sorted, because a map's entry order is not its value:
    the same Python dict becomes entries in one order through a classic session and in
    another through Spark Connect, and one logical map must have one version."""
    inputs = []
    for field in df.schema.fields:
        quoted = quoted_name(field.name)
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


def version_aggregates(df: DataFrame) -> list[Column]:
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
    return df.observe(observation, *version_aggregates(df)), observation


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


def dataframe_version(df: DataFrame) -> tuple[str, int]:
    """Version of a DataFrame's content, by running one aggregation job (no write)."""
    row = df.agg(*version_aggregates(df)).collect()[0].asDict()
    return version_of_metrics(df.schema.json(), row)
