"""SparkWorkspaceIOManager end to end: real Spark session, real Dagster instance, real files."""

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    SourceAsset,
    TableMetadataValue,
    asset,
    materialize,
)
from dagster._core.definitions.data_version import StaleStatus
from dagster._core.definitions.observe import observe
from dagster._utils.test.data_versions import get_stale_status_resolver
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dws_dagster import (
    LineageConsistencyError,
    OutputTypeError,
    UnknownRefStateError,
    UnknownResourceError,
    Workspace,
    dws_ref,
)
from dws_dagster.assets.materialization import column_lineage_table, record_from_metadata
from dws_dagster.snapshots.restore import restore_snapshot
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace.gitinfo import git_commit
from dws_dagster.workspace.records import LineageRecord, StepInfo
from dws_dagster.workspace.swap import kept_versions
from tests.support.pipeline import (
    build_assets,
    io_manager,
    make_workspace,
    trip_rows,
    write_sources,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def pipeline_ws(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path / "ws")


def run(
    assets: list[Any],
    ws: Workspace,
    instance: DagsterInstance,
    *,
    selection: list[str] | None = None,
    run_config: dict | None = None,
    **manager: Any,
):
    resources = {"io_manager": io_manager(ws, **manager)}
    sources = [a for a in assets if isinstance(a, SourceAsset)]
    observe(sources, instance=instance, resources=resources)
    return materialize(
        assets, instance=instance, resources=resources, selection=selection, run_config=run_config
    )


def latest(instance: DagsterInstance, name: str, partition: str | None = None) -> dict[str, Any]:
    records = instance.fetch_materializations(
        AssetRecordsFilter(
            asset_key=AssetKey(name), asset_partitions=[partition] if partition else None
        ),
        limit=1,
    ).records
    event = records[0].event_log_entry.asset_materialization
    return {
        "metadata": {k: getattr(v, "value", v) for k, v in event.metadata.items()},
        "raw": event.metadata,
        "tags": event.tags or {},
    }


def root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def test_materialize_records_every_metadata_key_and_the_data(spark, pipeline_ws, instance):
    ws = pipeline_ws
    result = run(
        build_assets(), ws, instance, run_config={"ops": {"hourly": {"config": {"min_fare": 6.0}}}}
    )
    assert result.success

    hourly = latest(instance, "hourly")
    meta = hourly["metadata"]
    assert meta["dws/ref"] == "intermediate-data/hourly"
    assert meta["dws/format"] == "parquet"
    version = meta["dws/version"]
    assert hourly["tags"]["dagster/data_version"] == version
    enriched = latest(instance, "enriched")["metadata"]
    assert meta["dws/inputs"] == [
        {
            "ref": "intermediate-data/enriched",
            "version": enriched["dws/version"],
            "asset": "enriched",
        }
    ]
    trips_version = ws.version_of("source-data/trips")
    zones_version = ws.version_of("source-data/zones")
    assert meta["dws/provenance"] == {
        "intermediate-data/enriched": enriched["dws/version"],
        "intermediate-data/hourly": version,
        "source-data/trips": trips_version,
        "source-data/zones": zones_version,
    }
    assert meta["dws/parameters"] == {"min_fare": 6.0}
    assert enriched["dws/code_version"] == "1"
    assert meta["dagster/uri"] == f"file://{ws.local_path('intermediate-data/hourly')}"
    schema = hourly["raw"]["dagster/column_schema"].schema
    assert [(c.name, c.type) for c in schema.columns] == [
        ("borough", "string"),
        ("hour", "int"),
        ("trips", "bigint"),
        ("revenue", "double"),
    ]

    # The data is what the asset computed.
    expected: dict[tuple[str, int], tuple[int, float]] = {}
    boroughs = {1: "Manhattan", 2: "Brooklyn", 3: "Queens"}
    for _, zone, fare, pickup in trip_rows():
        if fare >= 6.0:
            key = (boroughs[zone], int(pickup[11:13]))
            count, total = expected.get(key, (0, 0.0))
            expected[key] = (count + 1, total + fare)
    rows = spark.read.parquet(str(ws.local_path("intermediate-data/hourly"))).collect()
    assert {(r.borough, r.hour): (r.trips, round(r.revenue, 6)) for r in rows} == {
        k: (c, round(t, 6)) for k, (c, t) in expected.items()
    }
    assert meta["dagster/row_count"] == len(expected)

    # Direct column lineage goes to Dagster; grouping and filtering stay in dws/column_lineage.
    lineage = hourly["metadata"]["dagster/column_lineage"].deps_by_column
    deps = {
        col: sorted((d.asset_key.to_user_string(), d.column_name) for d in items)
        for col, items in lineage.items()
    }
    assert deps["revenue"] == [("enriched", "fare_usd")]
    assert deps["borough"] == [("enriched", "borough")]
    assert deps["hour"] == [("enriched", "pickup_ts")]
    assert deps["trips"] == []
    dataset = {(d["ref"], d["column"], d["subtype"]) for d in meta["dws/column_lineage"]["dataset"]}
    assert ("intermediate-data/enriched", "fare_usd", "FILTER") in dataset
    assert ("intermediate-data/enriched", "borough", "GROUP_BY") in dataset
    # The same lineage as a table the open-source Dagster UI shows as it is, beside it.
    table = hourly["raw"]["dws/column_sources"]
    assert isinstance(table, TableMetadataValue)
    assert [c.name for c in table.schema.columns] == [
        "output column",
        "input asset",
        "input column",
        "kind",
    ]
    rows = table_rows(table)
    assert ("revenue", "enriched", "fare_usd", "aggregation") in rows
    assert ("borough", "enriched", "borough", "identity") in rows
    assert ("hour", "enriched", "pickup_ts", "transformation") in rows
    assert ("trips", "", "", "no input column") in rows
    assert ("(all rows)", "enriched", "fare_usd", "filter") in rows
    assert ("(all rows)", "enriched", "borough", "group by") in rows
    assert [r[0] for r in rows if r[0] != "(all rows)"] == [
        "borough",
        "hour",
        "trips",
        "revenue",
    ]  # the output's column order
    labels = list(hourly["raw"])
    assert labels.index("dws/column_sources") == labels.index("dagster/column_lineage") + 1

    # The join read both sources; the results asset wrote JSON.
    enriched_lineage = latest(instance, "enriched")["metadata"]["dagster/column_lineage"]
    assert {d.asset_key.to_user_string() for d in enriched_lineage.deps_by_column["borough"]} == {
        "zones"
    }
    assert latest(instance, "ranking")["metadata"]["dws/format"] == "json"
    assert spark.read.json(str(ws.local_path("results/ranking"))).count() == len(expected)

    # The workspace store holds the same record.
    state = ws.store.get("intermediate-data/hourly")
    assert state is not None and state.version == version
    record = state.lineage_record()
    assert record.step.name == "hourly" and record.step.run_id == result.run_id
    assert dict(record.inputs) == {"intermediate-data/enriched": enriched["dws/version"]}
    # Its column lineage too (what the lineage page draws), the very description of the
    # metadata; and the metadata rebuilds the record exactly, as the lineage sensor does.
    assert record.extra["column_lineage"] == meta["dws/column_lineage"]
    rebuilt = record_from_metadata(
        hourly["raw"], asset="hourly", run_id=result.run_id, partition=None
    )
    assert rebuilt is not None and rebuilt.to_json() == record.to_json()


def test_unchanged_rematerialization_keeps_versions_and_freshness(spark, pipeline_ws, instance):
    assets = build_assets()
    run(assets, pipeline_ws, instance)
    first = {
        name: latest(instance, name)["metadata"]["dws/version"]
        for name in ("enriched", "hourly", "ranking")
    }
    run(assets, pipeline_ws, instance, selection=["enriched"])
    assert latest(instance, "enriched")["metadata"]["dws/version"] == first["enriched"]
    resolver = get_stale_status_resolver(instance, assets)
    for name in ("enriched", "hourly", "ranking"):
        assert resolver.get_status(AssetKey(name)) == StaleStatus.FRESH, name
    run(assets, pipeline_ws, instance)
    assert {name: latest(instance, name)["metadata"]["dws/version"] for name in first} == first


def test_changed_source_gives_new_versions_and_staleness(spark, pipeline_ws, instance):
    assets = build_assets()
    ws = pipeline_ws
    run(assets, ws, instance)
    before = {
        name: latest(instance, name)["metadata"]["dws/version"] for name in ("enriched", "hourly")
    }
    write_sources(ws, shift=5)
    resources = {"io_manager": io_manager(ws)}
    observe(
        [a for a in assets if isinstance(a, SourceAsset)], instance=instance, resources=resources
    )
    resolver = get_stale_status_resolver(instance, assets)
    assert resolver.get_status(AssetKey("enriched")) == StaleStatus.STALE
    materialize(assets, instance=instance, resources=resources, selection=["enriched"])
    resolver = get_stale_status_resolver(instance, assets)
    assert resolver.get_status(AssetKey("enriched")) == StaleStatus.FRESH
    assert resolver.get_status(AssetKey("hourly")) == StaleStatus.STALE
    assert latest(instance, "enriched")["metadata"]["dws/version"] != before["enriched"]
    run(assets, ws, instance)
    assert latest(instance, "hourly")["metadata"]["dws/version"] != before["hourly"]


def test_mixing_two_versions_is_refused_before_the_body_runs(spark_session, pipeline_ws, instance):
    """On a classic and on a Spark Connect session (the rule is the store's, whatever Spark)."""
    ws = pipeline_ws
    calls: list[str] = []
    assets = build_assets(calls)

    @asset(metadata=dws_ref("results", "report"))
    def report(enriched: DataFrame, hourly: DataFrame) -> DataFrame:
        calls.append("report")
        return hourly.crossJoin(enriched.select(F.count(F.lit(1)).alias("n")))

    run([*assets, report], ws, instance)
    write_sources(ws, shift=3)
    run(assets, ws, instance, selection=["enriched"])  # hourly still built from the old one
    calls.clear()
    with pytest.raises(Exception) as info:
        materialize(
            [*assets, report],
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            selection=["report"],
        )
    error = root_cause(info.value)
    assert isinstance(error, LineageConsistencyError)
    message = str(error)
    assert "report" in message and "intermediate-data/enriched" in message
    assert "'hourly'" in message  # what to re-run
    assert calls == []


def test_non_dataframe_output_is_refused(spark, pipeline_ws, instance):
    @asset(metadata=dws_ref("intermediate-data", "not_a_frame"))
    def not_a_frame() -> dict:
        return {"a": 1}

    with pytest.raises(Exception) as info:
        materialize(
            [not_a_frame], instance=instance, resources={"io_manager": io_manager(pipeline_ws)}
        )
    error = root_cause(info.value)
    assert isinstance(error, OutputTypeError)
    assert "not_a_frame" in str(error) and "builtins.dict" in str(error)
    assert not pipeline_ws.local_path("intermediate-data/not_a_frame").exists()


def test_unknown_resource_is_refused_at_run_time(spark, pipeline_ws, instance):
    @asset(metadata=dws_ref("no-such-resource", "x"))
    def lost(context) -> DataFrame:
        return spark.range(3)

    with pytest.raises(Exception) as info:
        materialize([lost], instance=instance, resources={"io_manager": io_manager(pipeline_ws)})
    error = root_cause(info.value)
    assert isinstance(error, UnknownResourceError)
    assert "lost" in str(error) and "no-such-resource" in str(error)


def test_write_failure_keeps_old_data_and_records_the_attempt(spark, pipeline_ws, instance):
    ws = pipeline_ws
    fail = {"now": False}

    @asset(metadata=dws_ref("intermediate-data", "fragile"))
    def fragile() -> DataFrame:
        frame = spark.range(200).withColumn("x", F.col("id") * 2)
        if fail["now"]:
            boom = F.udf(lambda v: 1 // (v - 150) if v == 150 else v, "long")
            frame = frame.withColumn("x", boom("id"))
        return frame

    resources = {"io_manager": io_manager(ws)}
    materialize([fragile], instance=instance, resources=resources)
    good = latest(instance, "fragile")["metadata"]["dws/version"]
    fail["now"] = True
    result = materialize([fragile], instance=instance, resources=resources, raise_on_error=False)
    assert not result.success
    data = spark.read.parquet(str(ws.local_path("intermediate-data/fragile")))
    assert data.count() == 200 and data.where("x = id * 2").count() == 200
    assert ws.version_of("intermediate-data/fragile") == good
    state = ws.store.get("intermediate-data/fragile")
    assert state.version == good and state.attempt["status"] == "failed"
    assert not state.unknown
    assert not [
        p for p in ws.local_path("intermediate-data").iterdir() if p.name.startswith(".dws-")
    ]


def test_unknown_input_is_refused_before_the_body_runs(spark, pipeline_ws, instance):
    ws = pipeline_ws
    calls: list[str] = []
    assets = build_assets(calls)
    run(assets, ws, instance)
    ws.store.fail(
        [
            LineageRecord(
                ref="intermediate-data/enriched",
                version=None,
                status="failed",
                step=StepInfo(name="enriched"),
            )
        ],
        unknown=["intermediate-data/enriched"],
    )
    calls.clear()
    with pytest.raises(Exception) as info:
        materialize(
            assets,
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            selection=["hourly"],
        )
    error = root_cause(info.value)
    assert isinstance(error, UnknownRefStateError)
    assert "intermediate-data/enriched" in str(error)
    assert calls == []


def test_keep_versions_keeps_earlier_data_for_restore(spark_session, pipeline_ws, instance):
    """On a classic and on a Spark Connect session."""
    spark = spark_session
    ws = pipeline_ws
    value = {"n": 10}

    @asset(metadata=dws_ref("intermediate-data", "counts"))
    def counts() -> DataFrame:
        return spark.range(value["n"])

    resources = {"io_manager": io_manager(ws, keep_versions=2)}
    versions = []
    for n in (10, 20, 30, 40):
        value["n"] = n
        materialize([counts], instance=instance, resources=resources)
        versions.append(latest(instance, "counts")["metadata"]["dws/version"])
    root = ws.resource_root("intermediate-data")
    assert kept_versions(root, "counts") == versions[1:3]
    take_snapshot(ws, "before")
    value["n"] = 50
    materialize([counts], instance=instance, resources=resources)
    assert ws.version_of("intermediate-data/counts") != versions[3]
    restore_snapshot(ws, "before")
    assert spark.read.parquet(str(ws.local_path("intermediate-data/counts"))).count() == 40
    assert ws.version_of("intermediate-data/counts") == versions[3]


@pytest.mark.parametrize("fmt", ["csv", "json", "orc"])
def test_other_formats_and_write_options(spark, pipeline_ws, instance, fmt):
    ws = pipeline_ws

    @asset(metadata=dws_ref("intermediate-data", f"t_{fmt}", format=fmt, partition_by=["part"]))
    def table() -> DataFrame:
        return spark.range(30).withColumn("part", F.col("id") % 3)

    @asset(metadata=dws_ref("intermediate-data", f"total_{fmt}"))
    def total(table: DataFrame) -> DataFrame:
        return table.groupBy("part").count()

    materialize([table, total], instance=instance, resources={"io_manager": io_manager(ws)})
    folder = ws.local_path(f"intermediate-data/t_{fmt}")
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["part=0", "part=1", "part=2"]
    rows = spark.read.parquet(str(ws.local_path(f"intermediate-data/total_{fmt}"))).collect()
    assert sorted((r.part, r["count"]) for r in rows) == [(0, 10), (1, 10), (2, 10)]


def test_marker_lets_workspace_layer_agree_without_spark(spark, pipeline_ws, instance):
    """The CLI (no Spark) reports the same version the IO manager recorded."""
    ws = pipeline_ws
    run(build_assets(), ws, instance)
    for name in ("enriched", "hourly"):
        recorded = latest(instance, name)["metadata"]["dws/version"]
        assert Workspace.open(ws.root).version_of(f"intermediate-data/{name}") == recorded
    assert os.path.isfile(ws.local_path("intermediate-data/hourly") / "_dws_version.json")


def test_git_commit_is_recorded_when_the_workspace_is_a_repository(spark, pipeline_ws, instance):
    ws = pipeline_ws
    git = ["git", "-C", str(ws.root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "data"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    git_commit.cache_clear()
    run(build_assets(), ws, instance, selection=["enriched"])
    assert latest(instance, "enriched")["metadata"]["dws/git_commit"] == head
    assert ws.store.get("intermediate-data/enriched").lineage_record().step.git_commit == head


def table_rows(table: TableMetadataValue) -> list[tuple[Any, ...]]:
    """A table's records as tuples in the order of its schema's columns."""
    names = [column.name for column in table.schema.columns]
    return [tuple(record.data.get(name) for name in names) for record in table.records]


def test_column_lineage_table_rows_and_its_bound():
    """Inputs read by path are named by the asset that wrote them, else by their ref (or
    location); the partitions of one asset (files of one folder) read alike make one row; an
    incomplete plan and rows beyond the bound are said in a last row."""

    def source(ref, column, kind="DIRECT", subtype="IDENTITY", **more):
        return {"ref": ref, "column": column, "kind": kind, "subtype": subtype, **more}

    described = {
        "columns": {
            "b": [
                source("source-data/raw/x.csv", "x", subtype="TRANSFORMATION"),
                source("source-data/raw/y.csv", "x", subtype="TRANSFORMATION"),
            ],
            "a": [source(None, "y", "INDIRECT", "CONDITIONAL", location="s3://bucket/t")],
            "c": [],
            "d": [
                source(f"inter/weather/2024-01-{day:02d}", "mm", "INDIRECT", "CONDITIONAL")
                for day in (3, 1, 2)
            ]
            + [source("inter/zones", "id", asset="zones")],
        },
        "dataset": [source("inter/weather/2024-01-01", "day", "INDIRECT", "GROUP_BY")],
        "complete": False,
    }
    table = column_lineage_table(
        described,
        columns=["a", "b", "c", "d"],
        assets={f"inter/weather/2024-01-{day:02d}": "weather" for day in (1, 2, 3)},
    )
    assert table_rows(table) == [
        ("a", "s3://bucket/t", "y", "conditional"),
        ("b", "source-data/raw/{x.csv … y.csv} (2)", "x", "transformation"),
        ("c", "", "", "no input column"),
        ("d", "weather (3 partitions)", "mm", "conditional"),
        ("d", "zones", "id", "identity"),
        ("(all rows)", "weather", "day", "group by"),
        ("…", "", "", "incomplete: parts of the Spark plan were not understood"),
    ]
    wide = {
        "columns": {f"c{i}": [source("r", f"c{i}", asset="up")] for i in range(30)},
        "dataset": [],
        "complete": True,
    }
    bounded = [r.data for r in column_lineage_table(wide, max_rows=10).records]
    assert len(bounded) == 10 and bounded[8]["output column"] == "c8"
    assert bounded[-1]["kind"] == "21 more rows in dws/column_lineage"
