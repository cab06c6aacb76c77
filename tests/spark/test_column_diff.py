"""Naming the columns in which two datasets differ (`spark.column_diff`), on real Spark over
files written the way the IO manager writes them; and finding the recorded data to compare
(`workspace.snapshots.replay_compare`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster.errors import StorageError
from dws_dagster.spark.column_diff import differing_columns


def _write(spark, rows: list[tuple], schema: str, path: Path, fmt: str = "parquet") -> Path:
    df = spark.createDataFrame(rows, schema).coalesce(1)
    writer = df.write.mode("overwrite").format(fmt)
    if fmt == "csv":
        writer = writer.option("header", "true")
    writer.save(str(path))
    return path


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "orc"])
def test_only_the_column_whose_values_changed_is_named(spark, tmp_path: Path, fmt: str) -> None:
    schema = "trip INT, fare DOUBLE, zone STRING"
    before = _write(spark, [(1, 10.0, "a"), (2, 20.0, "b")], schema, tmp_path / "a", fmt)
    after = _write(spark, [(2, 20.0, "b"), (1, 10.5, "a")], schema, tmp_path / "b", fmt)
    assert differing_columns(spark, before, after, fmt) == ("fare",)
    assert differing_columns(spark, before, before, fmt) == ()


def test_row_order_and_file_layout_do_not_count(spark, tmp_path: Path) -> None:
    rows = [(i, f"z{i % 7}") for i in range(200)]
    before = _write(spark, rows, "trip INT, zone STRING", tmp_path / "a")
    shuffled = spark.createDataFrame(list(reversed(rows)), "trip INT, zone STRING").repartition(5)
    shuffled.write.parquet(str(tmp_path / "b"))
    assert differing_columns(spark, before, tmp_path / "b", "parquet") == ()


def test_added_removed_and_retyped_columns_are_named(spark, tmp_path: Path) -> None:
    before = _write(spark, [(1, 2, "x")], "a INT, b INT, gone STRING", tmp_path / "a")
    after = _write(spark, [(1, 2.0, "y")], "a INT, b DOUBLE, new STRING", tmp_path / "b")
    # In the recorded order (removed and retyped), then the added ones.
    assert differing_columns(spark, before, after, "parquet") == ("b", "gone", "new")


def test_a_row_more_or_less_shows_in_every_column(spark, tmp_path: Path) -> None:
    before = _write(spark, [(1, "a"), (2, "b")], "trip INT, zone STRING", tmp_path / "a")
    after = _write(spark, [(1, "a")], "trip INT, zone STRING", tmp_path / "b")
    assert differing_columns(spark, before, after, "parquet") == ("trip", "zone")


def test_values_swapped_between_rows_name_no_column(spark, tmp_path: Path) -> None:
    """Each column keeps its multiset of values: no column differs, though the rows do (the
    caller says so rather than naming none silently)."""
    before = _write(spark, [(1, "a"), (2, "b")], "trip INT, zone STRING", tmp_path / "a")
    after = _write(spark, [(1, "b"), (2, "a")], "trip INT, zone STRING", tmp_path / "b")
    assert differing_columns(spark, before, after, "parquet") == ()


def test_nulls_maps_and_awkward_names_are_compared(spark, tmp_path: Path) -> None:
    schema = "`a.b` INT, `we``ird` STRING, m MAP<STRING, INT>, s STRUCT<x: INT, y: ARRAY<INT>>"
    rows = [(1, None, {"k": 1}, (1, [1, 2])), (None, "v", {}, None)]
    before = _write(spark, rows, schema, tmp_path / "a")
    changed = [(1, "v", {"k": 1}, (1, [1, 2])), (None, None, {"k": 2}, None)]
    after = _write(spark, changed, schema, tmp_path / "b")
    # `we``ird` moved its null to the other row (same multiset); the map changed a value.
    assert differing_columns(spark, before, after, "parquet") == ("m",)
    nulled = [(1, None, {"k": 1}, None), (None, "v", {}, None)]
    assert differing_columns(
        spark, before, _write(spark, nulled, schema, tmp_path / "c"), "parquet"
    ) == ("s",)


def test_unreadable_data_is_a_storage_error_naming_the_path(spark, tmp_path: Path) -> None:
    before = _write(spark, [(1,)], "a INT", tmp_path / "a")
    with pytest.raises(StorageError, match="cannot read .*nowhere as parquet"):
        differing_columns(spark, before, tmp_path / "nowhere", "parquet")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.integers(-(2**31), 2**31 - 1) | st.none(), min_size=1, max_size=30),
    change=st.integers(0, 29),
    delta=st.integers(1, 1000),
)
def test_any_single_changed_value_is_found(spark, tmp_path_factory, values, change, delta) -> None:
    folder = tmp_path_factory.mktemp("cols")
    rows = [(i, v) for i, v in enumerate(values)]
    at = change % len(rows)
    old = rows[at][1]
    changed = list(rows)
    changed[at] = (at, None if old is not None and delta % 5 == 0 else (old or 0) + delta)
    before = _write(spark, rows, "i INT, v BIGINT", folder / "a")
    after = _write(spark, changed, "i INT, v BIGINT", folder / "b")
    assert differing_columns(spark, before, after, "parquet") == ("v",)


def test_the_format_of_script_data_is_found_however_deep_it_is_nested(tmp_path: Path) -> None:
    """A script's output has no recorded format: replay reads it by the one suffix its data
    files share, found by a walk that does not recurse (data may lie deeper than Python's
    recursion limit) and skips what Spark skips (`_SUCCESS`, `.crc`, `_`/`.` folders)."""
    from dws_dagster.replay.compare import _format_of_files
    from dws_dagster.workspace.trees import remove_tree

    top = tmp_path / "out"
    folder = top
    folder.mkdir()
    try:
        for _ in range(1200):
            folder = folder / "d"
            folder.mkdir()
        (folder / "part-0.csv").write_text("a\n1\n")
        (folder / "_SUCCESS").write_text("")
        (folder / ".part-0.csv.crc").write_text("")
        (top / "_temporary").mkdir()
        (top / "_temporary" / "x.json").write_text("{}")
        assert _format_of_files(top) == "csv"
        (top / "more.json").write_text("{}")
        assert _format_of_files(top) is None  # two suffixes: no one format to read it by
    finally:  # pytest's own clean-up of old temporary folders recurses: leave it nothing deep
        remove_tree(top, ignore_errors=True)
