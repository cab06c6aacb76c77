"""The OpenLineage events a Dagster event implies, as the `ol.model` objects the outbox renders.

Each asset of a Dagster run is an OpenLineage run of its own (START when planned, COMPLETE when
materialized, FAIL or ABORT when its Dagster run ended without it), nested in the Dagster run's
own OpenLineage run, whose START comes before its assets' events and whose end after theirs.
The checks a Dagster run evaluated on an asset (a partition of it, or all of it) are one more
run, of the asset's checks job, reading the asset's dataset: its COMPLETE carries the verdicts.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

from dagster import AssetKey, DagsterEventType

from dws_dagster.ol.model import AssetRunEvent, DatasetInfo, OutputInfo, RunInfo
from dws_dagster.ol.run_events import DagsterRunEvent
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.sensor.catalog_events.datasets import EventDatasets, input_schemas
from dws_dagster.sensor.catalog_events.facts import (
    assertion,
    checks_job_info,
    dagster_version,
    job_info,
    kept_dependencies,
    run_info,
)
from dws_dagster.sensor.check_verdicts import CheckVerdict
from dws_dagster.sensor.run_lookup import RunLookup
from dws_dagster.sensor.stored_events import AssetEventRecord
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.refs import ResourceRef

#: The OpenLineage event type of a Dagster run's end.
_RUN_END_STATES: dict[DagsterEventType, Literal["COMPLETE", "FAIL", "ABORT"]] = {
    DagsterEventType.RUN_SUCCESS: "COMPLETE",
    DagsterEventType.RUN_FAILURE: "FAIL",
    DagsterEventType.RUN_CANCELED: "ABORT",
}


class OpenLineageEvents:
    """Collects the OpenLineage events of the events one tick applies, in the order they are
    spooled.

    What every event of a run or asset repeats (its run and job facts, the location of each
    ref, the `deps=` assets its inputs leave) is looked up once per tick (the workspace cannot
    change within one), through `functools.cache` of functions holding the tick's workspace and
    catalog but not this object: the caches go with it by reference counting, not whenever the
    cycle collector finds them (the tick keeps the collector off its older objects)."""

    def __init__(
        self,
        ws: Workspace,
        catalog: AssetCatalog,
        runs: RunLookup,
        *,
        namespace: str,
        parse_ref: Callable[[str], ResourceRef],
        skip: Callable[[str], None],
    ) -> None:
        self.ws = ws
        self.catalog = catalog
        self.runs = runs
        self.namespace = namespace
        self._parse_ref = parse_ref
        #: the OpenLineage events of the batch, in the order they are spooled
        self.events: list[AssetRunEvent | DagsterRunEvent] = []
        #: Dagster runs whose own START these events have put before their assets' events
        self._parents_started: set[str] = set()
        #: the datasets of the events (locations and what describes each asset, once a tick)
        self.datasets = EventDatasets(ws, catalog, parse_ref)
        self._run_info = functools.cache(functools.partial(run_info, catalog, runs, skip))
        self._job_info = functools.cache(functools.partial(job_info, catalog, namespace))
        self._checks_job_info = functools.cache(
            functools.partial(checks_job_info, catalog, namespace)
        )
        self._kept_dependencies = functools.cache(functools.partial(kept_dependencies, catalog))

    def locate(self, ref: ResourceRef | str) -> str:
        """`Workspace.location`, once per ref and tick."""
        return self.datasets.locate(ref)

    def run_info(self, run_id: str, key: AssetKey, partition: str | None) -> RunInfo | None:
        """The run facts of one asset's run, shared by its START and end events (None: the
        Dagster run is not in the instance, which is reported as a skipped event)."""
        return self._run_info(run_id, key, partition)

    # ------------------------------------------------------------------ assets' events

    def planned(self, event: AssetEventRecord, when: dt.datetime) -> None:
        """The START of each planned partition, with the inputs the definitions declare (or
        the asset read last time) and its output, or neither: never output-only."""
        key = event.asset_key
        for partition in event.partitions:
            run = self.run_info(event.run_id, key, partition)
            if run is None:
                continue
            output = self.catalog.ref_written_by(key, partition)
            inputs: tuple[DatasetInfo, ...] = ()
            outputs: tuple[OutputInfo, ...] = ()
            if output is not None:
                expected = self.catalog.input_refs(key, partition) or self._last_inputs(output)
                if expected:
                    inputs = self.datasets.inputs([(ref, None) for ref in expected])
                    root = self.catalog.partitioned_root(key) if partition is not None else None
                    outputs = (
                        OutputInfo(
                            dataset=self.datasets.written(
                                output, root, partition, about=self.datasets.about(key)
                            )
                        ),
                    )
            self._child_event(
                AssetRunEvent(
                    kind="START",
                    event_time=when,
                    job=self._job_info(key),
                    run=self._without_data_deps(run, inputs),
                    inputs=inputs,
                    outputs=outputs,
                )
            )

    def materialized(
        self,
        run: RunInfo,
        event: AssetEventRecord,
        when: dt.datetime,
        record: LineageRecord | None,
    ) -> None:
        """The COMPLETE of a materialization: with what it read and wrote when it is a
        workspace asset's (`record`), else bare (its run still completes)."""
        key = event.asset_key
        if record is None:
            self._child_event(
                AssetRunEvent(kind="COMPLETE", event_time=when, job=self._job_info(key), run=run)
            )
            return
        metadata = event.metadata
        inputs = self.datasets.inputs(record.inputs, input_schemas(metadata))
        self._child_event(
            AssetRunEvent(
                kind="COMPLETE",
                event_time=when,
                job=self._job_info(key),
                run=self._without_data_deps(run, inputs),
                inputs=inputs,
                outputs=(
                    self.datasets.output(
                        self._parse_ref(record.ref),
                        record.version,
                        metadata,
                        key,
                        event.partition,
                        metrics=tuple((record.metrics or {}).items()),
                    ),
                ),
            )
        )

    def checked(
        self, run_id: str, key: AssetKey, partition: str | None, verdicts: Sequence[CheckVerdict]
    ) -> bool:
        """The run of an asset's checks in one Dagster run, for one partition or the whole
        asset: a START, then a COMPLETE whose input (the asset's dataset, the partition in its
        subset facet) carries each check's last verdict as an assertion. False when nothing
        was emitted: no verdict, a Dagster run not in the instance, or an asset that is not a
        workspace asset (no dataset to judge)."""
        if not verdicts:
            return False
        ref = self.catalog.ref_written_by(key, partition)
        run = self.run_info(run_id, key, partition)
        if ref is None or run is None:
            return False
        root = self.catalog.partitioned_root(key) if partition is not None else None
        dataset = self.datasets.written(
            ref,
            root,
            partition,
            self._checked_version(ref, verdicts),
            about=self.datasets.about(key),
        )
        last = {verdict.name: verdict for verdict in verdicts}  # a check run twice: its last
        job = self._checks_job_info(key)
        run = replace(run, dependencies=())
        self._child_event(
            AssetRunEvent(
                kind="START",
                event_time=min(v.at for v in verdicts),
                job=job,
                run=run,
                inputs=(dataset,),
            )
        )
        judged = replace(dataset, assertions=tuple(assertion(v) for v in last.values()))
        self._child_event(
            AssetRunEvent(
                kind="COMPLETE",
                event_time=max(v.at for v in verdicts),
                job=job,
                run=run,
                inputs=(judged,),
            )
        )
        return True

    def _checked_version(self, ref: ResourceRef, verdicts: Sequence[CheckVerdict]) -> str | None:
        """The version the checks judged: the ref's current one when a check's target was the
        materialization that wrote it; else unknown (a later run may have rewritten it)."""
        state = self.ws.store.get(ref)
        record = state.record if state is not None else None
        written_by = ((record or {}).get("step") or {}).get("run_id")
        if state is None or written_by is None:
            return None
        return state.version if any(v.target_run_id == written_by for v in verdicts) else None

    def not_materialized(
        self,
        run_id: str,
        key: AssetKey,
        partition: str | None,
        when: dt.datetime,
        *,
        failed: bool,
        message: str,
        stack: str | None,
    ) -> None:
        """The FAIL (with its error) or ABORT of an asset its ended run did not materialize."""
        run = self.run_info(run_id, key, partition)
        if run is None:
            return
        self._child_event(
            AssetRunEvent(
                kind="FAIL" if failed else "ABORT",
                event_time=when,
                job=self._job_info(key),
                run=run,
                error_message=message if failed else None,
                stack_trace=stack if failed else None,
            )
        )

    def _last_inputs(self, output: ResourceRef) -> list[str]:
        """What the asset read last time, for assets whose inputs only the Spark plan shows
        (data read by path): the best forecast of this run's inputs."""
        state = self.ws.store.get(output)
        record = state.record if state is not None else None
        return [item["ref"] for item in (record or {}).get("inputs", ())]

    # ------------------------------------------------------------------ the Dagster run

    def _child_event(self, event: AssetRunEvent) -> None:
        """An asset run's event, after its Dagster run's START. The START is put before the
        first asset event of the run each tick meets: a tick that meets the run midway
        repeats it, and the outbox, keyed by (runId, eventType), keeps the first."""
        self._parent_started_before(event.run.dagster_run_id)
        self.events.append(event)

    def _parent_started_before(self, run_id: str) -> None:
        if run_id in self._parents_started:
            return
        self._parents_started.add(run_id)
        facts = self.runs.facts(run_id)
        if facts is not None:
            # A run seen before it started (queued) is dated by its creation.
            self.events.append(
                DagsterRunEvent(
                    kind="START",
                    event_time=facts.started or facts.created,
                    namespace=self.namespace,
                    dagster_run_id=run_id,
                    dagster_job=facts.job,
                    dagster_version=dagster_version(),
                    tags=facts.launch_tags,
                )
            )

    def run_ended(
        self, run_id: str, kind: DagsterEventType, error: str | None, when: dt.datetime
    ) -> None:
        """The Dagster run's own end, after its assets' ends; dated by the run's end event,
        whose time Dagster stores as the run's end time."""
        facts = self.runs.facts(run_id)
        if facts is None:
            return
        self._parent_started_before(run_id)
        state = _RUN_END_STATES[kind]
        self.events.append(
            DagsterRunEvent(
                kind=state,
                event_time=when,
                namespace=self.namespace,
                dagster_run_id=run_id,
                dagster_job=facts.job,
                dagster_version=dagster_version(),
                error_message=(error or f"run {run_id} failed") if state == "FAIL" else None,
                tags=facts.launch_tags,
            )
        )

    def _without_data_deps(self, run: RunInfo, inputs: tuple[DatasetInfo, ...]) -> RunInfo:
        """`jobDependencies` name the assets the run depends on without reading their data:
        a `deps=` asset whose data the run did read (by path) is an input, not a dependency."""
        if not run.dependencies or not inputs:
            return run
        read = tuple(info.ref for info in inputs if info.ref)
        kept = self._kept_dependencies(run.dependencies, read)
        return run if len(kept) == len(run.dependencies) else replace(run, dependencies=kept)
