"""How a lineage catalog (Marquez 0.51, its `marquez/db` code) folds OpenLineage events into a
graph, as plain functions over events, so tests can require the graph to come out right.

Marquez's rules, as issues 18 and 34 state them:
- a job whose run names a parent (`parent` run facet) is named `<parent job>.<job>`, unless
  its name already starts with `<parent job>.`; the parent job is the job Marquez already
  holds the parent run under when that job has the facet's name, else the facet's job (a
  parent job named as its child is cut at its last dot). Jobs are one per (namespace, full
  name) (`OpenLineageDao.buildJobFromEvent`, `R__Jobs_view_and_rewrite_function.sql`);
- a job's *current version* is made of the inputs and outputs of its LAST COMPLETE event;
- a dataset is linked to its producer only through the outputs of the producing job's current
  version (an older run's outputs are not edges any more);
- a run named only in a child's `parent` facet is created as running, and stays so until an
  event of its own ends it;
- a column-lineage edge is kept only when its output field is in the output's schema facet
  and its input field in the schema facet of an input with the same (namespace, name);
- `dataQualityAssertions` and `dataQualityMetrics` are input facets (`DatasetFacetsDao`):
  a dataset's verdicts are read from the inputs of the runs that checked it;
- a dataset's description is the `documentation` facet of the last event naming it, as an
  input or an output (`OpenLineageDao.upsertLineageDataset`, `DatasetDao.upsert`): an event
  without one erases it.

Each function returns the list of problems (empty when the rule holds), so a failing test
says every broken edge at once. Events are the JSON dicts transports send, in emission order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Event = Mapping[str, Any]
DatasetId = tuple[str, str]
TERMINAL = frozenset({"COMPLETE", "FAIL", "ABORT"})


def dataset_id(dataset: Mapping[str, Any]) -> DatasetId:
    return dataset["namespace"], dataset["name"]


def job_id(event: Event) -> tuple[str, str]:
    return event["job"]["namespace"], event["job"]["name"]


def _parent_job_name(name: str) -> str:
    """Marquez's `Utils.parseParentJobName`: a name up to its last dot."""
    return name[: name.rindex(".")] if "." in name else name


def marquez_job_ids(events: Iterable[Event]) -> list[tuple[str, str]]:
    """The (namespace, full name) of the job Marquez files each event under, in order."""
    run_jobs: dict[str, tuple[str, str]] = {}
    found = []
    for event in events:
        namespace, name = job_id(event)
        parent = (event.get("run", {}).get("facets") or {}).get("parent")
        full = name
        if parent is not None:
            facet_job = parent["job"]["name"]
            if facet_job == name:
                facet_job = _parent_job_name(facet_job)
            known = run_jobs.get(parent["run"]["runId"])
            wanted = (parent["job"]["namespace"], facet_job)
            parent_name = known[1] if known == wanted else facet_job
            run_jobs.setdefault(parent["run"]["runId"], wanted)
            if not name.startswith(parent_name + "."):
                full = f"{parent_name}.{name}"
        run_jobs.setdefault(event["run"]["runId"], (namespace, full))
        found.append((namespace, full))
    return found


def renamed_jobs(events: list[Event]) -> list[str]:
    """Jobs Marquez files under another name than the event gives: a catalog and the events
    (and every other catalog) would not agree on the job's name."""
    return list(
        dict.fromkeys(
            f"job {job_id(event)} is {marquez} in Marquez"
            for event, marquez in zip(events, marquez_job_ids(events), strict=True)
            if job_id(event) != marquez
        )
    )


def current_versions(
    events: Iterable[Event],
) -> dict[tuple[str, str], tuple[set[DatasetId], set[DatasetId]]]:
    """Each job's current version (jobs as Marquez names them): (inputs, outputs) of its last
    COMPLETE event."""
    events = list(events)
    versions: dict[tuple[str, str], tuple[set[DatasetId], set[DatasetId]]] = {}
    for event, job in zip(events, marquez_job_ids(events), strict=True):
        if event["eventType"] == "COMPLETE":
            versions[job] = (
                {dataset_id(d) for d in event.get("inputs", ())},
                {dataset_id(d) for d in event.get("outputs", ())},
            )
    return versions


def producers(events: Iterable[Event]) -> dict[DatasetId, set[tuple[str, str]]]:
    """The graph's dataset → producing jobs edges: outputs of the jobs' current versions."""
    found: dict[DatasetId, set[tuple[str, str]]] = {}
    for job, (_inputs, outputs) in current_versions(events).items():
        for dataset in outputs:
            found.setdefault(dataset, set()).add(job)
    return found


def producing_jobs(events: Iterable[Event]) -> dict[DatasetId, set[tuple[str, str]]]:
    """Every job (as Marquez names it) that ever completed a run writing each dataset."""
    events = list(events)
    found: dict[DatasetId, set[tuple[str, str]]] = {}
    for event, job in zip(events, marquez_job_ids(events), strict=True):
        if event["eventType"] == "COMPLETE":
            for dataset in event.get("outputs", ()):
                found.setdefault(dataset_id(dataset), set()).add(job)
    return found


def datasets_with_several_producers(events: Iterable[Event]) -> list[str]:
    """Datasets written by more than one job: each such job links the dataset to its producer
    only through its own latest version, so the catalog splits one asset's history."""
    return [
        f"dataset {dataset} is written by {len(jobs)} jobs: {sorted(jobs)}"
        for dataset, jobs in producing_jobs(events).items()
        if len(jobs) > 1
    ]


def inputs_without_producer(
    events: list[Event], is_landed: Callable[[Mapping[str, Any]], bool]
) -> list[str]:
    """Datasets read by a completed run (other than landed sources) that no job's current
    version produces: dead ends upstream in the catalog's graph."""
    produced = producers(events)
    problems = []
    for event in events:
        if event["eventType"] != "COMPLETE":
            continue
        for dataset in event.get("inputs", ()):
            if is_landed(dataset) or dataset_id(dataset) in produced:
                continue
            problems.append(
                f"job {event['job']['name']} (run {event['run']['runId']}) reads "
                f"{dataset_id(dataset)}, which no job's current version produces"
            )
    return list(dict.fromkeys(problems))


def unfinished_runs(events: list[Event]) -> list[str]:
    """Runs with events but no terminal event (COMPLETE, FAIL or ABORT)."""
    seen: dict[str, str] = {}
    for event in events:
        run_id = event["run"]["runId"]
        if seen.get(run_id) not in TERMINAL:
            seen[run_id] = event["eventType"]
    return [
        f"run {run_id} ends with {kind}, not COMPLETE, FAIL or ABORT"
        for run_id, kind in seen.items()
        if kind not in TERMINAL
    ]


def parent_run_ids(events: Iterable[Event]) -> set[str]:
    """Run ids named in `parent` facets (the Dagster runs, for asset runs)."""
    return {
        event["run"]["facets"]["parent"]["run"]["runId"]
        for event in events
        if "parent" in event["run"].get("facets", {})
    }


def unfinished_parents(events: list[Event]) -> list[str]:
    """Parents a catalog would show as running forever: a run id named in a parent facet
    needs a START and a terminal event of its own."""
    own: dict[str, set[str]] = {}
    for event in events:
        own.setdefault(event["run"]["runId"], set()).add(event["eventType"])
    problems = []
    for run_id in sorted(parent_run_ids(events)):
        kinds = own.get(run_id, set())
        if "START" not in kinds:
            problems.append(f"parent run {run_id} has no START event of its own")
        if not kinds & TERMINAL:
            problems.append(f"parent run {run_id} has no COMPLETE, FAIL or ABORT event")
    return problems


def _schema_fields(dataset: Mapping[str, Any]) -> set[str]:
    schema = dataset.get("facets", {}).get("schema") or {}
    return {field["name"] for field in schema.get("fields", ())}


def dropped_column_edges(events: Iterable[Event]) -> list[str]:
    """Column-lineage edges a catalog drops: an output field missing from the output's schema
    facet, or an input field missing from the schema facet of every input of that identity."""
    problems = []
    for event in events:
        inputs: dict[DatasetId, set[str]] = {}
        for dataset in event.get("inputs", ()):
            inputs.setdefault(dataset_id(dataset), set()).update(_schema_fields(dataset))
        for output in event.get("outputs", ()):
            lineage = output.get("facets", {}).get("columnLineage")
            if not lineage:
                continue
            where = f"job {event['job']['name']}, output {dataset_id(output)}"
            own = _schema_fields(output)
            for column, edge in lineage.get("fields", {}).items():
                if column not in own:
                    problems.append(f"{where}: column {column!r} is not in its schema facet")
                for source in edge.get("inputFields", ()):
                    problems.extend(_source_problem(source, inputs, f"{where}, {column!r}"))
            for source in lineage.get("dataset", ()):
                problems.extend(_source_problem(source, inputs, f"{where}, dataset"))
    return problems


def _source_problem(
    source: Mapping[str, Any], inputs: Mapping[DatasetId, set[str]], where: str
) -> list[str]:
    identity = dataset_id(source)
    if identity not in inputs:
        return [f"{where}: input field {source['field']!r} names {identity}, not an input"]
    if source["field"] not in inputs[identity]:
        return [
            f"{where}: input field {source['field']!r} is not in the schema facet of "
            f"input {identity}"
        ]
    return []


def _announced_dependencies(event: Event) -> set[tuple[str, str]]:
    """The jobs a run's `jobDependencies` facet names as upstream."""
    facet = event.get("run", {}).get("facets", {}).get("jobDependencies", {})
    return {(item["job"]["namespace"], item["job"]["name"]) for item in facet.get("upstream", ())}


def start_complete_differences(events: Iterable[Event]) -> list[str]:
    """Runs whose COMPLETE names datasets its START did not announce, or whose START names
    datasets its COMPLETE does not (by identity).

    Outputs must be equal. Inputs: everything the START names must be read; the COMPLETE may
    name beyond it only data of an upstream job the START announced in `jobDependencies` (an
    asset's `deps=` read by path when the run's config chooses to: the START knows the
    dependency, not yet whether its data is read). Anything else is a dataset the catalog
    would see appear from nowhere, or a phantom the START promised."""
    events = list(events)
    written_by: dict[DatasetId, set[tuple[str, str]]] = {}
    for event in events:
        for dataset in event.get("outputs", ()):
            written_by.setdefault(dataset_id(dataset), set()).add(job_id(event))
    starts: dict[str, Event] = {}
    problems = []
    for event in events:
        run_id = event["run"]["runId"]
        if event["eventType"] == "START":
            starts[run_id] = event
            continue
        if event["eventType"] != "COMPLETE" or run_id not in starts:
            continue
        start = starts[run_id]
        where = f"job {event['job']['name']} (run {run_id})"
        for side in ("inputs", "outputs"):
            planned = {dataset_id(d) for d in start.get(side, ())}
            done = {dataset_id(d) for d in event.get(side, ())}
            if side == "inputs":
                announced = _announced_dependencies(start)
                done -= {d for d in done - planned if written_by.get(d, set()) & announced}
            if planned != done:
                problems.append(
                    f"{where}: START {side} {sorted(planned)} but COMPLETE {side} {sorted(done)}"
                )
    return problems


#: the facets that describe a dataset in a catalog (what people search datasets by)
DESCRIBING_FACETS = ("documentation", "ownership", "tags")


def undescribed_outputs(
    events: Iterable[Event], facets: Iterable[str] = DESCRIBING_FACETS
) -> list[str]:
    """Outputs of completed runs without one of `facets` among their dataset facets."""
    wanted = tuple(facets)
    problems = []
    for event in events:
        if event["eventType"] != "COMPLETE":
            continue
        for output in event.get("outputs", ()):
            missing = [name for name in wanted if name not in (output.get("facets") or {})]
            if missing:
                problems.append(
                    f"job {event['job']['name']}: output {dataset_id(output)} has no "
                    f"{', '.join(missing)} facet"
                )
    return list(dict.fromkeys(problems))


def erased_descriptions(events: Iterable[Event]) -> list[str]:
    """Events that name a dataset described before without its description: Marquez erases
    the description there, until an event describes the dataset again."""
    described: set[DatasetId] = set()
    problems = []
    for event in events:
        for side in ("inputs", "outputs"):
            for dataset in event.get(side, ()):
                identity = dataset_id(dataset)
                documentation = (dataset.get("facets") or {}).get("documentation") or {}
                if documentation.get("description"):
                    described.add(identity)
                elif identity in described:
                    problems.append(
                        f"job {event['job']['name']} ({event['eventType']}) names {identity} "
                        "without its description"
                    )
    return list(dict.fromkeys(problems))


#: input facets a dataset facet or output facet would hide from Marquez's quality views
_INPUT_ONLY = ("dataQualityAssertions", "dataQualityMetrics")


def misplaced_quality_facets(events: Iterable[Event]) -> list[str]:
    """Data-quality facets anywhere but among an input's `inputFacets`."""
    problems = []
    for event in events:
        for side, own in (("inputs", "facets"), ("outputs", "facets"), ("outputs", "outputFacets")):
            for dataset in event.get(side, ()):
                for name in _INPUT_ONLY:
                    if name in (dataset.get(own) or {}):
                        problems.append(
                            f"job {event['job']['name']}: {name} in the {own} of "
                            f"{side[:-1]} {dataset_id(dataset)}"
                        )
    return problems


def assertions(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Every assertion of the events, with where it was made: `dataset` (namespace, name),
    `partitions` (the identifiers of the input's subset facet; empty: the whole dataset),
    `run` and `parent_run` (the run ids of the checks run and of its parent)."""
    found = []
    for event in events:
        parent = (event["run"].get("facets") or {}).get("parent") or {}
        for dataset in event.get("inputs", ()):
            input_facets = dataset.get("inputFacets") or {}
            facet = input_facets.get("dataQualityAssertions")
            if not facet:
                continue
            subset = input_facets.get("subset") or {}
            partitions = [
                item["identifier"]
                for item in (subset.get("inputCondition") or {}).get("partitions", ())
            ]
            for item in facet["assertions"]:
                found.append(
                    {
                        **item,
                        "dataset": dataset_id(dataset),
                        "partitions": partitions,
                        "run": event["run"]["runId"],
                        "parent_run": (parent.get("run") or {}).get("runId"),
                        "eventType": event["eventType"],
                    }
                )
    return found
