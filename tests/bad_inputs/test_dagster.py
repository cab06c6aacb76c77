"""The bad-input catalogue on the Dagster side: real Spark, a real Dagster instance, the lineage
sensor and its OpenLineage outbox. Each refusal raises its DwsError subclass with a message
naming the asset, ref or file and the fix, and leaves the workspace exactly as it was (compared
file by file); what is allowed (an empty DataFrame) is versioned like anything else; secrets
never reach the store, Dagster's event log, OpenLineage events or logs.

Workspace-layer cases (subpaths, snapshots, corrupt store files, script parameters) are in
test_bad_inputs.py."""

import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    Config,
    DagsterInstance,
    Definitions,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from dagster._serdes import serialize_value
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dws_dagster import (
    BindingError,
    DwsError,
    InvalidParameterError,
    InvalidResourceRefError,
    LineageConflictError,
    OutputTypeError,
    SchemaDriftError,
    UnknownResourceError,
    Workspace,
    WorkspaceConfigError,
    check_definitions,
    dws_ref,
    process_events,
)
from dws_dagster.errors import TransportConfigError
from dws_dagster.ol.job_names import asset_job_name
from dws_dagster.workspace.records import REDACTED
from tests.assets.test_io_manager import latest, root_cause, run
from tests.conftest import tree_state
from tests.support.pipeline import build_assets, io_manager, make_workspace
from tests.support.store_db import workspace_state
from tests.workspace.test_redaction import assert_nowhere

pytestmark = pytest.mark.spark

REGIONS = StaticPartitionsDefinition(["eu", "us", "apac"])
SECRET = "hunter2-do-not-leak"
URI_PASSWORD = "s3cr3t-in-uri"


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def built(spark, tmp_path: Path, instance) -> Workspace:
    """The taxi pipeline materialized once, so every refusal has lineage and data to spare."""
    ws = make_workspace(tmp_path / "ws")
    run(build_assets(), ws, instance)
    return ws


def refused(
    ws: Workspace, action: Callable[[], Any], error: type[DwsError], *fragments: str
) -> DwsError:
    """Run `action`; it must fail with `error` (possibly wrapped by Dagster) whose message
    holds every fragment, and change nothing under the workspace."""
    before = workspace_state(ws)
    with pytest.raises(Exception) as info:
        action()
    cause = root_cause(info.value)
    assert isinstance(cause, error), f"{type(cause).__name__}: {cause}"
    for fragment in fragments:
        assert fragment in str(cause), f"{fragment!r} not in {cause}"
    assert workspace_state(ws) == before
    return cause


def materialize_one(ws: Workspace, instance: DagsterInstance, assets: list[Any], **kwargs: Any):
    return materialize(
        assets, instance=instance, resources={"io_manager": io_manager(ws)}, **kwargs
    )


# ----------------------------------------------------------------------- asset definitions


def test_subpath_escaping_its_resource_is_refused_at_definition(built: Workspace) -> None:
    for subpath, problem in (
        ("../x", "contains '..'"),
        ("a/../../b", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("a\x00b", "NUL"),
        ("/".join(["d" * 200] * 30), "limit is 4096"),
    ):
        refused(
            built,
            lambda s=subpath: dws_ref("intermediate-data", s),
            InvalidResourceRefError,
            problem,
        )


def test_unknown_resource_is_refused_at_load_and_at_run_time(
    built: Workspace, spark, instance
) -> None:
    @asset(metadata=dws_ref("no-such-resource", "x"))
    def lost() -> DataFrame:
        return spark.range(3)

    defs = Definitions(assets=[lost], resources={"io_manager": io_manager(built)})
    refused(
        built,
        lambda: check_definitions(defs),
        UnknownResourceError,
        "asset 'lost'",
        "no-such-resource",
    )
    refused(
        built,
        lambda: materialize_one(built, instance, [lost]),
        UnknownResourceError,
        "asset 'lost'",
        "no-such-resource",
    )


def test_overlapping_refs_are_refused_at_load(built: Workspace, spark) -> None:
    @asset(metadata=dws_ref("intermediate-data", "hourly/deeper"))
    def nested() -> DataFrame:
        return spark.range(3)

    assets = [*build_assets(), nested]
    defs = Definitions(assets=assets, resources={"io_manager": io_manager(built)})
    refused(built, lambda: check_definitions(defs), LineageConflictError, "'hourly'", "'nested'")


def test_ref_owned_by_another_step_is_refused_before_writing(
    built: Workspace, spark, instance
) -> None:
    @asset(metadata=dws_ref("intermediate-data", "enriched/extra"))
    def intruder() -> DataFrame:
        return spark.range(3)

    refused(
        built,
        lambda: materialize_one(built, instance, [intruder]),
        LineageConflictError,
        "intermediate-data/enriched/extra",
        "enriched",
        "forget",
    )


def test_a_symlink_out_of_the_resource_is_not_written_through(
    built: Workspace, spark, instance, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("not yours")
    (built.resource_root("intermediate-data") / "linked").symlink_to(outside)

    @asset(metadata=dws_ref("intermediate-data", "linked/out"))
    def through_link() -> DataFrame:
        return spark.range(3)

    before = tree_state(outside)
    refused(
        built,
        lambda: materialize_one(built, instance, [through_link]),
        InvalidResourceRefError,
        "ref intermediate-data/linked/out leaves resource 'intermediate-data' through the symlink",
        "replace the symlink with a folder",
    )
    assert tree_state(outside) == before and sorted(os.listdir(outside)) == ["keep.txt"]


def test_bad_binding_options_are_refused_at_definition(built: Workspace) -> None:
    refused(
        built,
        lambda: dws_ref("intermediate-data", "x", format="xls"),
        BindingError,
        "unknown format 'xls'",
    )
    refused(
        built,
        lambda: dws_ref("intermediate-data", "x", partition_template="fixed"),
        BindingError,
        "no placeholder",
    )


# --------------------------------------------------------------------------- asset outputs


def test_non_dataframe_output_is_refused(built: Workspace, instance) -> None:
    @asset(metadata=dws_ref("intermediate-data", "not_a_frame"))
    def not_a_frame() -> dict:
        return {"a": 1}

    refused(
        built,
        lambda: materialize_one(built, instance, [not_a_frame]),
        OutputTypeError,
        "asset 'not_a_frame'",
        "builtins.dict",
        "return a DataFrame",
    )


def test_an_empty_dataframe_is_versioned_with_zero_rows(built: Workspace, spark, instance) -> None:
    @asset(metadata=dws_ref("intermediate-data", "nothing"))
    def nothing() -> DataFrame:
        return spark.range(10).withColumn("label", F.lit("x")).where("id < 0")

    @asset(metadata=dws_ref("intermediate-data", "still_nothing"))
    def still_nothing(nothing: DataFrame) -> DataFrame:
        return nothing.groupBy("label").count()

    materialize_one(built, instance, [nothing, still_nothing])
    meta = latest(instance, "nothing")["metadata"]
    assert meta["dagster/row_count"] == 0
    version = meta["dws/version"]
    assert built.store.get("intermediate-data/nothing").version == version
    data = spark.read.parquet(str(built.local_path("intermediate-data/nothing")))
    assert data.count() == 0 and data.columns == ["id", "label"]
    # Another empty frame of the same schema has the same version; another schema does not.
    materialize_one(built, instance, [nothing, still_nothing])
    assert latest(instance, "nothing")["metadata"]["dws/version"] == version
    downstream = latest(instance, "still_nothing")["metadata"]
    assert downstream["dagster/row_count"] == 0
    assert downstream["dws/inputs"][0]["version"] == version


def test_huge_parameters_are_refused_before_anything_is_recorded(
    built: Workspace, instance, spark
) -> None:
    class BigConfig(Config):
        rows: list[int]

    @asset(metadata=dws_ref("intermediate-data", "big"))
    def big(config: BigConfig) -> DataFrame:
        return spark.range(3)

    config = {"ops": {"big": {"config": {"rows": list(range(20_000))}}}}
    refused(
        built,
        lambda: materialize_one(built, instance, [big], run_config=config),
        InvalidParameterError,
        "asset 'big': parameter 'rows'",
        "the limit is",
        "record a path, a ref or a hash",
    )
    assert built.store.get("intermediate-data/big") is None


# ------------------------------------------------------------------ partitions and inputs


def _regional(spark, drifted: set[str]) -> tuple[Any, Any]:
    """Sales per region; regions in `drifted` have `amount` as text and an extra column."""
    ran: list[str] = []

    @asset(partitions_def=REGIONS, metadata=dws_ref("intermediate-data", "sales"))
    def sales(context) -> DataFrame:
        frame = spark.range(5).withColumn("region", F.lit(context.partition_key))
        if context.partition_key in drifted:
            return frame.withColumn("amount", F.col("id").cast("string")).withColumn(
                "currency", F.lit("EUR")
            )
        return frame.withColumn("amount", F.col("id") * 2)

    @asset(metadata=dws_ref("intermediate-data", "sales_total"))
    def sales_total(sales: DataFrame) -> DataFrame:
        ran.append("sales_total")
        return sales.groupBy("region").agg(F.sum("amount").alias("amount"))

    sales_total.ran = ran  # type: ignore[attr-defined]
    return sales, sales_total


def test_schema_drift_between_partitions_is_refused_before_the_body(
    built: Workspace, spark, instance
) -> None:
    sales, sales_total = _regional(spark, drifted={"us"})
    for region in REGIONS.get_partition_keys():
        materialize_one(built, instance, [sales], partition_key=region)
    error = refused(
        built,
        lambda: materialize_one(built, instance, [sales, sales_total], selection=["sales_total"]),
        SchemaDriftError,
        "asset 'sales_total' reading 'sales'",
        "partitions apac, eu have (id bigint, region string, amount bigint)",
        "partition us: column 'amount' is string, not bigint, column 'currency' string is added",
        "a backfill of 'sales'",
    )
    assert "do not share one schema" in str(error)
    assert sales_total.ran == []
    # The backfill the message asks for: once every partition has one schema, it reads.
    sales, sales_total = _regional(spark, drifted=set(REGIONS.get_partition_keys()))
    for region in ("eu", "apac"):
        materialize_one(built, instance, [sales], partition_key=region)
    materialize_one(built, instance, [sales, sales_total], selection=["sales_total"])
    assert sales_total.ran == ["sales_total"]


def test_corrupt_resources_json_is_named_at_run_time(built: Workspace, instance) -> None:
    (built.meta_dir / "resources.json").write_text("{not json")
    refused(
        built,
        lambda: run(build_assets(), built, instance),
        WorkspaceConfigError,
        "resources.json",
        "not valid JSON",
    )


# ------------------------------------------------------------------------------ secrets


class Credentials(Config):
    api_token: str
    warehouse_password: str
    source_url: str
    batch: int


def _leaky(spark) -> Any:
    @asset(metadata=dws_ref("intermediate-data", "leaky"))
    def leaky(context, config: Credentials) -> DataFrame:
        context.log.info(f"reading batch {config.batch}")
        return spark.range(config.batch)

    return leaky


def test_secrets_are_redacted_in_store_event_log_openlineage_and_logs(
    built: Workspace, spark, instance, clean_ol_env, caplog: pytest.LogCaptureFixture
) -> None:
    leaky = _leaky(spark)
    config = {
        "api_token": SECRET,
        "warehouse_password": SECRET,
        "batch": 4,
        "source_url": f"https://alice:{URI_PASSWORD}@example.com/export",
    }
    with caplog.at_level(logging.DEBUG):
        result = materialize_one(
            built, instance, [leaky], run_config={"ops": {"leaky": {"config": config}}}
        )
        process_events(
            instance, built, repository_def=Definitions(assets=[leaky]).get_repository_def()
        )

    record = built.store.get("intermediate-data/leaky").record
    assert record["parameters"] == {
        "api_token": REDACTED,
        "warehouse_password": REDACTED,
        "batch": 4,
        "source_url": "https://example.com/export",
    }
    metadata = latest(instance, "leaky")["metadata"]
    assert metadata["dws/parameters"] == record["parameters"]
    assert_nowhere(built.meta_dir, [SECRET, URI_PASSWORD])  # the store's bytes and rows
    places = {
        "data folder": b"".join(
            p.read_bytes() for p in built.local_path("intermediate-data/leaky").rglob("*.json")
        ).decode(),
        "our event log entries": "".join(
            serialize_value(entry)
            for entry in instance.all_logs(result.run_id)
            if entry.dagster_event is None or entry.dagster_event.is_step_materialization
        ),
        "OpenLineage events": (built.meta_dir / "openlineage" / "events.jsonl").read_text(),
        "Python logs": "\n".join(
            r.getMessage() for r in caplog.records if r.name.startswith("dws_dagster")
        ),
    }
    assert asset_job_name("leaky") in {
        json.loads(line)["job"]["name"] for line in places["OpenLineage events"].splitlines()
    }
    for where, text in places.items():
        for secret in (SECRET, URI_PASSWORD):
            assert secret not in text, f"{secret!r} reached the {where}"


# ------------------------------------------------------------------------- OpenLineage


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_invalid_openlineage_configuration_fails_the_tick_and_changes_nothing(
    built: Workspace, clean_ol_env, instance, tmp_path: Path
) -> None:
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: http\n")  # no url
    error = refused(
        built,
        lambda: process_events(instance, built),
        TransportConfigError,
        "openlineage.yml",
        "url",
    )
    assert "is invalid" in str(error)
    (tmp_path / "openlineage.yml").write_text("transport: [unclosed\n")
    refused(built, lambda: process_events(instance, built), TransportConfigError, "openlineage.yml")
    (tmp_path / "openlineage.yml").unlink()
    outcome = process_events(instance, built)  # fixed: the same events, from the same cursor
    assert outcome.spooled > 0 and outcome.pending == 0


def test_unreachable_catalog_keeps_events_and_the_tick_succeeds(
    built: Workspace, clean_ol_env, instance, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("OPENLINEAGE_URL", url)
    monkeypatch.setenv("OPENLINEAGE_API_KEY", SECRET)
    outcome = process_events(instance, built, time_budget_seconds=5)
    assert outcome.spooled > 0 and outcome.delivered == 0
    assert outcome.pending == outcome.spooled
    assert "Connection refused" in (outcome.delivery_error or "")
    assert len(built.store.items()) > 0  # the store got its lineage all the same
    code, out, err = cli("openlineage", "status", "--format", "json", "-w", built.root)
    assert code == 0
    status = json.loads(out)
    assert status["pending"] == outcome.pending and url in status["transport"]
    assert "Connection refused" in json.dumps(status)
    assert SECRET not in out + err + (outcome.delivery_error or "")
