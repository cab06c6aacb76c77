"""The window index of a range write: Spark's answer for each value is the window holding it,
however the windows are laid out (equal days, months, hours across daylight-saving changes, gaps,
empty and overlapping wall-clock windows), and the SQL stays the same size per row whatever the
number of windows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from dagster import (
    DailyPartitionsDefinition,
    HourlyPartitionsDefinition,
    MonthlyPartitionsDefinition,
    WeeklyPartitionsDefinition,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster.spark import window_index
from dws_dagster.spark.window_index import tree_index, window_index_sql

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def spark_indexes(spark, kind: str, values: list[Any], windows: list[tuple[Any, Any]]) -> list:
    """Spark's index for each value, in order (a timestamp value is a naive UTC instant, as
    the test session's time zone is UTC)."""
    spark_type = {"date": "date", "timestamp": "timestamp", "timestamp_ntz": "timestamp_ntz"}
    df = spark.createDataFrame(
        [(i, v) for i, v in enumerate(values)], f"i int, c {spark_type[kind]}"
    )
    sql = window_index_sql("c", kind, windows)  # type: ignore[arg-type]
    return [row[1] for row in df.selectExpr("i", sql).orderBy("i").collect()]


def expected_indexes(kind: str, values: list[Any], windows: list[tuple[Any, Any]]) -> list:
    """The window holding each value, by the comparison tree's rule, in Python."""

    def units(moment: Any) -> int:
        return window_index._units(kind, moment)  # type: ignore[arg-type]

    starts = [units(start) for start, _ in windows]
    ends = [units(end) for _, end in windows]
    return [tree_index(units(value), starts, ends) for value in values]


def instant(moment: dt.datetime) -> dt.datetime:
    """An aware datetime as the naive UTC value a `timestamp` column holds in the test session."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


def probes(windows: list[tuple[dt.datetime, dt.datetime]]) -> list[dt.datetime]:
    """Every bound, a microsecond either side of it, and the middle of each window."""
    found: list[dt.datetime] = []
    for start, end in windows:
        for bound in (start, end):
            found += [bound - dt.timedelta(microseconds=1), bound]
        found.append(start + (end - start) / 2)
    return found


DEFINITIONS = {
    "daily": DailyPartitionsDefinition(start_date="2024-01-01"),
    "daily in Paris": DailyPartitionsDefinition(start_date="2024-03-01", timezone="Europe/Paris"),
    "hourly in Paris": HourlyPartitionsDefinition(
        start_date="2024-10-26-20:00", timezone="Europe/Paris"
    ),
    "weekly": WeeklyPartitionsDefinition(start_date="2024-01-01"),
    "monthly in New York": MonthlyPartitionsDefinition(
        start_date="2023-01-01", timezone="America/New_York"
    ),
}


#: Every definition with every column type, but an hour's window has no date of its own.
CASES = [
    (kind, name)
    for kind in ("timestamp", "timestamp_ntz", "date")
    for name in DEFINITIONS
    if not (kind == "date" and name.startswith("hourly"))
]


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_every_row_gets_the_window_holding_it(spark, name: str, kind: str) -> None:
    """Dagster's own windows (daylight-saving changes included: Paris's autumn night repeats an
    hour, which wall-clock columns see as an empty window), every bound and both sides of it."""
    partitions_def = DEFINITIONS[name]
    keys = partitions_def.get_partition_keys(current_time=NOW)[:40]
    aware = [partitions_def.time_window_for_partition_key(k) for k in keys]
    # Probes in UTC: arithmetic and comparisons of datetimes in one time zone are wall-clock.
    moments = probes([(w.start.astimezone(dt.UTC), w.end.astimezone(dt.UTC)) for w in aware])
    if kind == "timestamp":
        windows: list[tuple[Any, Any]] = [(w.start, w.end) for w in aware]
        values: list[Any] = [instant(m) for m in moments]
        python = moments
    elif kind == "timestamp_ntz":
        windows = [(w.start.replace(tzinfo=None), w.end.replace(tzinfo=None)) for w in aware]
        local = [m.astimezone(aware[0].start.tzinfo) for m in moments]
        values = python = [m.replace(tzinfo=None) for m in local]
    else:
        windows = [(w.start.date(), w.end.date()) for w in aware]
        values = python = sorted({m.date() for m in moments})
    expected = expected_indexes(kind, python, windows)
    assert expected.count(None) < len(expected)  # the probes do land in windows
    assert spark_indexes(spark, kind, values, windows) == expected
    if kind == "timestamp":
        # The windows themselves, not only the tree's rule: each instant in the one holding it.
        utc = [(s.astimezone(dt.UTC), e.astimezone(dt.UTC)) for s, e in windows]
        assert expected == [
            next((i for i, (s, e) in enumerate(utc) if s <= m < e), None) for m in moments
        ]


def test_equal_adjacent_windows_cost_arithmetic_only_and_others_one_array_lookup() -> None:
    daily = [
        (dt.date(2024, 1, 1) + dt.timedelta(d), dt.date(2024, 1, 2) + dt.timedelta(d))
        for d in range(365)
    ]
    sql = window_index_sql("c", "date", daily)
    assert sql.count("CASE") == 1 and "array" not in sql and len(sql) < 300
    monthly = [(dt.date(2024, m, 1), dt.date(2024 + m // 12, m % 12 + 1, 1)) for m in range(1, 13)]
    sql = window_index_sql("c", "date", monthly)
    assert sql.count("CASE") == 1 and sql.count("element_at(array(") == 1


def test_a_grid_too_fine_falls_back_to_the_comparison_tree(spark) -> None:
    """Windows whose bounds share no coarse step (a microsecond apart from the next grid line)
    would need a huge table; the tree answers instead, the same way."""
    base = dt.datetime(2024, 1, 1)
    windows = [
        (base + dt.timedelta(hours=h), base + dt.timedelta(hours=h + 1, microseconds=-1))
        for h in range(0, 48, 2)
    ]
    sql = window_index_sql("c", "timestamp_ntz", windows)
    assert "array" not in sql and sql.count("CASE") > len(windows)
    values = probes(windows)
    assert spark_indexes(spark, "timestamp_ntz", values, windows) == expected_indexes(
        "timestamp_ntz", values, windows
    )


@st.composite
def layouts(draw: Any) -> tuple[list[tuple[int, int]], list[int]]:
    """Sorted windows on an integer line, with gaps, empty windows and overlaps, and values."""
    step = draw(st.sampled_from([1, 2, 3, 24, 60]))
    starts = sorted(draw(st.lists(st.integers(0, 40), min_size=1, max_size=12)))
    lengths = draw(st.lists(st.integers(-1, 6), min_size=len(starts), max_size=len(starts)))
    windows = [(s * step, (s + n) * step) for s, n in zip(starts, lengths, strict=True)]
    values = draw(st.lists(st.integers(-2 * step, 50 * step), min_size=1, max_size=30))
    return windows, values


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(layout=layouts())
def test_any_window_layout_gives_the_trees_answer(spark, layout) -> None:
    """Whatever the windows (as days of dates, so one Spark query per example)."""
    windows, values = layout
    origin = dt.date(2024, 1, 1)
    as_dates = [(origin + dt.timedelta(s), origin + dt.timedelta(e)) for s, e in windows]
    days = [origin + dt.timedelta(v) for v in values]
    assert spark_indexes(spark, "date", days, as_dates) == expected_indexes("date", days, as_dates)


def test_years_of_days_across_daylight_saving_changes_stay_on_the_grid(spark) -> None:
    """Four years of Paris days make an hourly grid of 35,064 cells: still one lookup a row (not
    the tree, whose code the JVM would leave uncompiled), and right on each change's day."""
    paris = DailyPartitionsDefinition(start_date="2020-01-01", timezone="Europe/Paris")
    keys = paris.get_partition_keys(current_time=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    aware = [paris.time_window_for_partition_key(k) for k in keys]
    windows: list[tuple[Any, Any]] = [(w.start, w.end) for w in aware]
    sql = window_index_sql("c", "timestamp", windows)
    assert sql.count("CASE") == 1 and "element_at(array(" in sql
    length = [
        (w.end.astimezone(dt.UTC) - w.start.astimezone(dt.UTC)).total_seconds() for w in aware
    ]
    changes = [w for w, seconds in zip(aware, length, strict=True) if seconds != 86_400]
    assert len(changes) == 8  # two a year
    moments = probes([(w.start.astimezone(dt.UTC), w.end.astimezone(dt.UTC)) for w in changes])
    expected = [keys.index(w.start.strftime("%Y-%m-%d")) for w in aware if w in changes]
    found = spark_indexes(spark, "timestamp", [instant(m) for m in moments], windows)
    assert found[1::5] == expected  # each change's day from its first instant
    assert found == expected_indexes("timestamp", moments, windows)
