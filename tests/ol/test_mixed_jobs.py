"""The example's taxi pipeline run as teams run it, folded the way Marquez folds it
(catalog_rules): the hourly actuals materialized by their schedule's job, by the UI's asset job
and by a single-run backfill, with asset checks that pass, fail and judge one partition, in a
run of their own too. One Dagster instance, four runs, the sensor's work after each.

The checks are defined here, beside the example's definitions, as a team adds its own; the
actuals get the `partition_expr` a single-run backfill needs (which column holds each row's
month), as a team enabling such backfills would add it."""

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    Definitions,
    asset_check,
)
from dagster_pyspark import PySparkResource

from dws_dagster import Workspace, WorkspaceResource, process_events
from dws_dagster import metadata_keys as keys
from dws_dagster.assets.bindings import binding_from_metadata
from dws_dagster.assets.partitions import partition_key_ref
from dws_dagster.ol.job_names import DAGSTER_JOB, asset_job_name, checks_job_name
from dws_dagster.spark import storage
from example_project.assets import HOURLY_ACTUALS, partitions_for
from example_project.project import QUIET_LOGGING, TAXI_JOB, build_definitions
from example_project.setup_workspace import SMALL
from tests.ol import catalog_rules
from tests.ol.ol_client import check_client_roundtrip
from tests.ol.ol_parents import check_parents
from tests.ol.ol_spec import validate_run_event

pytestmark = pytest.mark.spark

ACTUALS = AssetKey("yellow_rides_hourly_actuals")
TAXI = [AssetKey("yellow_taxi_staging"), AssetKey("yellow_taxi_raw"), ACTUALS]
JAN, FEB = "2024-01-01", "2024-02-01"
ACTUALS_REF = "intermediate-data/yellow_rides_hourly_actuals"
#: what the example's partition template makes of each month key
SUBPATHS = {JAN: "2024-01", FEB: "2024-02"}
BACKFILL_TAGS = {
    "dagster/backfill": "mixedjobs",
    "dagster/asset_partition_range_start": JAN,
    "dagster/asset_partition_range_end": FEB,
}


def _actuals(spark: Any, workspace: WorkspaceResource, partition: str | None) -> Any:
    """The actuals of one month, or of every month materialized."""
    ws = workspace.workspace()
    binding = binding_from_metadata(HOURLY_ACTUALS, what="asset 'yellow_rides_hourly_actuals'")
    months = partitions_for(SMALL).months
    keys_read = [partition] if partition else months.get_partition_keys()
    locations = [ws.location(partition_key_ref(binding, months, key, "check")) for key in keys_read]
    return storage.read(
        spark, [loc for loc in locations if storage.exists(spark, loc)], what="check"
    )


def checks() -> list[Any]:
    """A check that passes, one that fails (a warning), and one of a partition."""
    months = partitions_for(SMALL).months

    @asset_check(
        asset=ACTUALS,
        description="No zone and hour has a negative ride count.",
        metadata={keys.CHECK_COLUMN: "rides"},
    )
    def rides_not_negative(
        pyspark: PySparkResource, workspace: WorkspaceResource
    ) -> AssetCheckResult:
        data = _actuals(pyspark.spark_session, workspace, None)
        return AssetCheckResult(passed=data.where("rides < 0").count() == 0)

    @asset_check(
        asset=ACTUALS,
        description="The forecast needs at least 50 pickup zones.",
        metadata={keys.CHECK_COLUMN: "zone"},
    )
    def enough_zones(pyspark: PySparkResource, workspace: WorkspaceResource) -> AssetCheckResult:
        data = _actuals(pyspark.spark_session, workspace, None)
        zones = data.select("zone").distinct().count()
        return AssetCheckResult(
            passed=zones >= 50,
            severity=AssetCheckSeverity.WARN,
            description=f"{zones} zones",
        )

    @asset_check(asset=ACTUALS, partitions_def=months, description="The month has rides.")
    def month_has_rides(
        context: AssetCheckExecutionContext, pyspark: PySparkResource, workspace: WorkspaceResource
    ) -> AssetCheckResult:
        data = _actuals(pyspark.spark_session, workspace, context.partition_key)
        return AssetCheckResult(passed=data.where("rides > 0").count() > 0)

    return [rides_not_negative, enough_zones, month_has_rides]


def definitions(root: Path) -> Definitions:
    """The example's definitions, the actuals ready for single-run backfills, with the checks."""

    def backfillable(spec: Any) -> Any:
        if spec.key != ACTUALS:
            return spec
        return spec.replace_attributes(metadata={**spec.metadata, "partition_expr": "hour"})

    example = build_definitions(root, SMALL)
    return Definitions.merge(
        example.map_asset_specs(func=backfillable), Definitions(asset_checks=checks())
    )


@dataclasses.dataclass
class Scenario:
    ws: Workspace
    instance: DagsterInstance
    events: list[dict[str, Any]]
    #: Dagster run id by what launched it: schedule, ui, backfill, checks
    runs: dict[str, str]
    #: after each run (by label), the verdicts in the record of each month of the actuals
    verdicts: dict[str, dict[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory) -> Any:
    base = tmp_path_factory.mktemp("mixed-jobs")
    defs = definitions(base / "ws")
    ws = Workspace.open(base / "ws")
    home = base / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    instance = DagsterInstance.from_config(str(home))
    repository = defs.get_repository_def()
    asset_job = defs.resolve_implicit_global_asset_job_def()
    cursor = 0
    runs: dict[str, str] = {}
    verdicts: dict[str, dict[str, dict[str, Any]]] = {}

    def launch(label: str, job: Any, **kwargs: Any) -> None:
        nonlocal cursor
        result = job.execute_in_process(run_config=QUIET_LOGGING, instance=instance, **kwargs)
        assert result.success
        runs[label] = result.run_id
        outcome = process_events(instance, ws, after_storage_id=cursor, repository_def=repository)
        cursor = outcome.cursor
        assert not outcome.applied.skipped, outcome.applied.skipped
        verdicts[label] = {}
        for month, subpath in SUBPATHS.items():
            state = ws.store.get(f"{ACTUALS_REF}/{subpath}")
            if state is not None:
                verdicts[label][month] = dict(state.record["extra"].get("checks", {}))

    try:
        # January by the schedule's job (as its tick launches it), with every check.
        launch("schedule", defs.resolve_job_def(TAXI_JOB), partition_key=JAN)
        # February from the UI: "Materialize" of the three taxi assets (the asset job).
        launch("ui", asset_job, partition_key=FEB, asset_selection=TAXI)
        # Both months of the actuals again, in one run (a single-run backfill), with the
        # check of the whole asset.
        backfill = asset_job.get_subset(
            asset_selection={ACTUALS},
            asset_check_selection={AssetCheckKey(ACTUALS, "rides_not_negative")},
        )
        launch("backfill", backfill, tags=BACKFILL_TAGS)
        # January's partition check alone, apart from any materialization.
        alone = asset_job.get_subset(
            asset_selection=set(),
            asset_check_selection={AssetCheckKey(ACTUALS, "month_has_rides")},
        )
        launch("checks", alone, tags={"dagster/partition": JAN})
        path = ws.meta_dir / "openlineage" / "events.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines()]
        yield Scenario(ws, instance, events, runs, verdicts)
    finally:
        instance.dispose()


def _evaluations(instance: DagsterInstance, run_id: str) -> list[Any]:
    return [
        entry.dagster_event.event_specific_data
        for entry in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    ]


def _actuals_id(scenario: Scenario) -> tuple[str, str]:
    return ("file", str(scenario.ws.local_path(ACTUALS_REF)))


# ------------------------------------------------------------------------------ the runs


def test_the_actuals_were_written_by_three_dagster_runs_of_two_dagster_jobs(scenario):
    """What the scenario set out to do: the rules below judge a real mix of jobs."""
    runs = {
        label: scenario.instance.get_run_by_id(run_id) for label, run_id in scenario.runs.items()
    }
    assert runs["schedule"].job_name == TAXI_JOB
    assert {runs[label].job_name for label in ("ui", "backfill", "checks")} == {"__ASSET_JOB"}
    written = Counter()
    for label in ("schedule", "ui", "backfill"):
        for entry in scenario.instance.all_logs(
            scenario.runs[label], of_type=DagsterEventType.ASSET_MATERIALIZATION
        ):
            materialization = entry.dagster_event.event_specific_data.materialization
            if materialization.asset_key == ACTUALS:
                written[label] += 1
    assert written == {"schedule": 1, "ui": 1, "backfill": 2}
    verdicts = {
        label: [(e.check_name, e.passed) for e in _evaluations(scenario.instance, run_id)]
        for label, run_id in scenario.runs.items()
    }
    assert sorted(verdicts["schedule"]) == [
        ("enough_zones", False),
        ("month_has_rides", True),
        ("rides_not_negative", True),
    ]
    assert sorted(verdicts["ui"]) == sorted(verdicts["schedule"])
    assert verdicts["backfill"] == [("rides_not_negative", True)]
    assert verdicts["checks"] == [("month_has_rides", True)]


# ---------------------------------------------------------------------- one job per asset


def test_every_event_conforms_to_the_spec_and_the_clients_classes(scenario):
    for event in scenario.events:
        validate_run_event(event)
        check_client_roundtrip(event)


def test_every_dataset_has_one_producing_job_under_marquez_naming(scenario):
    events = scenario.events
    assert catalog_rules.datasets_with_several_producers(events) == []
    # The names sent are the names Marquez keeps: every catalog shows the same jobs.
    assert catalog_rules.renamed_jobs(events) == []
    producers = catalog_rules.producing_jobs(events)
    assert producers[_actuals_id(scenario)] == {
        (scenario.events[0]["job"]["namespace"], asset_job_name(ACTUALS.to_user_string()))
    }
    # Every Dagster run is a run of the one Dagster job, its own job a tag.
    parents = [e for e in events if e["job"]["name"] == DAGSTER_JOB]
    assert {e["run"]["runId"] for e in parents} == set(scenario.runs.values())
    tags = {
        e["run"]["runId"]: {t["key"]: t["value"] for t in e["run"]["facets"]["tags"]["tags"]}
        for e in parents
    }
    assert tags[scenario.runs["schedule"]]["dagster/job"] == TAXI_JOB
    assert tags[scenario.runs["ui"]]["dagster/job"] == "__ASSET_JOB"
    backfill = tags[scenario.runs["backfill"]]
    assert {k: backfill[k] for k in BACKFILL_TAGS} == BACKFILL_TAGS
    assert tags[scenario.runs["checks"]]["dagster/partition"] == JAN


def test_each_asset_run_names_the_dagster_run_that_caused_it(scenario):
    events = scenario.events
    assert check_parents(events) == set(scenario.runs.values())
    assert catalog_rules.unfinished_runs(events) == []
    assert catalog_rules.unfinished_parents(events) == []
    caused: dict[str, set[str]] = {}
    for event in events:
        parent = event["run"]["facets"].get("parent")
        if parent is not None:
            caused.setdefault(parent["run"]["runId"], set()).add(event["job"]["name"])
    actuals = asset_job_name(ACTUALS.to_user_string())
    checks_job = checks_job_name(ACTUALS.to_user_string())
    assert caused[scenario.runs["schedule"]] == {
        asset_job_name(k.to_user_string()) for k in TAXI
    } | {checks_job}
    assert caused[scenario.runs["backfill"]] == {actuals, checks_job}
    assert caused[scenario.runs["checks"]] == {checks_job}


def test_the_other_catalog_rules_hold(scenario):
    events = scenario.events

    def landed(dataset: dict[str, Any]) -> bool:
        links = dataset.get("facets", {}).get("symlinks", {}).get("identifiers", [])
        return any(link["name"].startswith("source-data/") for link in links)

    assert catalog_rules.inputs_without_producer(events, landed) == []
    assert catalog_rules.dropped_column_edges(events) == []
    assert catalog_rules.start_complete_differences(events) == []
    assert catalog_rules.misplaced_quality_facets(events) == []


# ------------------------------------------------------------------------------- checks


def test_every_check_verdict_is_one_assertion_on_its_dataset_and_partition(scenario):
    found = catalog_rules.assertions(scenario.events)
    assert {item["eventType"] for item in found} == {"COMPLETE"}
    made = Counter(
        (item["parent_run"], item["assertion"], item["success"], tuple(item["partitions"]))
        for item in found
    )
    assert set(made.values()) == {1}, made
    expected = Counter()
    for label, run_id in scenario.runs.items():
        partition = {"schedule": JAN, "ui": FEB, "checks": JAN}.get(label)
        for evaluation in _evaluations(scenario.instance, run_id):
            # A partition's check names it; a check of the whole asset judged the run's
            # partition when the run had one, else (the backfill's range) the whole asset.
            expected[
                (
                    run_id,
                    evaluation.check_name,
                    evaluation.passed,
                    (partition,) if partition else (),
                )
            ] += 1
    assert made == expected
    assert {item["dataset"] for item in found} == {_actuals_id(scenario)}
    by_name = {item["assertion"]: item for item in found}
    assert by_name["rides_not_negative"]["column"] == "rides"
    assert by_name["enough_zones"]["column"] == "zone"
    assert "column" not in by_name["month_has_rides"]
    assert {item["severity"] for item in found if item["assertion"] == "enough_zones"} == {"warn"}
    assert {item["severity"] for item in found if item["assertion"] != "enough_zones"} == {"error"}
    assert by_name["enough_zones"]["description"] == f"{SMALL.zones} zones"
    assert by_name["month_has_rides"]["description"] == "The month has rides."


def test_the_checks_run_reads_the_version_it_judged(scenario):
    ws = scenario.ws
    completes = [
        e
        for e in scenario.events
        if e["job"]["name"] == checks_job_name(ACTUALS.to_user_string())
        and e["eventType"] == "COMPLETE"
    ]
    assert len(completes) == 4  # January and February, the backfill's whole asset, January
    backfill = next(
        e
        for e in completes
        if e["run"]["facets"]["parent"]["run"]["runId"] == scenario.runs["backfill"]
    )
    [judged] = backfill["inputs"]
    assert "subset" not in judged.get("inputFacets", {})
    alone = next(
        e
        for e in completes
        if e["run"]["facets"]["parent"]["run"]["runId"] == scenario.runs["checks"]
    )
    [judged] = alone["inputs"]
    # The January the backfill wrote, which the check run on its own judged.
    january = ws.store.get(f"{ACTUALS_REF}/{SUBPATHS[JAN]}")
    assert january.record["step"]["run_id"] == scenario.runs["backfill"]
    assert judged["facets"]["version"]["datasetVersion"] == january.version
    assert judged["inputFacets"]["subset"]["inputCondition"]["partitions"] == [
        {"identifier": JAN, "dimensions": {"partition": JAN}}
    ]
    assert alone["job"]["facets"]["jobType"]["jobType"] == "ASSET_CHECK"


def test_verdicts_on_a_partition_join_that_partitions_record(scenario):
    runs, after = scenario.runs, scenario.verdicts
    names = {"rides_not_negative", "enough_zones", "month_has_rides"}
    # Each month's run: its three verdicts join the month's record.
    for label, month in (("schedule", JAN), ("ui", FEB)):
        joined = after[label][month]
        assert set(joined) == names, label
        assert {v["run_id"] for v in joined.values()} == {runs[label]}
        assert joined["enough_zones"]["passed"] is False
        assert joined["enough_zones"]["severity"] == "WARN"
        assert joined["month_has_rides"]["passed"] is True
    # The backfill rewrote both months: new records, and its check judged the whole asset,
    # which no record holds.
    assert after["backfill"] == {JAN: {}, FEB: {}}
    # The check run on its own judged January as the backfill wrote it.
    assert after["checks"][JAN] == {
        "month_has_rides": {
            **after["checks"][JAN]["month_has_rides"],
            "passed": True,
            "run_id": runs["checks"],
        }
    }
    assert after["checks"][FEB] == {}


# ------------------------------------------------------------------------ described data


def test_every_asset_dataset_is_described(scenario):
    events = scenario.events
    assert catalog_rules.undescribed_outputs(events) == []
    assert catalog_rules.erased_descriptions(events) == []
    completes = [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == asset_job_name("yellow_taxi_raw")
    ]
    assert completes
    for event in completes:
        [output] = event["outputs"]
        facets = output["facets"]
        assert facets["ownership"]["owners"] == [{"name": "data-engineering", "type": "team"}]
        assert facets["documentation"]["description"].startswith(
            "The raw trip table's months: the staged months upserted"
        )
        assert facets["documentation"]["contentType"] == "text/markdown"
        assert sorted((t["key"], t["value"]) for t in facets["tags"]["tags"]) == [
            ("dagster/kind", "parquet"),
            ("dagster/kind", "spark"),
        ]
