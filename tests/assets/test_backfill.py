"""A range of partitions materialized in one run (`BackfillPolicy.single_run()`): one Spark write,
and for each partition exactly what one run per partition records — ref, data, content
version, lineage record, Dagster metadata — with a failure part-way leaving each partition old
or new, and downstream assets reading the range."""

import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    BackfillPolicy,
    DagsterInstance,
    DailyPartitionsDefinition,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dws_dagster import Workspace, dws_ref, process_events
from dws_dagster.assets.materialization import record_from_metadata
from dws_dagster.errors import PartitionRangeError, RangeWriteError, RowsOutsideRangeError
from dws_dagster.spark import range_write
from dws_dagster.spark.session_kind import is_connect
from dws_dagster.spark.version_marker import read_marker
from tests.assets.test_io_manager import root_cause
from tests.support.pipeline import io_manager, make_workspace

pytestmark = pytest.mark.spark

#: 33 days: 2024-01-01 … 2024-02-02.
DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-03")
KEYS = DAYS.get_partition_keys()
RANGE_TAGS = {
    "dagster/asset_partition_range_start": KEYS[0],
    "dagster/asset_partition_range_end": KEYS[-1],
}
#: `events` is also materialized alone on every day; `readings` and `daily` on a few (the
#: first, one with no events, the last), to save time.
ALONE = {
    "events": KEYS,
    "readings": [KEYS[0], KEYS[1], KEYS[4], KEYS[16], KEYS[-1]],
    "daily": [KEYS[0], KEYS[4], KEYS[-1]],
}
#: Fields of a record that name the run or its time, not what was written.
RUN_FIELDS = ("start_time", "end_time")


def land_readings(ws: Workspace) -> None:
    """One landed CSV file per day (`source-data/readings/day_<key>.csv`): 1 to 3 readings of
    that day, and one of the next day (a dirty row, which the day's asset filters out)."""
    folder = ws.local_path("source-data/readings")
    folder.mkdir(parents=True, exist_ok=True)
    for n, key in enumerate(KEYS):
        following = DAYS.time_window_for_partition_key(key).end.date().isoformat()
        lines = ["day,reading", *[f"{key},{n * 10 + i}" for i in range(1 + n % 3)]]
        (folder / f"day_{key}.csv").write_text("\n".join([*lines, f"{following},-1"]) + "\n")


def backfill_assets(
    spark: Any, shift: list[int], landed: dict[str, Path] | None = None
) -> list[Any]:
    """`events` (days whose day of month is a multiple of 5 have no rows), `daily` (one row per
    day of events, identity mapping) and `summary` (every day), all from windows, so a day's
    rows are the same whether it is written alone or in a range; `readings` reads each day's
    landed file by path (from the workspace at `landed["root"]`), the way the example's
    staging assets do."""
    single_run = BackfillPolicy.single_run()

    @asset(
        partitions_def=DAYS,
        backfill_policy=single_run,
        metadata={**dws_ref("intermediate-data", "events"), "partition_expr": "day"},
        code_version="1",
    )
    def events(context) -> DataFrame:
        window = context.partition_time_window
        first, end = window.start.date(), window.end.date()
        days = spark.range(1, numPartitions=1).select(
            F.explode(F.sequence(F.lit(first), F.date_sub(F.lit(end), 1))).alias("day")
        )
        n = F.dayofmonth("day") % 5
        rows = days.select(
            "day", n.alias("n"), F.explode(F.sequence(F.lit(1), F.greatest(n, F.lit(1)))).alias("i")
        ).where(F.col("n") > 0)
        return rows.select(
            "day",
            (F.col("i") * 7 + F.lit(shift[0])).alias("value"),
            F.concat(F.lit("x"), F.col("i").cast("string")).alias("label"),
        )

    @asset(
        partitions_def=DAYS,
        backfill_policy=single_run,
        metadata={**dws_ref("intermediate-data", "daily"), "partition_expr": "day"},
        code_version="1",
    )
    def daily(events: DataFrame) -> DataFrame:
        return events.groupBy("day").agg(
            F.count(F.lit(1)).alias("rows"), F.sum("value").alias("total")
        )

    @asset(metadata=dws_ref("intermediate-data", "summary"))
    def summary(events: DataFrame) -> DataFrame:
        return events.groupBy("day").count()

    @asset(
        partitions_def=DAYS,
        backfill_policy=single_run,
        metadata={**dws_ref("intermediate-data", "readings"), "partition_expr": "day"},
        code_version="1",
    )
    def readings(context) -> DataFrame:
        assert landed is not None
        days = [
            spark.read.csv(
                str(landed["root"] / "source" / "readings" / f"day_{key}.csv"),
                header=True,
                schema="day date, reading int",
            ).where(F.col("day") == F.lit(key).cast("date"))
            for key in context.partition_keys
        ]
        return functools.reduce(DataFrame.unionByName, days)

    return [events, daily, summary, readings]


def materializations(result: Any, name: str) -> dict[str, dict[str, Any]]:
    """{partition: metadata} of one asset's materializations in a run."""
    found = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        if mat.asset_key == AssetKey(name):
            found[mat.partition] = dict(mat.metadata)
    return found


def rows_by_partition(
    spark: Any, ws: Workspace, name: str, columns: list[str] | None = None
) -> dict[str, list[Any]]:
    """{partition key: its rows (of `columns`, all by default), sorted} of a daily asset, read
    in one scan."""
    root = ws.local_path(f"intermediate-data/{name}")
    data = spark.read.option("recursiveFileLookup", "true").parquet(str(root))
    keyed = data.select(
        F.regexp_extract(F.input_file_name(), r"/(\d{4}-\d\d-\d\d)/[^/]*$", 1).alias("_key"),
        *(columns or data.columns),
    )
    found: dict[str, list[Any]] = {}
    for row in keyed.collect():
        found.setdefault(row["_key"], []).append(tuple(row)[1:])
    return {key: sorted(rows) for key, rows in found.items()}


def warnings_of(instance: DagsterInstance, run_id: str) -> list[str]:
    return [
        entry.user_message
        for entry in instance.all_logs(run_id)
        if entry.level >= 30 and entry.user_message
    ]


def in_chain(exc: BaseException, kind: type[BaseException]) -> BaseException:
    """The first exception of `kind` among `exc` and its causes."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, kind):
        seen = seen.__cause__
    assert seen is not None, f"no {kind.__name__} in {exc!r}"
    return seen


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in record.items() if k not in RUN_FIELDS}
    data["step"] = {k: v for k, v in data["step"].items() if k != "run_id"}
    return data


@dataclass
class Backfilled:
    """The same 33 days of `events`, `daily` and `readings` backfilled as one run in `ranged_ws`
    and as one run per partition in `one_ws`."""

    assets: list[Any]
    instance: DagsterInstance
    ranged_ws: Workspace
    one_ws: Workspace
    result: Any
    single: dict[str, dict[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def backfilled(spark, tmp_path_factory) -> Iterator[Backfilled]:
    base = tmp_path_factory.mktemp("backfill")
    landed: dict[str, Path] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assets = backfill_assets(spark, [0], landed)
    ranged_ws, one_ws = make_workspace(base / "ranged"), make_workspace(base / "one")
    selection = ["events", "daily", "readings"]
    with DagsterInstance.ephemeral() as ranged, DagsterInstance.ephemeral() as one_by_one:
        land_readings(ranged_ws)
        landed["root"] = ranged_ws.root
        result = materialize(
            assets,
            instance=ranged,
            resources={"io_manager": io_manager(ranged_ws)},
            selection=selection,
            tags=RANGE_TAGS,
        )
        assert result.success
        land_readings(one_ws)
        landed["root"] = one_ws.root
        single: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in selection}
        for key in KEYS:
            chosen = [name for name in selection if key in ALONE[name]]
            one = materialize(
                assets,
                instance=one_by_one,
                resources={"io_manager": io_manager(one_ws)},
                selection=chosen,
                partition_key=key,
            )
            for name in chosen:
                single[name][key] = materializations(one, name)[key]
        landed["root"] = ranged_ws.root
        yield Backfilled(assets, ranged, ranged_ws, one_ws, result, single)


def test_a_single_run_backfill_records_what_one_run_per_partition_records(spark, backfilled):
    ranged_ws, one_ws, result = backfilled.ranged_ws, backfilled.one_ws, backfilled.result
    # One step per asset for the whole range, one materialization per partition.
    assert len(result.get_step_success_events()) == 3
    ranged = {name: materializations(result, name) for name in ("events", "daily", "readings")}
    assert all(sorted(found) == KEYS for found in ranged.values())
    empty = [k for k in KEYS if int(k[-2:]) % 5 == 0]
    assert len(empty) == 6
    for name in ("events", "daily", "readings"):
        versions = set()
        rows_a, rows_b = (rows_by_partition(spark, ws, name) for ws in (ranged_ws, one_ws))
        for key in KEYS:
            ref = f"intermediate-data/{name}/{key}"
            record_a = ranged_ws.store.get(ref).record
            assert record_a["step"]["run_id"] == result.run_id
            versions.add(record_a["version"])
            assert ranged_ws.version_of(ref) == record_a["version"]
            assert len(rows_a.get(key, [])) == record_a["extra"]["rows"]
            if name == "events" and key in empty:
                assert record_a["extra"]["rows"] == 0
            if key not in ALONE[name]:
                continue
            record_b = one_ws.store.get(ref).record
            assert comparable(record_a) == comparable(record_b), ref
            # The data: the same rows, the same columns, the same version on disk.
            folder_a, folder_b = ranged_ws.local_path(ref), one_ws.local_path(ref)
            marker_a, marker_b = (read_marker(None, str(f)) for f in (folder_a, folder_b))
            assert marker_a is not None and marker_b is not None
            assert marker_a["columns"] == marker_b["columns"]
            assert rows_a.get(key, []) == rows_b.get(key, []), ref
        # Empty days share the empty dataset's version; every other day has its own.
        assert len(versions) == len(KEYS) - (len(empty) - 1 if name != "readings" else 0)
    # Each partition's own inputs: daily's day reads events' same day only, readings' day the
    # day's landed file only (the range read all 33, and each row says which file it is from).
    for key in KEYS:
        daily_record = ranged_ws.store.get(f"intermediate-data/daily/{key}").record
        assert [i["ref"] for i in daily_record["inputs"]] == [f"intermediate-data/events/{key}"]
    for key in KEYS:
        landed = f"source-data/readings/day_{key}.csv"
        record = ranged_ws.store.get(f"intermediate-data/readings/{key}").record
        assert [(i["ref"], i["version"]) for i in record["inputs"]] == [
            (landed, ranged_ws.version_of(landed))
        ]
        sources = record["extra"]["column_lineage"]["columns"]["reading"]
        assert {s["ref"] for s in sources} == {landed}
        assert ranged["readings"][key]["dws/inputs_by_path"].value == {
            "exact": [landed],
            "every_partition": [],
        }
    assert not [w for w in warnings_of(backfilled.instance, result.run_id) if "by path" in w]
    # Dagster metadata per partition: what one run gives.
    for name, items in (
        ("events", ("dws/ref", "dws/version", "dagster/row_count", "dws/parameters")),
        ("readings", ("dws/version", "dws/inputs", "dws/input_schemas", "dws/column_lineage")),
    ):
        for key in ALONE[name]:
            meta_a, meta_b = ranged[name][key], backfilled.single[name][key]
            for item in items:
                assert meta_a[item] == meta_b[item], (name, key, item)
            # The record the lineage sensor rebuilds from the event is the one committed.
            rebuilt = record_from_metadata(meta_a, asset=name, run_id=result.run_id, partition=key)
            assert rebuilt is not None
            committed = ranged_ws.store.get(f"intermediate-data/{name}/{key}").record
            assert rebuilt.to_json() == committed
    before = {ref: state.to_json() for ref, state in ranged_ws.store.items()}
    outcome = process_events(backfilled.instance, ranged_ws, openlineage=False)
    assert outcome.applied.events >= 3 * len(KEYS)
    assert {ref: state.to_json() for ref, state in ranged_ws.store.items()} == before

    # A downstream asset reading the whole range: every partition, as one input.
    down = materialize(
        backfilled.assets,
        instance=backfilled.instance,
        resources={"io_manager": io_manager(ranged_ws)},
        selection=["summary"],
    )
    meta = materializations(down, "summary")[None]
    assert [i["ref"] for i in meta["dws/inputs"].value] == [
        f"intermediate-data/events/{k}" for k in KEYS
    ]
    assert [i["version"] for i in meta["dws/inputs"].value] == [
        one_ws.store.get(f"intermediate-data/events/{k}").version for k in KEYS
    ]
    rows = spark.read.parquet(str(ranged_ws.local_path("intermediate-data/summary")))
    assert len(rows.collect()) == len(KEYS) - len(empty)


@pytest.mark.parametrize("failing", [0, 7, 32])
def test_a_failure_part_way_leaves_each_partition_old_or_new(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
):
    """The swap of partition `failing` fails: the partitions before it hold the new data with
    their records, it and the ones after keep their previous data, whole, with a failed
    attempt on record."""
    shift = [0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assets = backfill_assets(spark, shift)
    ws = make_workspace(tmp_path / "ws")
    resources = {"io_manager": io_manager(ws)}
    with DagsterInstance.ephemeral() as instance:
        first = materialize(
            assets, instance=instance, resources=resources, selection=["events"], tags=RANGE_TAGS
        )
        old = {k: ws.store.get(f"intermediate-data/events/{k}").version for k in KEYS}
        shift[0] = 1
        real_swap = range_write.swap_into_place
        calls = []

        def swap(staging, target, **kwargs):
            calls.append(target)
            if len(calls) == failing + 1:
                raise OSError(28, "No space left on device (injected)")
            return real_swap(staging, target, **kwargs)

        monkeypatch.setattr(range_write, "swap_into_place", swap)
        with pytest.raises(Exception) as info:
            materialize(
                assets,
                instance=instance,
                resources=resources,
                selection=["events"],
                tags=RANGE_TAGS,
            )
        error = in_chain(info.value, RangeWriteError)
        assert f"{failing} of {len(KEYS)} partitions hold the new data" in str(error)
        assert not list(ws.local_path("intermediate-data/events").glob(".dws-staging-*"))
        values = rows_by_partition(spark, ws, "events", ["value"])  # no rows: no key
        for i, key in enumerate(KEYS):
            ref = f"intermediate-data/events/{key}"
            state = ws.store.get(ref)
            on_disk = ws.version_of(ref)
            if i < failing:
                assert state.version == on_disk and state.attempt is None
                assert state.record["step"]["run_id"] != first.run_id
                assert all(value % 7 == 1 for (value,) in values.get(key, [])), key
            else:
                assert state.version == on_disk == old[key], key
                assert state.record["step"]["run_id"] == first.run_id
                assert state.attempt is not None and state.attempt["status"] == "failed"
                assert "injected" in state.attempt["error"]
                assert all(value % 7 == 0 for (value,) in values.get(key, [])), key


def test_a_range_needs_its_partition_column_and_refuses_rows_outside_it(spark, tmp_path: Path):
    """Without `partition_expr` the rows cannot be told apart; rows outside the range are
    refused; either way nothing is written."""
    ws = make_workspace(tmp_path / "ws")
    regions = StaticPartitionsDefinition(["eu", "us"])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @asset(
            partitions_def=regions,
            backfill_policy=BackfillPolicy.single_run(),
            metadata=dws_ref("intermediate-data", "unkeyed"),
        )
        def unkeyed() -> DataFrame:
            return spark.range(3).withColumn("region", F.lit("eu"))

        @asset(
            partitions_def=regions,
            backfill_policy=BackfillPolicy.single_run(),
            metadata={**dws_ref("intermediate-data", "sales"), "partition_expr": "region"},
        )
        def sales() -> DataFrame:
            return spark.createDataFrame(
                [("eu", 1), ("us", 2), ("asia", 3)], "region string, n int"
            )

    tags = {"dagster/asset_partition_range_start": "eu", "dagster/asset_partition_range_end": "us"}
    with DagsterInstance.ephemeral() as instance:
        for assets_def, refusal in ((unkeyed, PartitionRangeError), (sales, RowsOutsideRangeError)):
            with pytest.raises(Exception) as info:
                materialize(
                    [assets_def],
                    instance=instance,
                    resources={"io_manager": io_manager(ws)},
                    tags=tags,
                )
            error = root_cause(info.value)
            assert isinstance(error, refusal), error
            assert "nothing was written" in str(error)
            name = assets_def.key.to_user_string()
            folder = ws.local_path(f"intermediate-data/{name}")
            assert not folder.exists() or not [
                p for p in folder.iterdir() if not p.name.startswith(".dws")
            ]
            assert ws.store.get(f"intermediate-data/{name}/eu") is None or (
                ws.store.get(f"intermediate-data/{name}/eu").version is None
            )


@pytest.mark.parametrize("kind", ["date", "timestamp", "timestamp_ntz", "string"])
def test_each_row_finds_its_partition_by_its_column(spark, kind: str):
    """Rows on window bounds, inside windows and outside the range, for every column type a
    time-window partition's column may have: the index is the window holding the value."""
    import datetime as dt

    from dagster import HourlyPartitionsDefinition

    from dws_dagster.assets.partition_range import partition_index

    hours = HourlyPartitionsDefinition(start_date="2024-03-30-00:00", timezone="Europe/Paris")
    keys = hours.get_partition_keys(current_time=dt.datetime(2024, 4, 1, tzinfo=dt.UTC))[20:47]
    windows = [hours.time_window_for_partition_key(k) for k in keys]
    moments = [w.start for w in windows] + [w.start + dt.timedelta(minutes=59) for w in windows]
    moments += [windows[0].start - dt.timedelta(seconds=1), windows[-1].end]
    expected = [
        next((i for i, w in enumerate(windows) if w.start <= m < w.end), None) for m in moments
    ]
    utc = [m.astimezone(dt.UTC).replace(tzinfo=None) for m in moments]
    if kind == "date":
        days = DAYS.get_partition_keys()
        keys = days
        windows = [DAYS.time_window_for_partition_key(k) for k in days]
        values: list[Any] = [w.start.date() for w in windows]
        values += [dt.date(2023, 12, 31), dt.date(2024, 2, 3)]
        expected = [*range(len(days)), None, None]
        df = spark.createDataFrame([(v,) for v in values], "c date")
        partitions_def: Any = DAYS
    elif kind == "string":
        values = [*keys, "nope"]
        expected = [*range(len(keys)), None]
        df = spark.createDataFrame([(v,) for v in values], "c string")
        partitions_def = hours
    elif kind == "timestamp":
        # Session time zone UTC (conftest): naive values are UTC instants.
        df = spark.createDataFrame([(v,) for v in utc], "c timestamp")
        partitions_def = hours
    else:
        wall = [m.replace(tzinfo=None) for m in moments]
        df = spark.createDataFrame([(v,) for v in wall], "c timestamp_ntz")
        partitions_def = hours
    index = partition_index(partitions_def, keys, "c", df, "probe")
    found = [row[0] for row in df.select(index).collect()]
    assert found == expected


def test_inputs_read_by_path_are_recorded_with_every_partition_where_rows_cannot_tell(
    spark, tmp_path: Path
):
    """Three days in one run: `joined` joins the days' files (a row's file is not all it
    depends on), `filtered` drops every row of the second day, `mixed` gives it a row read from
    no file instead. The records are conservative,
    never short: more inputs than one run per partition records, said on each
    materialization and in the run's log."""
    ws = make_workspace(tmp_path / "ws")
    land_readings(ws)
    first = KEYS[:3]
    files = [f"source-data/readings/day_{key}.csv" for key in first]

    def read(key: str) -> DataFrame:
        return spark.read.csv(
            str(ws.local_path(f"source-data/readings/day_{key}.csv")),
            header=True,
            schema="day date, reading int",
        ).where(F.col("day") == F.lit(key).cast("date"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @asset(
            partitions_def=DAYS,
            backfill_policy=BackfillPolicy.single_run(),
            metadata={**dws_ref("intermediate-data", "joined"), "partition_expr": "day"},
        )
        def joined(context) -> DataFrame:
            days = functools.reduce(DataFrame.unionByName, map(read, context.partition_keys))
            return days.join(spark.range(100).withColumnRenamed("id", "reading"), "reading")

        @asset(
            partitions_def=DAYS,
            backfill_policy=BackfillPolicy.single_run(),
            metadata={**dws_ref("intermediate-data", "filtered"), "partition_expr": "day"},
        )
        def filtered(context) -> DataFrame:
            days = functools.reduce(DataFrame.unionByName, map(read, context.partition_keys))
            return days.where(F.col("day") != F.lit(first[1]).cast("date"))

        @asset(
            partitions_def=DAYS,
            backfill_policy=BackfillPolicy.single_run(),
            metadata={**dws_ref("intermediate-data", "mixed"), "partition_expr": "day"},
        )
        def mixed(context) -> DataFrame:
            days = functools.reduce(DataFrame.unionByName, map(read, context.partition_keys))
            typed = spark.createDataFrame([(first[1], 99)], "day string, reading int")
            made = typed.select(F.col("day").cast("date").alias("day"), "reading")
            return days.where(F.col("day") != F.lit(first[1]).cast("date")).unionByName(made)

    tags = {
        "dagster/asset_partition_range_start": first[0],
        "dagster/asset_partition_range_end": first[-1],
    }
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [joined, filtered, mixed],
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            tags=tags,
        )
        assert result.success
        logged = warnings_of(instance, result.run_id)

    def recorded(name: str, key: str) -> list[str]:
        record = ws.store.get(f"intermediate-data/{name}/{key}").record
        assert set(record["provenance"]) >= {i["ref"] for i in record["inputs"]}
        return [i["ref"] for i in record["inputs"]]

    by_path = {name: materializations(result, name) for name in ("joined", "filtered", "mixed")}
    for key in first:
        assert recorded("joined", key) == files
        said = by_path["joined"][key]["dws/inputs_by_path"].value
        assert said["exact"] == [] and said["every_partition"] == files
        assert "which file each row came from is unknown" in said["reason"]
        assert "Join" in said["reason"]
    # The second day got no row: all three files. Its file gave no row to any partition: an
    # input of every partition. The others hold their own file's rows: exact.
    assert recorded("filtered", first[1]) == files
    said = by_path["filtered"][first[1]]["dws/inputs_by_path"].value
    assert said["every_partition"] == files and "received no row" in said["reason"]
    for key, own in ((first[0], files[0]), (first[2], files[2])):
        assert recorded("filtered", key) == sorted([own, files[1]])
        said = by_path["filtered"][key]["dws/inputs_by_path"].value
        assert said["exact"] == [own] and said["every_partition"] == [files[1]]
        assert f"no row of {files[1]} reached any partition" in said["reason"]
    # `mixed` gives the second day a row read from no file: that day has rows, none from the
    # landed files, so it records no file of its own; its file reached no partition.
    for key, own in ((first[0], [files[0]]), (first[1], []), (first[2], [files[2]])):
        assert recorded("mixed", key) == sorted([*own, files[1]])
        said = by_path["mixed"][key]["dws/inputs_by_path"].value
        assert said["exact"] == own and said["every_partition"] == [files[1]]
    notes = [w for w in logged if "read by path as inputs of every partition" in w]
    assert sorted(n.split("'")[1] for n in notes) == ["filtered", "joined", "mixed"]
    assert "3 of 3 partitions" in next(n for n in notes if "'filtered'" in n)


def test_rows_are_traced_to_their_files_only_through_plans_that_keep_rows_whole(
    spark, tmp_path: Path
):
    """Projections, filters, unions and explode keep each row the row its scan read; joins,
    aggregations, windows, sorts, shuffles, limits, subqueries and Python UDFs do not. A
    file's name comes back as its local path, whatever characters it holds."""
    from pyspark.sql import types as T

    from dws_dagster.spark.row_files import file_path, untraceable

    paths = [tmp_path / "a b%.csv", tmp_path / "c.csv"]
    for n, path in enumerate(paths):
        path.write_text(f"day,reading\n2024-01-0{n + 1},{n}\n")
    a, b = (spark.read.csv(str(p), header=True, schema="day date, reading int") for p in paths)
    kept = (
        a.where("reading >= 0")
        .unionByName(b)
        .select("day", F.explode(F.array("reading", F.lit(1))).alias("reading"))
        .withColumn("twice", F.col("reading") * 2)
    )
    assert untraceable(kept) is None
    assert untraceable(spark.range(3).unionByName(spark.range(2))) is None
    assert sorted(file_path(r[0]) for r in kept.select(F.input_file_name()).collect()) == sorted(
        [str(paths[0])] * 2 + [str(paths[1])] * 2
    )
    by_day = Window.partitionBy("day").orderBy("reading")
    echo = F.udf(lambda x: x, T.IntegerType())
    combined = {
        "Join": a.join(b, "day"),
        "Aggregate": a.groupBy("day").count(),
        "Window": a.withColumn("n", F.row_number().over(by_day)),
        "Sort": a.orderBy("reading"),
        "Repartition": a.repartition(3),
        "Limit": a.limit(1),
        "subquery": a.where("reading > (SELECT max(id) FROM range(3))"),
        "Python": a.select(echo("reading")),
    }
    for node, df in combined.items():
        reason = untraceable(df)
        assert reason is not None and node in reason, (node, reason)


@pytest.mark.slow
def test_a_range_on_spark_connect_records_what_classic_records(
    spark, backfilled, connect_session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The same 33-day backfill as one run on a Spark Connect session: each partition's data,
    version, inputs (the landed file whose rows it holds) and provenance are the classic
    session's; column lineage is not derived on Connect yet."""
    landed: dict[str, Path] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assets = backfill_assets(connect_session, [0], landed)
    ws = make_workspace(tmp_path / "connect")
    land_readings(ws)
    landed["root"] = ws.root
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            assets,
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            selection=["events", "readings"],
            tags=RANGE_TAGS,
        )
        assert result.success
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")
    readings = materializations(result, "readings")

    classic_ws = backfilled.ranged_ws
    for name in ("events", "readings"):
        for key in KEYS:
            ref = f"intermediate-data/{name}/{key}"
            connect, classic = ws.store.get(ref).record, classic_ws.store.get(ref).record
            # Column lineage included: Connect's walk of the client's plan gives the classic one.
            assert comparable(connect) == comparable(classic), ref
            assert "column_lineage" in connect["extra"]
            assert ws.version_of(ref) == classic["version"]
    # The data itself (a version is not the proof), read back on the classic session.
    assert rows_by_partition(spark, ws, "events") == rows_by_partition(spark, classic_ws, "events")
    for key in KEYS:
        assert readings[key]["dws/inputs_by_path"].value == {
            "exact": [f"source-data/readings/day_{key}.csv"],
            "every_partition": [],
        }


def write_keyed_range(
    df: DataFrame, keys: list[str], out: Path, **options: Any
) -> range_write.RangeResult:
    """`write_range_atomic` of `df`'s rows to the partitions `keys`, a row's partition by its
    `day` column, each partition to `out/<key>`."""
    index = F.expr("map(" + ", ".join(f"'{k}', {n}" for n, k in enumerate(keys)) + ")[day]")
    targets = [range_write.RangeTarget(k, str(out / k)) for k in keys]
    return range_write.write_range_atomic(df, targets, index, staging_parent=str(out), **options)


def test_the_partitions_of_a_short_range_have_the_versions_of_their_rows_written_alone(
    spark_session, tmp_path: Path
):
    """A few partitions are versioned in the write pass (longer ranges by a pass over what
    was written, which the 33-day tests compare with one run per partition): on a classic or
    a Spark Connect session, each partition's version is the one its rows written alone get
    (maps, nulls and a partition with no rows included)."""
    spark, days = spark_session, 3
    from dws_dagster.spark import storage

    keys = KEYS[:days]
    rows = [
        (key, i, None if i % 2 else f"v{i}", {"b": i, "a": -i})
        for n, key in enumerate(keys)
        if n != 1
        for i in range(n + 2)
    ]
    df = spark.createDataFrame(rows, "day string, i int, s string, m map<string,int>")
    result = write_keyed_range(df, keys, tmp_path / "out")
    for key in keys:
        alone = storage.write_atomic(df.where(F.col("day") == key), str(tmp_path / "alone" / key))
        assert result.results[key].version == alone.version, key
        assert result.results[key].row_count == alone.row_count
    assert result.results[keys[1]].row_count == 0


def test_a_long_range_versions_columns_whatever_their_names(spark_session, tmp_path: Path):
    """Past the partitions observed in the write pass, the written files are read back by
    column name: names with a backtick, a dot or a space are read as themselves, and each
    partition's version is the one its rows written alone get."""
    spark = spark_session
    from dws_dagster.spark import storage

    keys = KEYS[: range_write._OBSERVED_PARTITIONS + 2]
    rows = [(key, n, f"v{n}") for n, key in enumerate(keys)]
    df = spark.createDataFrame(rows, "day string, `a``b` int, `c.d e` string")
    result = write_keyed_range(df, keys, tmp_path / "out")
    for key in keys:
        alone = storage.write_atomic(df.where(F.col("day") == key), str(tmp_path / "alone" / key))
        assert result.results[key].version == alone.version, key
        assert result.results[key].row_count == 1


@pytest.mark.parametrize(
    ("fmt", "partition_by"), [("json", None), ("csv", None), ("parquet", ["bucket"])]
)
def test_a_long_range_its_files_cannot_version_is_versioned_from_the_rows_it_wrote(
    spark_session, tmp_path: Path, fmt: str, partition_by: list[str] | None
):
    """Where the written files do not give back the exact values (text formats, folders Spark
    partitions further), a long range cannot version its partitions from its files; it must
    not version them from a second run of the DataFrame's plan either, which may give other
    rows (a clock read per query, a source changed in between). Each partition's version is
    the version of the rows it holds: read back here, where these columns round-trip."""
    spark = spark_session
    from dws_dagster.spark import row_version

    keys = KEYS[: range_write._OBSERVED_PARTITIONS + 2]
    rows = [(key, n % 2) for n, key in enumerate(keys) for _ in range(3)]
    df = spark.createDataFrame(rows, "day string, bucket int").selectExpr(
        "day", "bucket", "unix_micros(current_timestamp()) AS loaded_at"
    )
    options = {"header": "true"} if fmt == "csv" else None
    classic = not is_connect(spark)
    cached = spark.sparkContext._jsc.getPersistentRDDs().size() if classic else None
    result = write_keyed_range(
        df, keys, tmp_path / "out", fmt=fmt, options=options, partition_by=partition_by
    )
    for key in keys:
        reader = spark.read.format(fmt).schema(df.schema).options(**(options or {}))
        written = reader.load(str(tmp_path / "out" / key)).select(*df.columns)
        # Files read back are nullable whatever was written; the version has the written schema.
        metrics = written.agg(*row_version.version_aggregates(written)).collect()[0].asDict()
        version, count = row_version.version_of_metrics(df.schema.json(), metrics)
        assert (result.results[key].version, count) == (version, 3), key
    if classic:  # the rows were cached for the write and the versions, then released
        assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_a_long_range_tells_each_partition_the_files_its_rows_came_from(
    spark_session, tmp_path: Path, fmt: str
):
    """Past the partitions observed in the write pass, in a format versioned from the files
    written (Parquet) and in one versioned from rows kept once for the write (JSON): each
    partition is told the files its rows were read from, and only those."""
    spark = spark_session
    keys = KEYS[: range_write._OBSERVED_PARTITIONS + 2]
    sources = tmp_path / "sources"
    sources.mkdir()
    for n, key in enumerate(keys[:-1]):  # the last partition gets no row
        (sources / f"day {key}.csv").write_text(f"day,reading\n{key},{n}\n{key},{n + 1}\n")
    df = spark.read.csv(str(sources), header=True, schema="day string, reading int")
    told: dict[str, frozenset[str]] = {}
    result = write_keyed_range(df, keys, tmp_path / "out", fmt=fmt, read_files=told.update)
    assert told == {key: frozenset({str(sources / f"day {key}.csv")}) for key in keys[:-1]}
    assert [result.results[key].row_count for key in keys] == [2] * (len(keys) - 1) + [0]
