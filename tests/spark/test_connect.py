"""SparkWorkspaceIOManager on a Spark Connect session (`sc://`, no JVM in this process) records
what it records on a classic session: the same versions, rows, schemas, inputs and column
lineage for the same assets. Remote (Hadoop URI) data is refused with a DwsError before
anything is written.

One Connect server and one client session serve the whole run (tests/support/connect_server.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    SourceAsset,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from dagster._core.definitions.observe import observe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from dws_dagster import ConnectUnsupportedError, Workspace, dws_ref
from dws_dagster.spark import row_version, storage, version_marker
from dws_dagster.spark.remote_data import HadoopData
from dws_dagster.spark.session_kind import is_connect
from dws_dagster.workspace.records import COLUMN_LINEAGE_KEY
from dws_dagster.workspace.swap import kept_versions
from tests.conftest import tree_state
from tests.support.pipeline import build_assets, io_manager, make_workspace

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REFS = [
    "intermediate-data/enriched",
    "intermediate-data/hourly",
    "results/ranking",
    "intermediate-data/by_path",
]


def _materialize_pipeline(
    ws: Workspace, manager: Any, session: Any
) -> tuple[list[str], dict[str, Any]]:
    """The taxi pipeline (join, filter, aggregate, window; CSV and JSON sources) and an asset
    that reads workspace data by path, not as an input, in one run; returns the run's
    warnings and each asset's `dagster/column_lineage`."""

    @asset(metadata=dws_ref("intermediate-data", "by_path"), deps=["enriched"])
    def by_path() -> DataFrame:
        enriched = session.read.parquet(str(ws.local_path("intermediate-data/enriched")))
        return enriched.groupBy("borough").count()

    assets = [*build_assets(), by_path]
    resources = {"io_manager": manager}
    with DagsterInstance.ephemeral() as instance:
        observe(
            [a for a in assets if isinstance(a, SourceAsset)],
            instance=instance,
            resources=resources,
        )
        result = materialize(assets, instance=instance, resources=resources)
        assert result.success
        warnings = [
            entry.user_message
            for entry in instance.all_logs(result.run_id)
            if entry.level >= 30 and entry.user_message
        ]
        lineage = {}
        for name in ("enriched", "hourly", "ranking", "by_path"):
            event = instance.get_latest_materialization_event(AssetKey(name))
            assert event is not None and event.asset_materialization is not None
            lineage[name] = event.asset_materialization.metadata["dagster/column_lineage"].value
        return warnings, lineage


def _recorded(ws: Workspace, ref: str) -> dict[str, Any]:
    state = ws.store.get(ref)
    marker = version_marker.read_marker(None, str(ws.local_path(ref)))
    assert state is not None and marker is not None
    return {
        "version": state.version,
        "rows": state.record["extra"]["rows"],
        "inputs": state.record["inputs"],
        "columns": marker["columns"],
        "marker_version": marker["version"],
    }


@pytest.fixture(scope="module")
def both_pipelines(spark, connect_session, tmp_path_factory):
    """The same pipeline materialized on the classic session and on the Connect session (the
    IO manager reads inputs on the active session)."""
    import os

    base = tmp_path_factory.mktemp("connect-pipelines")
    classic_ws = make_workspace(base / "classic")
    classic = _materialize_pipeline(classic_ws, io_manager(classic_ws), spark)
    connect_ws = make_workspace(base / "connect")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    try:
        connect = _materialize_pipeline(connect_ws, io_manager(connect_ws), connect_session)
    finally:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return classic_ws, classic, connect_ws, connect


def test_connect_records_the_versions_rows_schemas_and_inputs_of_classic(spark, both_pipelines):
    classic_ws, _, connect_ws, _ = both_pipelines
    for ref in REFS:
        classic, connect = _recorded(classic_ws, ref), _recorded(connect_ws, ref)
        assert connect == classic, ref
        assert classic["inputs"], ref  # data read by path is an input on both sessions
        assert classic["marker_version"] == classic["version"]
        # The data itself is the same (read back on one session: a version is not the proof).
        fmt = "json" if ref.startswith("results/") else "parquet"
        rows = [
            sorted(storage.read(spark, str(ws.local_path(ref)), fmt=fmt).collect())
            for ws in (classic_ws, connect_ws)
        ]
        assert rows[0] == rows[1] and rows[0]
    for ref in ("source-data/trips", "source-data/zones"):
        assert connect_ws.store.get(ref).version == classic_ws.store.get(ref).version


def test_connect_records_the_column_lineage_of_classic(both_pipelines):
    """The same column lineage, direct and indirect, in the lineage store and in Dagster's
    `dagster/column_lineage`, for every asset (the join, the filter and aggregate, the window,
    the data read by path), and no warning about it on either session."""
    (
        classic_ws,
        (classic_warnings, classic_dagster),
        connect_ws,
        (connect_warnings, connect_dagster),
    ) = both_pipelines
    for ref in REFS:
        classic = classic_ws.store.get(ref).record["extra"][COLUMN_LINEAGE_KEY]
        connect = connect_ws.store.get(ref).record["extra"].get(COLUMN_LINEAGE_KEY)
        assert connect == classic, ref
    assert connect_dagster == classic_dagster
    assert all(lineage.deps_by_column for lineage in classic_dagster.values())
    hourly = classic_ws.store.get("intermediate-data/hourly").record["extra"][COLUMN_LINEAGE_KEY]
    assert "GROUP_BY" in json.dumps(hourly) and "FILTER" in json.dumps(hourly)
    ranking = classic_ws.store.get("results/ranking").record["extra"][COLUMN_LINEAGE_KEY]
    assert "WINDOW" in json.dumps(ranking)
    for warnings in (classic_warnings, connect_warnings):
        assert not [w for w in warnings if "lineage" in w]


_SCHEMA = T.StructType(
    [
        T.StructField("i", T.LongType()),
        T.StructField("s", T.StringType()),
        T.StructField("d", T.DoubleType()),
        T.StructField("b", T.BooleanType()),
        T.StructField("day", T.DateType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("amount", T.DecimalType(12, 2)),
        T.StructField("tags", T.ArrayType(T.IntegerType())),
        T.StructField("attrs", T.MapType(T.StringType(), T.LongType())),
    ]
)
_ROW = st.tuples(
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.text(max_size=8),
    st.none() | st.floats(allow_nan=False, width=64),
    st.none() | st.booleans(),
    st.none() | st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1)),
    st.none()
    | st.datetimes(dt.datetime(1970, 1, 2), dt.datetime(2200, 1, 1)).map(
        lambda value: value.replace(tzinfo=dt.UTC)
    ),
    st.none() | st.decimals(min_value=-(10**9), max_value=10**9, places=2).map(decimal.Decimal),
    st.none() | st.lists(st.none() | st.integers(-(2**31), 2**31 - 1), max_size=3),
    st.none() | st.dictionaries(st.text(max_size=4), st.integers(-(2**40), 2**40), max_size=3),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_ROW, max_size=12))
def test_a_version_does_not_depend_on_how_spark_was_reached(spark, connect_session, rows):
    """Any rows of common types (nulls, maps, arrays, decimals, timestamps): the version a
    Connect session computes is the classic session's, bit for bit."""
    classic = row_version.dataframe_version(spark.createDataFrame(rows, _SCHEMA))
    connect_df = connect_session.createDataFrame(rows, _SCHEMA)
    assert is_connect(connect_df)
    assert row_version.dataframe_version(connect_df) == classic


@pytest.mark.parametrize(
    ("fmt", "versioning"),
    [("parquet", "rows"), ("csv", "rows"), ("json", "rows"), ("orc", "rows"), ("parquet", "files")],
)
def test_write_atomic_on_connect_gives_the_classic_version_and_rows(
    spark, connect_session, tmp_path, fmt, versioning
):
    def data(session):
        return session.range(0, 500, 1, 3).selectExpr("id", "id % 7 AS zone", "uuid() AS u")

    results = {}
    for name, session in (("classic", spark), ("connect", connect_session)):
        df = data(session).selectExpr("id", "zone")  # uuid() dropped: deterministic data
        results[name] = storage.write_atomic(
            df, str(tmp_path / name / "t"), fmt=fmt, partition_by=["zone"], versioning=versioning
        )
    classic, connect = results["classic"], results["connect"]
    assert connect.row_count == classic.row_count == 500
    if versioning == "rows":
        assert connect.version == classic.version
    assert version_marker.read_marker(None, connect.location)["rows"] == 500
    assert not [p for p in (tmp_path / "connect").iterdir() if p.name.startswith(".")]


REGIONS = StaticPartitionsDefinition(["eu", "us"])


def test_partitions_and_kept_versions_on_connect_match_classic(
    spark, connect_session, tmp_path, monkeypatch
):
    """Each partition at its own ref with the classic version; earlier data kept
    (`keep_versions`) as on a classic session; a downstream asset reads both partitions."""

    def run(session, root: Path) -> tuple[Workspace, list[str]]:
        ws = make_workspace(root)
        size = {"n": 10}

        @asset(partitions_def=REGIONS, metadata=dws_ref("intermediate-data", "sales"))
        def sales(context) -> DataFrame:
            offset = 100 if context.partition_key == "us" else 0
            return session.range(offset, offset + size["n"]).selectExpr("id", "id * 2 AS x")

        @asset(metadata=dws_ref("intermediate-data", "total"))
        def total(sales: DataFrame) -> DataFrame:
            return sales.groupBy().sum("x")

        resources = {"io_manager": io_manager(ws, keep_versions=1)}
        with DagsterInstance.ephemeral() as instance:
            for n in (10, 20):
                size["n"] = n
                for key in ("eu", "us"):
                    materialize([sales], instance=instance, resources=resources, partition_key=key)
            materialize([sales, total], instance=instance, resources=resources, selection=["total"])
        versions = [
            ws.store.get(ref).version
            for ref in ("intermediate-data/sales/eu", "intermediate-data/sales/us")
        ]
        root = ws.resource_root("intermediate-data")
        kept = [kept_versions(root, f"sales/{key}") for key in ("eu", "us")]
        assert all(len(k) == 1 for k in kept)  # the first write of each, kept
        return ws, [*versions, ws.store.get("intermediate-data/total").version, *kept]

    classic_ws, classic = run(spark, tmp_path / "classic")
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    connect_ws, connect = run(connect_session, tmp_path / "connect")
    assert connect == classic
    total = storage.read(spark, str(connect_ws.local_path("intermediate-data/total"))).collect()
    assert total[0][0] == 2 * (sum(range(20)) + sum(range(100, 120)))
    inputs = connect_ws.store.get("intermediate-data/total").record["inputs"]
    assert [i["ref"] for i in inputs] == [
        "intermediate-data/sales/eu",
        "intermediate-data/sales/us",
    ]


def test_remote_data_is_refused_on_connect_before_anything_is_written(
    connect_session, tmp_path, monkeypatch
):
    """A Hadoop URI resource needs the JVM's FileSystem API: refused with a DwsError naming
    the asset, the URI and the alternatives; nothing is written, no claim is left (the URI is
    never contacted: nothing listens there)."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    ws = make_workspace(tmp_path / "ws")
    lake = "hdfs://127.0.0.1:9/lake"
    ws.add_resource("lake", "intermediate-data", uri=lake)

    @asset(metadata=dws_ref("lake", "events"))
    def events() -> DataFrame:
        return connect_session.range(5)

    before = tree_state(tmp_path)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [events],
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            raise_on_error=False,
        )
    assert not result.success
    error = result.failure_data_for_node("events").error
    while error.cause is not None and "ConnectUnsupportedError" not in error.cls_name:
        error = error.cause
    assert error.cls_name == "ConnectUnsupportedError"
    for needle in ("asset 'events'", f"{lake}/events", "Spark Connect", "classic Spark session"):
        assert needle in error.message
    assert "Traceback" not in error.message
    assert tree_state(tmp_path) == before
    assert ws.store.get("lake/events") is None

    # What the CLI's restore and gc reach remote data through refuses the same way.
    with pytest.raises(ConnectUnsupportedError, match="Spark Connect"):
        HadoopData(connect_session).version(f"{lake}/events")


def test_the_one_writer_rule_holds_on_connect(connect_session, tmp_path, monkeypatch):
    """A second asset writing a ref another asset owns is refused on Connect as on a classic
    session, and the first one's data and version stay."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    ws = make_workspace(tmp_path / "ws")

    @asset(name="first", metadata=dws_ref("intermediate-data", "shared"))
    def first() -> DataFrame:
        return connect_session.range(3)

    @asset(name="second", metadata=dws_ref("intermediate-data", "shared"))
    def second() -> DataFrame:
        return connect_session.range(4)

    resources = {"io_manager": io_manager(ws)}
    with DagsterInstance.ephemeral() as instance:
        materialize([first], instance=instance, resources=resources)
        version = ws.version_of("intermediate-data/shared")
        result = materialize([second], instance=instance, resources=resources, raise_on_error=False)
    assert not result.success
    error = result.failure_data_for_node("second").error
    while error.cause is not None and "LineageConflictError" not in error.cls_name:
        error = error.cause
    assert error.cls_name == "LineageConflictError"
    assert ws.store.get("intermediate-data/shared").owner == "first"
    assert ws.version_of("intermediate-data/shared") == version
