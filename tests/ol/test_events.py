"""OpenLineage naming and events: real openlineage-python objects, checked against the spec.

Every event built here goes through `validate_run_event` (the official JSON Schemas, formats
on); the validator itself is tested on events broken on purpose, so a green run means the
events conform, not that the check was lax.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import DwsError, __version__
from dws_dagster.errors import EventBuildError, InvalidLocationError
from dws_dagster.ol.custom_facets import METRICS_FACET, METRICS_SCHEMA_FILE
from dws_dagster.ol.dataset_facets import workspace_namespace
from dws_dagster.ol.events import PARTITION_TAG, build_run_event, ol_run_id
from dws_dagster.ol.facets import PRODUCER
from dws_dagster.ol.model import (
    Assertion,
    AssetRunEvent,
    DatasetAbout,
    DatasetInfo,
    EventKind,
    JobInfo,
    OutputInfo,
    PartitionInfo,
    RunInfo,
)
from dws_dagster.ol.naming import dataset_name
from dws_dagster.ol.spark_types import spark_type_fields
from tests.ol import ol_spec
from tests.ol.ol_client import NotTheClientsShape, check_client_roundtrip
from tests.ol.ol_spec import run_event_problems, validate_run_event

UTC = dt.UTC
RUN_ID = "0b6f3b52-8c1e-4f5e-9a43-2f7f6b1f1c11"
CREATED = dt.datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
NOW = dt.datetime(2024, 5, 1, 12, 31, 5, 250000, tzinfo=UTC)
TEST_PRODUCER = "https://github.com/dws-dagster/dws_dagster/tree/0.1.0"
WORKSPACE = "/data/ws"
LOCATIONS = {
    "src/rides": f"{WORKSPACE}/src/rides",
    "src/zones": "s3a://AKIAKEY:s3cr3t@taxi-bucket/zones/",
    "inter/hourly": f"{WORKSPACE}/inter/hourly",
}


def locate(ref: str) -> str:
    return LOCATIONS[ref]


def source(
    ref: str | None, column: str, kind: str, subtype: str, location: str | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {"ref": ref, "column": column, "kind": kind, "subtype": subtype}
    if location is not None:
        found["location"] = location
    return found


#: hourly = rides JOIN zones ON zone_id WHERE fare > 0 GROUP BY zone, hour: count, sum(fare)
JOIN_AGGREGATE = {
    "columns": {
        "zone": [source("src/zones", "zone", "DIRECT", "IDENTITY")],
        "hour": [source("src/rides", "pickup_ts", "DIRECT", "TRANSFORMATION")],
        "rides": [source("src/rides", "ride_id", "DIRECT", "AGGREGATION")],
        "fare_total": [
            source("src/rides", "fare", "DIRECT", "AGGREGATION"),
            source("src/rides", "fare", "INDIRECT", "CONDITIONAL"),
        ],
        "note": [
            source(None, "note", "DIRECT", "IDENTITY", location="hdfs://user:pw@nn:8020/ext/notes/")
        ],
        "constant": [],
    },
    "dataset": [
        source("src/rides", "zone_id", "INDIRECT", "JOIN"),
        source("src/zones", "zone_id", "INDIRECT", "JOIN"),
        source("src/rides", "fare", "INDIRECT", "FILTER"),
        source("src/zones", "zone", "INDIRECT", "GROUP_BY"),
        source("src/rides", "pickup_ts", "INDIRECT", "GROUP_BY"),
    ],
    "complete": True,
}

SCHEMA = (
    ("zone", "string", True),
    ("hour", "timestamp", True),
    ("rides", "bigint", False),
    ("fare_total", "decimal(12,2)", True),
    ("note", "struct<text:string,tags:array<string>,by:struct<name:string,at:timestamp>>", True),
    ("stops", "array<struct<lat:double,lon:double>>", True),
    ("attrs", "map<string,struct<v:int>>", True),
    ("flat", "map<string,array<int>>", True),
)


def full_job(**changes: Any) -> JobInfo:
    job = JobInfo(
        namespace="dagster-demo",
        name="taxi/hourly",
        description="Rides per **zone** and hour",
        owners=("team:data-eng", "alice@example.com"),
        source_code="def hourly(rides): ...",
        source_path="pipelines/taxi/assets.py",
        git_url="https://ghp_TOKEN@github.com/org/repo.git",
        git_commit="4f1c2d3e",
        git_branch="main",
        code_version="7",
    )
    return _replace(job, changes)


def full_run(**changes: Any) -> RunInfo:
    run = RunInfo(
        dagster_run_id=RUN_ID,
        dagster_job="__ASSET_JOB",
        dagster_run_created=CREATED,
        partition="2024-05-01-12:00",
        nominal_start=dt.datetime(2024, 5, 1, 12, tzinfo=UTC),
        nominal_end=dt.datetime(2024, 5, 1, 13, tzinfo=UTC),
        dependencies=("taxi/calendar", "taxi/holidays"),
        dagster_version="1.10.3",
        spark_version="4.0.1",
    )
    return _replace(run, changes)


#: what describes the asset `full_job` is the job of, and so its dataset
HOURLY_ABOUT = DatasetAbout(
    description="Rides per **zone** and hour",
    owners=("team:data-eng", "alice@example.com"),
    tags=(("dagster/kind/spark", ""), ("domain", "mobility"), ("dagster/kind/parquet", "")),
    kinds=("spark", "parquet"),
)


def full_output(**changes: Any) -> OutputInfo:
    output = OutputInfo(
        dataset=DatasetInfo(
            location=LOCATIONS["inter/hourly"],
            ref="inter/hourly",
            version="c0ffee",
            about=HOURLY_ABOUT,
        ),
        schema=SCHEMA,
        rows=1234,
        size_bytes=56789,
        file_format="parquet",
        column_lineage=JOIN_AGGREGATE,
    )
    return _replace(output, changes)


def full_event(kind: EventKind = "COMPLETE", **changes: Any) -> AssetRunEvent:
    event = AssetRunEvent(
        kind=kind,
        event_time=NOW,
        job=full_job(),
        run=full_run(),
        inputs=(
            DatasetInfo(location=LOCATIONS["src/rides"], ref="src/rides", version="r1"),
            DatasetInfo(location=LOCATIONS["src/zones"], ref="src/zones", version="z9"),
        ),
        outputs=(full_output(),),
        error_message="ValueError: fare is negative" if kind == "FAIL" else None,
        stack_trace="Traceback (most recent call last):\n  ..." if kind == "FAIL" else None,
    )
    return _replace(event, changes)


def minimal_event(kind: EventKind = "START") -> AssetRunEvent:
    return AssetRunEvent(
        kind=kind,
        event_time=NOW,
        job=JobInfo(namespace="dagster", name="lonely"),
        run=RunInfo(dagster_run_id=RUN_ID, dagster_job="__ASSET_JOB", dagster_run_created=CREATED),
    )


def _replace(obj: Any, changes: dict[str, Any]) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes) if changes else obj


def render(event: AssetRunEvent, locator: Callable[[str], str] = locate) -> dict[str, Any]:
    return build_run_event(event, locate=locator, producer=TEST_PRODUCER)


def valid(event: AssetRunEvent, locator: Callable[[str], str] = locate) -> dict[str, Any]:
    data = render(event, locator)
    validate_run_event(data)
    check_client_roundtrip(data)
    return data


# ---------------------------------------------------------------------------------- naming


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/data/ws/src/rides", ("file", "/data/ws/src/rides")),
        ("/data/ws/src/rides/", ("file", "/data/ws/src/rides")),
        ("/data/ws/./src//rides/../rides", ("file", "/data/ws/src/rides")),
        ("file:///data/ws/src/rides/", ("file", "/data/ws/src/rides")),
        ("file:/data/ws/src/rides", ("file", "/data/ws/src/rides")),
        ("file://localhost/data/x", ("file", "/data/x")),
        ("file://fileserver/share/x/", ("file://fileserver", "/share/x")),
        ("/data/odd name#1?v", ("file", "/data/odd name#1?v")),
        ("file:///data/odd name#1", ("file", "/data/odd name#1")),
        ("s3://bucket/key/part", ("s3://bucket", "key/part")),
        ("s3a://bucket/key/part/", ("s3://bucket", "key/part")),
        ("s3n://bucket//key//part", ("s3://bucket", "key/part")),
        ("s3a://bucket", ("s3://bucket", "/")),
        ("s3a://bucket/", ("s3://bucket", "/")),
        ("gs://bucket/dir/file.parquet", ("gs://bucket", "dir/file.parquet")),
        ("hdfs://namenode:8020/warehouse/t/", ("hdfs://namenode:8020", "/warehouse/t")),
        ("hdfs://nameservice1/warehouse/t", ("hdfs://nameservice1", "/warehouse/t")),
        ("hdfs://namenode:8020", ("hdfs://namenode:8020", "/")),
        (
            "abfss://raw@acct.dfs.core.windows.net/taxi/rides",
            ("abfss://raw@acct.dfs.core.windows.net", "taxi/rides"),
        ),
        (
            "wasbs://raw@acct.dfs.core.windows.net/taxi/",
            ("wasbs://raw@acct.dfs.core.windows.net", "taxi"),
        ),
        (
            "wasbs://raw@acct.blob.core.windows.net/taxi/rides",
            ("wasbs://raw@acct.blob.core.windows.net", "taxi/rides"),
        ),
        ("abfs://raw@acct.dfs.core.windows.net/t", ("abfs://raw@acct.dfs.core.windows.net", "t")),
        ("dbfs://workspace/mnt/x", ("dbfs://workspace", "/mnt/x")),
        ("https://example.org:8443/data/x.csv", ("https://example.org:8443", "/data/x.csv")),
    ],
)
def test_dataset_name_per_scheme(location: str, expected: tuple[str, str]) -> None:
    assert dataset_name(location) == expected


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("s3a://AKIAKEY:s3cr3t@bucket/key", ("s3://bucket", "key")),
        ("s3://AKIAKEY@bucket/key", ("s3://bucket", "key")),
        ("gs://user:s3cr3t@bucket/key", ("gs://bucket", "key")),
        ("hdfs://hdfs:s3cr3t@namenode:8020/p", ("hdfs://namenode:8020", "/p")),
        ("hdfs://s3cr3t@nameservice1/p", ("hdfs://nameservice1", "/p")),
        (
            "abfss://raw:s3cr3t@acct.dfs.core.windows.net/p",
            ("abfss://raw@acct.dfs.core.windows.net", "p"),
        ),
        (
            "wasbs://raw:s3cr3t@acct.blob.core.windows.net/p",
            ("wasbs://raw@acct.blob.core.windows.net", "p"),
        ),
        (
            "https://user:s3cr3t@example.org/data/x?sig=s3cr3t#s3cr3t",
            ("https://example.org", "/data/x"),
        ),
        ("file://user:s3cr3t@localhost/data/x", ("file", "/data/x")),
    ],
)
def test_dataset_name_strips_user_info_and_queries(
    location: str, expected: tuple[str, str]
) -> None:
    assert dataset_name(location) == expected


def test_relative_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert dataset_name("data/x/") == ("file", str(tmp_path / "data" / "x"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # names are memoized, but not across folders
    assert dataset_name("data/x/") == ("file", str(tmp_path / "elsewhere" / "data" / "x"))


@pytest.mark.parametrize(
    "location",
    ["", "   ", "hdfs:/no/authority", "s3:///key", "s3a://:s3cr3t@/key", "hdfs://nn:notaport/x"],
)
def test_dataset_name_refuses_unnameable_locations(location: str) -> None:
    with pytest.raises(InvalidLocationError) as caught:
        dataset_name(location)
    assert isinstance(caught.value, DwsError)
    assert "s3cr3t" not in str(caught.value)


# ----------------------------------------------------------------------------------- run id


def test_run_id_is_deterministic_uuid() -> None:
    run = full_run()
    first = ol_run_id(run, "taxi/hourly")
    assert first == ol_run_id(full_run(), "taxi/hourly")
    parsed = uuid.UUID(first)
    assert str(parsed) == first
    assert parsed.version == 7
    # The same instant in another zone is the same run.
    other_zone = full_run(
        dagster_run_created=CREATED.astimezone(dt.timezone(dt.timedelta(hours=-5)))
    )
    assert ol_run_id(other_zone, "taxi/hourly") == first


def test_run_ids_are_distinct_across_assets_partitions_and_runs() -> None:
    run = full_run()
    ids = {
        ol_run_id(run, "taxi/hourly"),
        ol_run_id(run, "taxi/daily"),
        ol_run_id(full_run(partition="2024-05-01-13:00"), "taxi/hourly"),
        ol_run_id(full_run(partition=None), "taxi/hourly"),
        ol_run_id(full_run(partition=""), "taxi/hourly"),
        ol_run_id(full_run(dagster_run_id="9d7f3b52-8c1e-4f5e-9a43-2f7f6b1f1c11"), "taxi/hourly"),
        ol_run_id(full_run(dagster_run_created=CREATED + dt.timedelta(seconds=1)), "taxi/hourly"),
    }
    assert len(ids) == 7


def test_run_id_of_a_real_event_is_the_helpers() -> None:
    data = valid(full_event())
    assert data["run"]["runId"] == ol_run_id(full_run(), "taxi/hourly")


def test_naive_datetimes_are_refused() -> None:
    naive = dt.datetime(2024, 5, 1, 12)
    with pytest.raises(EventBuildError, match="no time zone"):
        ol_run_id(full_run(dagster_run_created=naive), "a")
    with pytest.raises(EventBuildError, match="event_time"):
        render(full_event(event_time=naive))
    with pytest.raises(EventBuildError, match="nominal_start"):
        render(full_event(run=full_run(nominal_start=naive)))


# ----------------------------------------------------------------------------------- events


@pytest.mark.parametrize("kind", ["START", "COMPLETE", "FAIL", "ABORT"])
def test_full_events_conform_to_the_spec(kind: EventKind) -> None:
    data = valid(full_event(kind))
    assert data["eventType"] == kind
    assert data["eventTime"] == "2024-05-01T12:31:05.250000+00:00"
    assert data["producer"] == TEST_PRODUCER
    assert data["job"] == {
        **data["job"],
        "namespace": "dagster-demo",
        "name": "dagster.taxi/hourly",
    }
    run_facets = data["run"]["facets"]
    expected_run = {"parent", "processing_engine", "nominalTime", "jobDependencies", "tags"}
    assert set(run_facets) == (expected_run | {"errorMessage"} if kind == "FAIL" else expected_run)
    assert set(data["job"]["facets"]) == {
        "jobType",
        "sourceCode",
        "sourceCodeLocation",
        "documentation",
        "ownership",
        "tags",
    }
    assert [(d["namespace"], d["name"]) for d in data["inputs"]] == [
        ("file", "/data/ws/src/rides"),
        ("s3://taxi-bucket", "zones"),
    ]
    assert [(d["namespace"], d["name"]) for d in data["outputs"]] == [
        ("file", "/data/ws/inter/hourly")
    ]


def test_every_facet_carries_the_producer_and_a_spec_schema_url() -> None:
    data = valid(full_event("FAIL"))
    facets = [*data["run"]["facets"].values(), *data["job"]["facets"].values()]
    for dataset in [*data["inputs"], *data["outputs"]]:
        facets += [*dataset.get("facets", {}).values(), *dataset.get("outputFacets", {}).values()]
    assert len(facets) == 6 + 6 + 2 * 2 + 8 + 1
    for facet in facets:
        assert facet["_producer"] == TEST_PRODUCER
        assert facet["_schemaURL"].startswith("https://openlineage.io/spec/facets/")


def test_default_producer_names_this_package_version() -> None:
    expected = f"https://github.com/dws-dagster/dws_dagster/tree/{__version__}"
    assert expected == PRODUCER
    data = build_run_event(full_event(), locate=locate)
    validate_run_event(data)
    assert data["producer"] == PRODUCER
    assert data["run"]["facets"]["parent"]["_producer"] == PRODUCER


def test_events_are_json_ready() -> None:
    data = render(full_event("FAIL"))
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize(
    "event",
    [
        full_event("START"),
        full_event("COMPLETE"),
        full_event("FAIL"),
        full_event("ABORT"),
        minimal_event(),
    ],
    ids=["full-start", "full-complete", "full-fail", "full-abort", "minimal"],
)
def test_events_are_the_clients_classes_field_for_field(event: AssetRunEvent) -> None:
    """Built as dicts, the events load into openlineage-python's own classes (facets found by
    schema URL) and the client's serialization of those gives the same dict back."""
    check_client_roundtrip(render(event))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("run", "facets", "parent", "root", "job", "nam"), "typo"),
        (("job", "facets", "jobType", "processingType"), 3),
        (
            ("outputs", 0, "facets", "schema", "_schemaURL"),
            "https://openlineage.io/spec/facets/9-9-9/SchemaDatasetFacet.json",
        ),
        (
            (
                "outputs",
                0,
                "facets",
                "columnLineage",
                "fields",
                "zone",
                "inputFields",
                0,
                "transformations",
                0,
                "type",
            ),
            None,
        ),
        (("eventType",), "RESTART"),
    ],
)
def test_client_roundtrip_check_refuses_what_the_client_would_not_say(
    path: tuple[Any, ...], value: Any
) -> None:
    """The round-trip check itself: an unknown key, a wrong type, an unknown facet schema, a
    missing required field or an unknown event type is caught."""
    data = copy.deepcopy(render(full_event("COMPLETE")))
    target = data
    for step in path[:-1]:
        target = target[step]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    with pytest.raises(NotTheClientsShape):
        check_client_roundtrip(data)


def test_parent_and_root_are_the_dagster_run() -> None:
    parent = valid(full_event())["run"]["facets"]["parent"]
    dagster = {
        "run": {"runId": RUN_ID},
        "job": {"namespace": "dagster-demo", "name": "dagster"},
    }
    assert {"run": parent["run"], "job": parent["job"]} == dagster
    assert parent["root"] == dagster


def test_processing_engine_and_tags() -> None:
    facets = valid(full_event())["run"]["facets"]
    assert {k: v for k, v in facets["processing_engine"].items() if not k.startswith("_")} == {
        "name": "dagster",
        "version": "1.10.3",
        "openlineageAdapterVersion": __version__,
    }
    assert facets["tags"]["tags"] == [
        {"key": PARTITION_TAG, "value": "2024-05-01-12:00", "source": "DAGSTER"},
        {"key": "dagster/job", "value": "__ASSET_JOB", "source": "DAGSTER"},
        {"key": "spark/version", "value": "4.0.1", "source": "DAGSTER"},
    ]


def test_fail_carries_error_message_and_others_do_not() -> None:
    error = valid(full_event("FAIL"))["run"]["facets"]["errorMessage"]
    assert error["message"] == "ValueError: fare is negative"
    assert error["programmingLanguage"] == "python"
    assert error["stackTrace"].startswith("Traceback")
    completed = valid(full_event("COMPLETE", error_message="stale", stack_trace="x"))
    assert "errorMessage" not in completed["run"]["facets"]
    no_trace = valid(full_event("FAIL", stack_trace=None))["run"]["facets"]["errorMessage"]
    assert "stackTrace" not in no_trace
    no_message = valid(full_event("FAIL", error_message=None))
    assert "errorMessage" not in no_message["run"]["facets"]


def test_nominal_time() -> None:
    nominal = valid(full_event())["run"]["facets"]["nominalTime"]
    assert nominal["nominalStartTime"] == "2024-05-01T12:00:00+00:00"
    assert nominal["nominalEndTime"] == "2024-05-01T13:00:00+00:00"
    cet = dt.timezone(dt.timedelta(hours=2))
    open_ended = valid(
        full_event(
            run=full_run(nominal_start=dt.datetime(2024, 5, 1, 14, tzinfo=cet), nominal_end=None)
        )
    )
    assert (
        open_ended["run"]["facets"]["nominalTime"]["nominalStartTime"]
        == "2024-05-01T12:00:00+00:00"
    )
    assert "nominalEndTime" not in open_ended["run"]["facets"]["nominalTime"]
    no_start = valid(full_event(run=full_run(nominal_start=None)))
    assert "nominalTime" not in no_start["run"]["facets"]


def test_job_dependencies() -> None:
    dependencies = valid(full_event())["run"]["facets"]["jobDependencies"]
    assert dependencies["upstream"] == [
        {
            "job": {"namespace": "dagster-demo", "name": "dagster.taxi/calendar"},
            "dependency_type": "IMPLICIT_DEPENDENCY",
        },
        {
            "job": {"namespace": "dagster-demo", "name": "dagster.taxi/holidays"},
            "dependency_type": "IMPLICIT_DEPENDENCY",
        },
    ]
    assert "downstream" not in dependencies
    none = valid(full_event(run=full_run(dependencies=())))
    assert "jobDependencies" not in none["run"]["facets"]


def test_ownership_mapping() -> None:
    owners = ("team:data-eng", "alice@example.com", "team:", "someone")
    facet = valid(full_event(job=full_job(owners=(*owners, "team:data-eng"))))
    assert facet["job"]["facets"]["ownership"]["owners"] == [
        {"name": "data-eng", "type": "team"},
        {"name": "alice@example.com", "type": "user"},
        {"name": "team:"},
        {"name": "someone"},
    ]


def test_an_assets_output_is_described_as_the_asset_is() -> None:
    """What describes the asset describes its dataset: the catalog's dataset page shows it."""
    for kind in ("START", "COMPLETE"):
        [output] = valid(full_event(kind))["outputs"]
        facets = output["facets"]
        assert facets["documentation"]["description"] == "Rides per **zone** and hour"
        assert facets["documentation"]["contentType"] == "text/markdown"
        assert facets["ownership"]["owners"] == [
            {"name": "data-eng", "type": "team"},
            {"name": "alice@example.com", "type": "user"},
        ]
        # Each kind once, by one key; the tags Dagster keeps per kind are not repeated.
        assert facets["tags"]["tags"] == [
            {"key": "domain", "value": "mobility", "source": "DAGSTER"},
            {"key": "dagster/kind", "value": "parquet", "source": "DAGSTER"},
            {"key": "dagster/kind", "value": "spark", "source": "DAGSTER"},
        ]
    # An input without an asset behind it is not described.
    for dataset in valid(full_event())["inputs"]:
        assert not {"documentation", "ownership", "tags"} & set(dataset["facets"])
    bare = valid(full_event(outputs=(full_output(dataset=DatasetInfo(location="/tmp/o")),)))
    assert not {"documentation", "ownership", "tags"} & set(bare["outputs"][0]["facets"])
    leaky = DatasetAbout(description="reads s3a://key:s3cr3t@b/x")
    secret = valid(
        full_event(outputs=(full_output(dataset=DatasetInfo(location="/tmp/o", about=leaky)),))
    )
    assert "s3cr3t" not in json.dumps(secret)


def test_an_asset_read_keeps_its_description() -> None:
    """Marquez sets a dataset's description from every event naming it: an input read from
    an asset carries the asset's description (its owners and tags are its producer's to say)."""
    read = DatasetInfo(location=LOCATIONS["inter/hourly"], ref="inter/hourly", about=HOURLY_ABOUT)
    data = valid(full_event(inputs=(read,), outputs=()))
    [dataset] = data["inputs"]
    assert dataset["facets"]["documentation"]["description"] == "Rides per **zone** and hour"
    assert not {"ownership", "tags"} & set(dataset["facets"])


def test_a_results_outputs_metrics_are_its_own_validated_facet() -> None:
    metrics = (
        ("mae", 3.25),
        ("hours_scored", 2016),
        ("model", "seasonal_naive"),
        ("tuned", True),
        ("by_zone", {"1": 2.5}),
        ("diverged", float("nan")),
    )
    data = valid(full_event(outputs=(full_output(metrics=metrics),)))
    facet = data["outputs"][0]["facets"][METRICS_FACET]
    assert facet["metrics"] == {
        "mae": 3.25,
        "hours_scored": 2016,
        "model": "seasonal_naive",
        "tuned": True,
        "by_zone": '{"1":2.5}',
        "diverged": "null",
    }
    schema = json.loads(METRICS_SCHEMA_FILE.read_text())
    assert facet["_schemaURL"] == f"{schema['$id']}#/$defs/DwsMetricsDatasetFacet"
    assert METRICS_FACET in schema["properties"]
    assert (
        "outputFacets" not in data["outputs"][0]
        or METRICS_FACET not in (data["outputs"][0]["outputFacets"])
    )
    # The schema holds the facet to its shape like the spec's own.
    broken = copy.deepcopy(data)
    broken["outputs"][0]["facets"][METRICS_FACET]["metrics"]["mae"] = [1]
    assert any("dws_metrics" in problem for problem in run_event_problems(broken))
    assert METRICS_FACET not in valid(full_event())["outputs"][0]["facets"]


def test_the_metrics_facets_schema_is_packaged() -> None:
    import tomllib

    from dws_dagster.ol import custom_facets

    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["dws_dagster.ol"]
    relative = METRICS_SCHEMA_FILE.relative_to(Path(custom_facets.__file__).parent)
    assert METRICS_SCHEMA_FILE.is_file()
    assert any(relative.match(pattern) for pattern in patterns), relative


def checks_event(kind: EventKind = "COMPLETE", **changes: Any) -> AssetRunEvent:
    verdicts = (
        Assertion(name="rides_not_negative", success=True, severity="error", column="rides"),
        Assertion(name="enough_zones", success=False, severity="warn", description="12 zones"),
    )
    judged = DatasetInfo(
        location=LOCATIONS["inter/hourly"],
        ref="inter/hourly",
        partitions=(PartitionInfo(identifier="2024-05-01", subpath="2024-05-01", version="v5"),),
        assertions=verdicts if kind == "COMPLETE" else (),
    )
    event = AssetRunEvent(
        kind=kind,
        event_time=NOW,
        job=JobInfo(namespace="dagster-demo", name="taxi/hourly", checks=True),
        run=full_run(partition="2024-05-01", dependencies=()),
        inputs=(judged,),
    )
    return _replace(event, changes)


def test_check_verdicts_are_assertions_of_the_checked_input() -> None:
    data = valid(checks_event())
    assert data["job"]["name"] == "dagster.taxi/hourly.checks"
    assert data["job"]["facets"]["jobType"]["jobType"] == "ASSET_CHECK"
    assert data["outputs"] == []
    [judged] = data["inputs"]
    assertions = judged["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert assertions == [
        {
            "assertion": "rides_not_negative",
            "success": True,
            "column": "rides",
            "severity": "error",
            "name": "rides_not_negative",
        },
        {
            "assertion": "enough_zones",
            "success": False,
            "severity": "warn",
            "name": "enough_zones",
            "description": "12 zones",
        },
    ]
    # The partition judged, and its version.
    assert judged["inputFacets"]["subset"]["inputCondition"]["partitions"] == [
        {"identifier": "2024-05-01", "dimensions": {"partition": "2024-05-01"}}
    ]
    assert judged["facets"]["version"]["datasetVersion"] == "v5"
    start = valid(checks_event("START"))
    assert "dataQualityAssertions" not in start["inputs"][0]["inputFacets"]
    # One run per (Dagster run, asset, partition) for the checks, apart from the asset's own.
    asset_run = valid(full_event(run=full_run(partition="2024-05-01", dependencies=())))
    assert start["run"]["runId"] == data["run"]["runId"] != asset_run["run"]["runId"]
    assert data["run"]["facets"]["parent"] == asset_run["run"]["facets"]["parent"]


def test_job_facets_content() -> None:
    facets = valid(full_event())["job"]["facets"]
    assert {k: v for k, v in facets["jobType"].items() if not k.startswith("_")} == {
        "processingType": "BATCH",
        "integration": "DAGSTER",
        "jobType": "ASSET",
    }
    assert facets["sourceCode"]["language"] == "python"
    assert facets["sourceCode"]["sourceCode"] == "def hourly(rides): ..."
    assert facets["documentation"]["description"] == "Rides per **zone** and hour"
    assert facets["tags"]["tags"] == [
        {"key": "dagster/code_version", "value": "7", "source": "DAGSTER"}
    ]
    location = {k: v for k, v in facets["sourceCodeLocation"].items() if not k.startswith("_")}
    assert location == {
        "type": "git",
        "url": "https://github.com/org/repo/blob/4f1c2d3e/pipelines/taxi/assets.py",
        "repoUrl": "https://github.com/org/repo.git",
        "path": "pipelines/taxi/assets.py",
        "version": "4f1c2d3e",
        "branch": "main",
    }


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"git_url": "git@gitlab.com:grp/repo.git", "git_branch": None},
            {
                "type": "git",
                "url": "https://gitlab.com/grp/repo/-/blob/4f1c2d3e/pipelines/taxi/assets.py",
                "repoUrl": "ssh://git@gitlab.com/grp/repo.git",
                "path": "pipelines/taxi/assets.py",
                "version": "4f1c2d3e",
            },
        ),
        (
            {
                "git_url": "https://deploy:s3cr3t@git.example.com/repo.git",
                "git_commit": None,
                "git_branch": None,
                "source_path": None,
            },
            {
                "type": "git",
                "url": "https://git.example.com/repo.git",
                "repoUrl": "https://git.example.com/repo.git",
            },
        ),
        (
            {"git_url": None, "source_path": "/srv/code/assets.py"},
            {
                "type": "git",
                "url": "file:///srv/code/assets.py",
                "path": "/srv/code/assets.py",
                "version": "4f1c2d3e",
                "branch": "main",
            },
        ),
        (
            {
                "git_url": None,
                "git_commit": None,
                "git_branch": None,
                "source_path": "/srv/my code/assets.py",
            },
            {
                "type": "file",
                "url": "file:///srv/my%20code/assets.py",
                "path": "/srv/my code/assets.py",
            },
        ),
        ({"git_url": None}, None),
        # A repository without a remote: the file in the clone, with the commit and the path.
        (
            {"git_url": None, "git_root": "/srv/repo"},
            {
                "type": "git",
                "url": "file:///srv/repo/pipelines/taxi/assets.py",
                "repoUrl": "file:///srv/repo",
                "path": "pipelines/taxi/assets.py",
                "version": "4f1c2d3e",
                "branch": "main",
            },
        ),
        ({"git_url": None, "source_path": None}, None),
    ],
)
def test_source_code_location_only_when_its_url_can_be_filled(
    changes: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    facets = valid(full_event(job=full_job(**changes)))["job"]["facets"]
    if expected is None:
        assert "sourceCodeLocation" not in facets
    else:
        got = facets["sourceCodeLocation"]
        assert {k: v for k, v in got.items() if not k.startswith("_")} == expected


def test_dataset_facets_version_symlinks_storage_statistics() -> None:
    data = valid(full_event())
    rides = data["inputs"][0]["facets"]
    assert rides["version"]["datasetVersion"] == "r1"
    assert rides["symlinks"]["identifiers"] == [
        {"namespace": workspace_namespace("dagster-demo"), "name": "src/rides", "type": "TABLE"}
    ]
    assert workspace_namespace("dagster-demo") == "dws://dagster-demo"
    output = data["outputs"][0]
    assert output["facets"]["version"]["datasetVersion"] == "c0ffee"
    assert output["facets"]["symlinks"]["identifiers"][0]["name"] == "inter/hourly"
    assert output["facets"]["storage"]["storageLayer"] == "file"
    assert output["facets"]["storage"]["fileFormat"] == "parquet"
    statistics = output["outputFacets"]["outputStatistics"]
    assert (statistics["rowCount"], statistics["size"]) == (1234, 56789)


def test_partial_output_statistics_and_unknown_format() -> None:
    output = valid(full_event(outputs=(full_output(rows=None, size_bytes=0, file_format=None),)))[
        "outputs"
    ][0]
    assert output["outputFacets"]["outputStatistics"]["size"] == 0
    assert "rowCount" not in output["outputFacets"]["outputStatistics"]
    assert "fileFormat" not in output["facets"]["storage"]
    bare = valid(full_event(outputs=(full_output(rows=None, size_bytes=None),)))["outputs"][0]
    assert "outputFacets" not in bare


def test_start_renders_what_it_is_given() -> None:
    with_data = valid(full_event("START"))
    assert len(with_data["inputs"]) == 2
    assert len(with_data["outputs"]) == 1
    bare = valid(full_event("START", inputs=(), outputs=()))
    assert bare["inputs"] == []
    assert bare["outputs"] == []


# --------------------------------------------------------------------------- column lineage


def _fields(output: dict[str, Any]) -> dict[str, list[tuple[str, str, str, list[Any]]]]:
    lineage = output["facets"]["columnLineage"]["fields"]
    return {
        column: [
            (
                f["namespace"],
                f["name"],
                f["field"],
                [(t["type"], t.get("subtype"), t["masking"]) for t in f["transformations"]],
            )
            for f in entry["inputFields"]
        ]
        for column, entry in lineage.items()
    }


def test_column_lineage_join_and_aggregate_column_by_column() -> None:
    calls: list[str] = []

    def counting_locate(ref: str) -> str:
        calls.append(ref)
        return locate(ref)

    output = valid(full_event(), counting_locate)["outputs"][0]
    rides = ("file", "/data/ws/src/rides")
    zones = ("s3://taxi-bucket", "zones")
    assert _fields(output) == {
        "zone": [(*zones, "zone", [("DIRECT", "IDENTITY", False)])],
        "hour": [(*rides, "pickup_ts", [("DIRECT", "TRANSFORMATION", False)])],
        "rides": [(*rides, "ride_id", [("DIRECT", "AGGREGATION", False)])],
        # one input field, both ways the column depends on it
        "fare_total": [
            (*rides, "fare", [("DIRECT", "AGGREGATION", False), ("INDIRECT", "CONDITIONAL", False)])
        ],
        # no ref: the recorded location, named without its credentials
        "note": [("hdfs://nn:8020", "/ext/notes", "note", [("DIRECT", "IDENTITY", False)])],
    }
    dataset = output["facets"]["columnLineage"]["dataset"]
    assert [
        (
            f["namespace"],
            f["name"],
            f["field"],
            [(t["type"], t["subtype"]) for t in f["transformations"]],
        )
        for f in dataset
    ] == [
        (*rides, "zone_id", [("INDIRECT", "JOIN")]),
        (*zones, "zone_id", [("INDIRECT", "JOIN")]),
        (*rides, "fare", [("INDIRECT", "FILTER")]),
        (*zones, "zone", [("INDIRECT", "GROUP_BY")]),
        (*rides, "pickup_ts", [("INDIRECT", "GROUP_BY")]),
    ]
    # Each ref is located once, however many sources name it.
    assert sorted(calls) == ["src/rides", "src/zones"]
    # Input fields meet the event's input datasets under the same identity.
    inputs = {(d["namespace"], d["name"]) for d in valid(full_event())["inputs"]}
    assert {rides, zones} <= inputs


def test_column_lineage_absent_or_empty_gives_no_facet() -> None:
    for lineage in (None, {}, {"columns": {"a": []}, "dataset": [], "complete": False}):
        output = valid(full_event(outputs=(full_output(column_lineage=lineage),)))["outputs"][0]
        assert "columnLineage" not in output["facets"]


def test_column_lineage_dataset_only() -> None:
    lineage = {"columns": {}, "dataset": [source("src/rides", "fare", "INDIRECT", "FILTER")]}
    output = valid(full_event(outputs=(full_output(column_lineage=lineage),)))["outputs"][0]
    assert output["facets"]["columnLineage"]["fields"] == {}
    assert output["facets"]["columnLineage"]["dataset"][0]["field"] == "fare"


@pytest.mark.parametrize(
    ("lineage", "message"),
    [
        (
            {"columns": {"a": [{"column": "x", "kind": "DIRECT", "subtype": "IDENTITY"}]}},
            "neither a ref nor a location",
        ),
        (
            {"columns": {"a": [source("src/rides", "x", "SIDEWAYS", "IDENTITY")]}},
            "not DIRECT or INDIRECT",
        ),
        ({"columns": {"a": [source("src/rides", "", "DIRECT", "IDENTITY")]}}, "names no column"),
        ({"columns": {"a": "src/rides.x"}}, "must be a list"),
        ({"columns": [["a", []]]}, "must map output columns"),
    ],
)
def test_malformed_column_lineage_is_refused(lineage: dict[str, Any], message: str) -> None:
    with pytest.raises(EventBuildError, match=message) as caught:
        render(full_event(outputs=(full_output(column_lineage=lineage),)))
    assert "taxi/hourly" in str(caught.value)


def test_locate_errors_propagate() -> None:
    with pytest.raises(KeyError):
        render(full_event(), lambda ref: {}[ref])


# ---------------------------------------------------------------------------------- schema


def test_schema_facet_with_nested_types() -> None:
    fields = valid(full_event())["outputs"][0]["facets"]["schema"]["fields"]
    by_name = {field["name"]: field for field in fields}
    assert [f["name"] for f in fields] == [name for name, _type, _nullable in SCHEMA]
    assert [f["ordinal_position"] for f in fields] == list(range(1, len(SCHEMA) + 1))
    assert by_name["rides"] == {"name": "rides", "type": "bigint", "ordinal_position": 3}
    assert by_name["fare_total"]["type"] == "decimal(12,2)"
    assert "fields" not in by_name["fare_total"]
    note = by_name["note"]
    assert note["type"] == SCHEMA[4][1]
    assert note["fields"] == [
        {"name": "text", "type": "string", "ordinal_position": 1},
        {"name": "tags", "type": "array<string>", "ordinal_position": 2},
        {
            "name": "by",
            "type": "struct<name:string,at:timestamp>",
            "ordinal_position": 3,
            "fields": [
                {"name": "name", "type": "string", "ordinal_position": 1},
                {"name": "at", "type": "timestamp", "ordinal_position": 2},
            ],
        },
    ]
    assert by_name["stops"]["fields"] == [
        {
            "name": "_element",
            "type": "struct<lat:double,lon:double>",
            "fields": [
                {"name": "lat", "type": "double", "ordinal_position": 1},
                {"name": "lon", "type": "double", "ordinal_position": 2},
            ],
        }
    ]
    assert by_name["attrs"]["fields"] == [
        {"name": "key", "type": "string"},
        {
            "name": "value",
            "type": "struct<v:int>",
            "fields": [{"name": "v", "type": "int", "ordinal_position": 1}],
        },
    ]
    assert "fields" not in by_name["flat"]


@pytest.mark.parametrize(
    "spark_type",
    [
        "struct<a:int,... 3 more fields>",
        "struct<a:int",
        "struct<a:struct<b:int,... 2 more fields>,c:int>",
        "array<int",
        "map<string>",
        "",
    ],
)
def test_unparsable_types_keep_their_string(spark_type: str) -> None:
    assert spark_type_fields(spark_type) is None
    if spark_type:
        output = full_output(schema=(("c", spark_type, True),), column_lineage=None)
        fields = valid(full_event(outputs=(output,)))["outputs"][0]["facets"]["schema"]["fields"]
        assert fields == [{"name": "c", "type": spark_type, "ordinal_position": 1}]


def test_empty_struct_and_decimal_inside_struct() -> None:
    fields = spark_type_fields("struct<d:decimal(10,2),e:struct<>>")
    assert fields is not None
    assert fields == [
        {"name": "d", "type": "decimal(10,2)", "ordinal_position": 1},
        {"name": "e", "type": "struct<>", "ordinal_position": 2, "fields": []},
    ]


# ------------------------------------------------------------------------- minimal, errors


@pytest.mark.parametrize("kind", ["START", "COMPLETE", "FAIL", "ABORT"])
def test_events_with_no_optional_data_conform(kind: EventKind) -> None:
    data = valid(minimal_event(kind))
    # The Dagster job its Dagster run executes is always known: a tag.
    assert set(data["run"]["facets"]) == {"parent", "tags"}
    assert [t["key"] for t in data["run"]["facets"]["tags"]["tags"]] == ["dagster/job"]
    assert set(data["job"]["facets"]) == {"jobType"}
    assert data["inputs"] == []
    assert data["outputs"] == []


def test_bare_datasets_conform() -> None:
    event = _replace(
        minimal_event("COMPLETE"),
        {
            "inputs": (DatasetInfo(location="gs://b/in"),),
            "outputs": (OutputInfo(dataset=DatasetInfo(location="/tmp/out")),),
        },
    )
    data = valid(event)
    assert data["inputs"][0]["facets"] == {}
    assert set(data["outputs"][0]["facets"]) == {"storage"}


def test_no_secret_reaches_an_event() -> None:
    event = full_event(
        "FAIL",
        inputs=(
            DatasetInfo(location="abfss://raw:s3cr3t@acct.dfs.core.windows.net/p?sig=s3cr3t"),
            DatasetInfo(location="hdfs://s3cr3t@nn:8020/p"),
        ),
        job=full_job(git_url="https://oauth2:s3cr3t@gitlab.com/g/r.git"),
    )
    text = json.dumps(valid(event))
    assert "s3cr3t" not in text
    assert "AKIAKEY" not in text
    assert "ghp_TOKEN" not in json.dumps(valid(full_event()))


def test_bad_inputs_are_refused_with_dws_errors() -> None:
    with pytest.raises(EventBuildError, match="not a UUID"):
        render(full_event(run=full_run(dagster_run_id="run-1")))
    with pytest.raises(EventBuildError, match="not a UUID"):
        render(full_event(run=full_run(dagster_run_id=["run-1"])))
    with pytest.raises(EventBuildError, match="START, COMPLETE"):
        render(full_event(kind="RUNNING_LATE"))  # type: ignore[arg-type]
    with pytest.raises(EventBuildError, match="START, COMPLETE"):
        render(full_event(kind=["START"]))  # type: ignore[arg-type]
    with pytest.raises(DwsError):
        render(full_event(inputs=(DatasetInfo(location=""),)))


# ------------------------------------------------------------------------------- validator


def test_validator_accepts_then_lists_every_problem() -> None:
    good = render(full_event("FAIL"))
    assert run_event_problems(good) == []
    bad = copy.deepcopy(good)
    bad["run"]["runId"] = "not-a-uuid"
    bad["eventTime"] = "2024-13-45 25:00"
    del bad["run"]["facets"]["errorMessage"]["programmingLanguage"]
    bad["outputs"][0]["facets"]["columnLineage"]["fields"]["zone"]["inputFields"][0].pop("field")
    problems = run_event_problems(bad)
    joined = "\n".join(problems)
    assert "'not-a-uuid' is not a 'uuid'" in joined
    assert "is not a 'date-time'" in joined
    assert "$.run.facets.errorMessage: 'programmingLanguage' is a required property" in joined
    assert "$.outputs[0].facets.columnLineage.fields.zone.inputFields[0]: 'field'" in joined
    with pytest.raises(AssertionError, match="4 problems"):
        validate_run_event(bad)


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda e: e.pop("eventTime"), "'eventTime' is a required property"),
        (lambda e: e.update(producer="not a uri"), "is not a 'uri'"),
        (lambda e: e.update(eventType="DONE"), "'DONE' is not one of"),
        (lambda e: e["job"].pop("namespace"), "'namespace' is a required property"),
        (lambda e: e["run"]["facets"]["parent"]["run"].update(runId="x"), "'x' is not a 'uuid'"),
        (
            lambda e: e["run"]["facets"]["nominalTime"].update(nominalStartTime="yesterday"),
            "'yesterday' is not a 'date-time'",
        ),
        (
            lambda e: e["run"]["facets"]["parent"].pop("_producer"),
            "'_producer' is a required property",
        ),
        (
            lambda e: e["job"]["facets"]["jobType"].pop("integration"),
            "'integration' is a required property",
        ),
        (
            lambda e: e["job"]["facets"]["sourceCodeLocation"].update(url="git@h:o/r.git"),
            "is not a 'uri'",
        ),
        (
            lambda e: e["outputs"][0]["outputFacets"]["outputStatistics"].update(rowCount="12"),
            "'12' is not of type 'integer'",
        ),
        (
            lambda e: e["inputs"][0]["facets"]["symlinks"]["identifiers"][0].pop("type"),
            "'type' is a required property",
        ),
        (
            lambda e: e["inputs"][0]["facets"]["version"].update(
                _schemaURL="https://openlineage.io/spec/facets/9-9-9/Nope.json#/$defs/Nope"
            ),
            "names no schema in the OpenLineage spec folder",
        ),
        (
            lambda e: e["inputs"][0]["facets"]["version"].pop("_schemaURL"),
            "facet has no _schemaURL",
        ),
        (
            lambda e: e["run"]["facets"].update(parentRun=e["run"]["facets"].pop("parent")),
            "belongs under key 'parent'",
        ),
        (lambda e: e["run"]["facets"].update(jobType=e["job"]["facets"]["jobType"]), "a JobFacet"),
        (
            lambda e: e["outputs"][0]["facets"].update(
                outputStatistics=e["outputs"][0]["outputFacets"]["outputStatistics"]
            ),
            "does not belong in facets",
        ),
        (
            lambda e: e.update(schemaURL="https://openlineage.io/spec/9-9-9/OpenLineage.json"),
            "names no schema in the spec folder",
        ),
    ],
)
def test_validator_catches_broken_events(
    breakage: Callable[[dict[str, Any]], Any], expected: str
) -> None:
    event = render(full_event("FAIL"))
    breakage(event)
    with pytest.raises(AssertionError) as caught:
        validate_run_event(event)
    assert expected in str(caught.value)


def test_validator_refuses_non_json_values() -> None:
    event = render(full_event())
    event["eventTime"] = NOW
    with pytest.raises(AssertionError, match="not JSON-serialisable"):
        validate_run_event(event)


def test_spec_dir_fails_when_shared_lacks_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (ol_spec.spec_dir() / "OpenLineage.json").is_file()
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setattr(ol_spec, "SHARED_DIR", shared)
    with pytest.raises(pytest.fail.Exception, match="openlineage-spec"):
        ol_spec.spec_dir()
    monkeypatch.setattr(ol_spec, "SHARED_DIR", tmp_path / "absent")
    with pytest.raises(pytest.skip.Exception, match="no shared folder"):
        ol_spec.spec_dir()


# ------------------------------------------------------------------ partitions as subsets

HOURLY_ROOT = f"{WORKSPACE}/inter/hourly"


def partitioned_output(*parts: PartitionInfo) -> OutputInfo:
    return full_output(
        dataset=DatasetInfo(location=HOURLY_ROOT, ref="inter/hourly", partitions=parts)
    )


def test_a_written_partition_is_the_assets_root_with_an_output_condition() -> None:
    part = PartitionInfo(identifier="2024-05-01-12:00", subpath="2024-05-01-12%3A00", version="v12")
    output = valid(full_event(outputs=(partitioned_output(part),)))["outputs"][0]
    assert (output["namespace"], output["name"]) == ("file", HOURLY_ROOT)
    assert output["facets"]["symlinks"]["identifiers"][0]["name"] == "inter/hourly"
    # The version of what was written: that partition's.
    assert output["facets"]["version"]["datasetVersion"] == "v12"
    subset = output["outputFacets"]["subset"]
    assert subset["_schemaURL"].endswith(
        "BaseSubsetDatasetFacet.json#/$defs/OutputSubsetOutputDatasetFacet"
    )
    assert subset["outputCondition"] == {
        "type": "partition",
        "partitions": [
            {"identifier": "2024-05-01-12:00", "dimensions": {"partition": "2024-05-01-12:00"}}
        ],
    }
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 1234
    # START announces the same identity and partition, before any version is known.
    start = valid(
        full_event(
            "START",
            outputs=(partitioned_output(PartitionInfo("2024-05-01-12:00", "2024-05-01-12%3A00")),),
        )
    )["outputs"][0]
    assert (start["namespace"], start["name"]) == ("file", HOURLY_ROOT)
    assert start["outputFacets"]["subset"] == subset
    assert "version" not in start["facets"]


def test_an_input_reading_many_partitions_is_one_dataset_listing_them() -> None:
    days = tuple(
        PartitionInfo(f"2024-05-0{d}", f"day=2024-05-0{d}/zone=a", f"v{d}") for d in (1, 2, 3)
    )
    rides = DatasetInfo(location=f"{WORKSPACE}/src/rides", ref="src/rides", partitions=days)
    event = valid(full_event(inputs=(rides,)))
    [found] = event["inputs"]
    assert found["name"] == f"{WORKSPACE}/src/rides"
    condition = found["inputFacets"]["subset"]["inputCondition"]
    assert found["inputFacets"]["subset"]["_schemaURL"].endswith(
        "#/$defs/InputSubsetInputDatasetFacet"
    )
    assert condition == {
        "type": "partition",
        "partitions": [
            {"identifier": f"2024-05-0{d}", "dimensions": {"day": f"2024-05-0{d}", "zone": "a"}}
            for d in (1, 2, 3)
        ],
    }
    # One version for what was read: the same partitions and versions give the same one,
    # another version of any partition another.
    version = found["facets"]["version"]["datasetVersion"]
    again = valid(full_event(inputs=(rides,)))["inputs"][0]["facets"]["version"]
    assert again["datasetVersion"] == version
    changed = _replace(rides, {"partitions": (*days[:2], _replace(days[2], {"version": "v9"}))})
    other = valid(full_event(inputs=(changed,)))["inputs"][0]["facets"]["version"]
    assert other["datasetVersion"] != version
    unknown = _replace(rides, {"partitions": (*days[:2], _replace(days[2], {"version": None}))})
    assert "version" not in valid(full_event(inputs=(unknown,)))["inputs"][0]["facets"]


def test_unpartitioned_datasets_keep_their_identity_and_have_no_subset() -> None:
    event = valid(full_event())
    assert [d["name"] for d in event["inputs"]] == [f"{WORKSPACE}/src/rides", "zones"]
    assert all("inputFacets" not in d for d in event["inputs"])
    assert "subset" not in event["outputs"][0]["outputFacets"]


def test_inputs_carry_their_schema_and_column_lineage_names_them_by_their_root() -> None:
    rides = DatasetInfo(
        location=f"{WORKSPACE}/src/rides",
        ref="src/rides",
        partitions=(
            PartitionInfo("2024-05-01", "2024-05-01", "a"),
            PartitionInfo("2024-05-02", "2024-05-02", "b"),
        ),
        schema=(
            ("ride_id", "bigint", False),
            ("fare", "double", True),
            ("pickup_ts", "timestamp", True),
            ("zone_id", "int", True),
        ),
    )
    lineage = {
        "columns": {
            # one source by the partition's ref, one by a path inside the root
            "rides": [source("src/rides/2024-05-01", "ride_id", "DIRECT", "AGGREGATION")],
            "fare_total": [
                source(
                    None,
                    "fare",
                    "DIRECT",
                    "AGGREGATION",
                    location=f"{WORKSPACE}/src/rides/2024-05-02",
                )
            ],
        }
    }
    located = {**LOCATIONS, "src/rides/2024-05-01": f"{WORKSPACE}/src/rides/2024-05-01"}
    event = build_run_event(
        full_event(inputs=(rides,), outputs=(full_output(column_lineage=lineage),)),
        locate=located.__getitem__,
        producer=TEST_PRODUCER,
    )
    validate_run_event(event)
    [found] = event["inputs"]
    assert [f["name"] for f in found["facets"]["schema"]["fields"]] == [
        "ride_id",
        "fare",
        "pickup_ts",
        "zone_id",
    ]
    fields = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    for column in ("rides", "fare_total"):
        [edge] = fields[column]["inputFields"]
        assert (edge["namespace"], edge["name"]) == (found["namespace"], found["name"])
