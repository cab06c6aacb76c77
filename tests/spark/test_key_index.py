"""The key index of a range write: Spark finds each row's partition key among many keys by
hash (Spark's own xxhash64, computed in Python to build the table), whatever the keys hold."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster.spark.key_index import MAP_UP_TO, key_index_sql, spark_xxhash64


def spark_indexes(spark, keys: list[str], values: list[str | None]) -> list[Any]:
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, c string")
    return [row[1] for row in df.selectExpr("i", key_index_sql("c", keys)).orderBy("i").collect()]


def test_python_computes_sparks_xxhash64(spark) -> None:
    texts = ["", "a", "2024-01-01", "é", "日本語のキー", "x" * 31, "y" * 32, "z" * 33, "'\\\n"]
    df = spark.createDataFrame([(t,) for t in texts], "t string")
    assert [row[0] for row in df.selectExpr("xxhash64(t)").collect()] == [
        spark_xxhash64(t) for t in texts
    ]


def test_a_year_of_daily_keys_costs_a_hash_and_few_lookups(spark) -> None:
    keys = [f"2024-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29)]
    sql = key_index_sql("c", keys)
    assert "xxhash64" in sql and "map(" not in sql and sql.count("WHEN") <= 6
    values: list[str | None] = [*keys, "2024-13-01", "", None, keys[0].upper() + " "]
    assert spark_indexes(spark, keys, values) == [*range(len(keys)), None, None, None, None]


keys_strategy = st.lists(st.text(max_size=12), min_size=0, max_size=40, unique=True)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(keys=keys_strategy, others=st.lists(st.text(max_size=12), max_size=10))
def test_any_keys_are_found_and_nothing_else(spark, keys: list[str], others: list[str]) -> None:
    """Keys of any text (quotes, backslashes, any Unicode), as few as the map takes or more."""
    values: list[str | None] = [*keys, *others, None]
    expected = [keys.index(v) if v in keys else None for v in values]
    assert spark_indexes(spark, keys, values) == expected
    assert ("map(" in key_index_sql("c", keys)) == (0 < len(keys) <= MAP_UP_TO)
