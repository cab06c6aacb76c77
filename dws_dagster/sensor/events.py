"""One Dagster event → the workspace's lineage and the OpenLineage events it implies.

Every handler is idempotent: the store skips what it already holds (`LineageStore.apply`,
`apply_failure`, `observe`) and the outbox skips events it already spooled (keyed by run id and
event type), so a tick that crashes before saving its cursor may simply run again.

Open-source Dagster stores no asset-failure events, so failures are inferred when a run ends:
assets planned by the run that it did not materialize failed (run failure) or were aborted
(run cancelled, or skipped by a successful run).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from dagster import AssetKey, DagsterEventType, TableSchema

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.assets.materialization import (
    META_COLUMN_LINEAGE,
    META_INPUT_SCHEMAS,
    META_REF_ROOT,
    STEP_KIND,
    metrics_from_metadata,
    record_from_metadata,
)
from dws_dagster.errors import DwsError, SnapshotError, WorkspaceConfigError
from dws_dagster.ol.model import (
    AssetRunEvent,
    DatasetInfo,
    JobInfo,
    OutputInfo,
    PartitionInfo,
    RunInfo,
)
from dws_dagster.ol.run_events import DagsterRunEvent
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.sensor.stored_events import AssetEventRecord
from dws_dagster.workspace import shapes
from dws_dagster.workspace.files import atomic_write_bytes, pretty_json
from dws_dagster.workspace.records import LineageRecord, StepInfo, sanitize_parameters
from dws_dagster.workspace.redaction import get_logger, redact_text, secret_values
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.snapshots.history import list_snapshots
from dws_dagster.workspace.snapshots.results_metrics import RESULTS_FILE
from dws_dagster.workspace.snapshots.snapshots import take_snapshot
from dws_dagster.workspace.versions import MARKER_NAME
from dws_dagster.workspace.workspace import Workspace

log = get_logger("dws_dagster.sensor")

RUN_END_TYPES = (
    DagsterEventType.RUN_SUCCESS,
    DagsterEventType.RUN_FAILURE,
    DagsterEventType.RUN_CANCELED,
)
EVENT_TYPES = (
    DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    DagsterEventType.ASSET_MATERIALIZATION,
    DagsterEventType.ASSET_OBSERVATION,
    *RUN_END_TYPES,
)


#: The OpenLineage event type of a Dagster run's end.
_RUN_END_STATES: dict[DagsterEventType, Literal["COMPLETE", "FAIL", "ABORT"]] = {
    DagsterEventType.RUN_SUCCESS: "COMPLETE",
    DagsterEventType.RUN_FAILURE: "FAIL",
    DagsterEventType.RUN_CANCELED: "ABORT",
}


@dataclass
class ApplyReport:
    """What a batch of events did."""

    events: int = 0
    #: materializations of workspace assets read (each a lineage record)
    materializations: int = 0
    #: lineage records new to the store (the IO manager commits most before the sensor reads
    #: them; the sensor adds results' metrics and what a crashed step did not commit)
    records: int = 0
    failures: int = 0
    observations: int = 0
    checks: int = 0
    results_files: int = 0
    snapshots: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _RunFacts:
    run_id: str
    job: str
    created: dt.datetime
    description: str
    #: when the run started; None when it had not yet when its record was read
    started: dt.datetime | None = None


class EventApplier:
    """Applies Dagster event records to a workspace; collects the OpenLineage events."""

    def __init__(
        self,
        instance: Any,
        ws: Workspace,
        catalog: AssetCatalog,
        *,
        namespace: str,
        snapshot_on_results: bool = False,
        read_after: int | None = None,
    ) -> None:
        self.instance = instance
        #: the storage id after which this tick reads every event it applies (None: unknown)
        self.read_after = read_after
        self.ws = ws
        self.catalog = catalog
        self.namespace = namespace
        self.snapshot_on_results = snapshot_on_results
        self.report = ApplyReport()
        #: the OpenLineage events of the batch, in the order they are spooled
        self.ol_events: list[AssetRunEvent | DagsterRunEvent] = []
        #: Dagster runs whose own START this applier has put before their assets' events
        self._parents_started: set[str] = set()
        self._runs: dict[str, _RunFacts | None] = {}
        self._locations: dict[str, str] = {}
        self._run_infos: dict[tuple[str, AssetKey, str | None], RunInfo | None] = {}
        self._job_infos: dict[AssetKey, JobInfo] = {}
        #: Refs as parsed, and the dependencies kept for (dependencies, refs read): every
        #: event of a run names the same few, and parsing validates each part again.
        self._refs: dict[str, ResourceRef] = {}
        self._kept_deps: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, ...]] = {}
        #: Planned and materialization events this tick read, by run, until the run ends.
        self._streamed: dict[str, _RunLog] = {}

    # ------------------------------------------------------------------ dispatch

    def apply(self, record: Any) -> None:
        """Apply one record: an `AssetEventRecord`, or Dagster's record of a run's end (or of
        an asset event, read as an `AssetEventRecord`)."""
        if not isinstance(record, AssetEventRecord):
            entry = record.event_log_entry
            event = entry.dagster_event
            if event is not None and event.event_type in RUN_END_TYPES:
                self.report.events += 1
                when = dt.datetime.fromtimestamp(entry.timestamp, dt.UTC)
                self._run_ended(entry.run_id, event.event_type, event, when)
                return
            record = AssetEventRecord.from_entry(record.storage_id, entry)
            if record is None:  # no Dagster event, or not one the sensor applies
                return
        self.report.events += 1
        when = dt.datetime.fromtimestamp(record.timestamp, dt.UTC)
        if record.kind == DagsterEventType.ASSET_MATERIALIZATION_PLANNED:
            self._streamed.setdefault(record.run_id, _RunLog()).add_asset_event(record)
            self._planned(record, when)
        elif record.kind == DagsterEventType.ASSET_MATERIALIZATION:
            self._streamed.setdefault(record.run_id, _RunLog()).add_asset_event(record)
            self._materialized(record, when)
        else:
            self._observed(record)

    # ------------------------------------------------------------------ planned

    def _planned(self, event: AssetEventRecord, when: dt.datetime) -> None:
        key = event.asset_key
        for partition in event.partitions:
            run = self._run_info(event.run_id, key, partition)
            if run is None:
                continue
            output = self.catalog.ref_written_by(key, partition)
            inputs: tuple[DatasetInfo, ...] = ()
            outputs: tuple[OutputInfo, ...] = ()
            if output is not None:
                expected = self.catalog.input_refs(key, partition) or self._last_inputs(output)
                if expected:  # inputs and outputs both, or neither: never output-only
                    inputs = self._inputs([(ref, None) for ref in expected])
                    root = self.catalog.partitioned_root(key) if partition is not None else None
                    outputs = (OutputInfo(dataset=self._written(output, root, partition)),)
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

    def _last_inputs(self, output: ResourceRef) -> list[str]:
        """What the asset read last time, for assets whose inputs only the Spark plan shows
        (data read by path): the best forecast of this run's inputs."""
        state = self.ws.store.get(output)
        record = state.record if state is not None else None
        return [item["ref"] for item in (record or {}).get("inputs", ())]

    # ------------------------------------------------------------------ materialized

    def _materialized(self, event: AssetEventRecord, when: dt.datetime) -> None:
        run_id, key, partition = event.run_id, event.asset_key, event.partition
        metadata = event.metadata
        asset = key.to_user_string()
        record = record_from_metadata(metadata, asset=asset, run_id=run_id, partition=partition)
        run = self._run_info(run_id, key, partition)
        if record is None:  # not a workspace asset: its run still completes
            if run is not None:
                self._child_event(
                    AssetRunEvent(
                        kind="COMPLETE", event_time=when, job=self._job_info(key), run=run
                    )
                )
            return
        ref = self._ref(record.ref)
        if self._is_results(ref):
            record = self._with_results(record, metadata)
        try:
            if self.ws.store.apply(record):
                self.report.records += 1
            self.report.materializations += 1
        except DwsError as exc:  # e.g. the ref was handed to another step since
            self._skip(
                f"materialization of '{asset}' ({record.ref}) in run {run_id}: {exc}", cause=exc
            )
        if run is not None:
            inputs = self._inputs(record.inputs, _input_schemas(metadata))
            self._child_event(
                AssetRunEvent(
                    kind="COMPLETE",
                    event_time=when,
                    job=self._job_info(key),
                    run=self._without_data_deps(run, inputs),
                    inputs=inputs,
                    outputs=(self._output(ref, record.version, metadata, key, partition),),
                )
            )

    def _with_results(self, record: LineageRecord, metadata: Mapping[str, Any]) -> LineageRecord:
        """Metrics into the record, and `results.json` beside the data it describes."""
        try:
            metrics = sanitize_parameters(metrics_from_metadata(metadata), what="metric")
        except DwsError as exc:
            self._skip(f"results of {record.ref}: metrics not recorded: {exc}")
            return record
        record = replace(record, metrics=metrics)
        ref = self._ref(record.ref)
        if not self.ws.resource(ref.name).is_local:
            return record
        folder = self.ws.local_path(ref)
        state = self.ws.store.get(ref)
        current_run = ((state.record or {}).get("step") or {}).get("run_id") if state else None
        if (
            current_run is not None
            and record.step is not None
            and current_run != record.step.run_id
        ):
            return record  # a replayed older run: the data (and results.json) are a later run's
        # Files skipped as not data (pipes, sockets...) are named in the sensor's log, which
        # the daemon keeps, rather than as Python warnings nobody sees there.
        if (
            not (folder / MARKER_NAME).is_file()
            or self.ws.version_of(ref, on_skip=log.warning) != record.version
        ):
            self._skip(
                f"results of {record.ref}: the data there is no longer version "
                f"{record.version}; results.json not written"
            )
            return record
        facts = self._run(record.step.run_id) if record.step and record.step.run_id else None
        results = {
            "step": record.step_name,
            "ref": record.ref,
            "version": record.version,
            "run_id": record.step.run_id if record.step else None,
            "partition": record.step.partition if record.step else None,
            "start_time": record.start_time,
            "execution_time_seconds": record.duration_seconds,
            "parameters": dict(record.parameters),
            "run_description": facts.description if facts else None,
            "metrics": metrics,
        }
        atomic_write_bytes(folder / RESULTS_FILE, pretty_json(results))
        self.report.results_files += 1
        return record

    # ------------------------------------------------------------------ observed / checked

    def _observed(self, event: AssetEventRecord) -> None:
        metadata = event.metadata
        ref = metadata_value(metadata.get(keys.REF))
        version = metadata_value(metadata.get(keys.VERSION))
        if not isinstance(ref, str) or not isinstance(version, str) or not version:
            return
        try:
            at = metadata_value(metadata.get(keys.OBSERVED_AT))
            if self.ws.store.observe(
                ref,
                version,
                extra={"asset": event.asset_key.to_user_string()},
                at=at if isinstance(at, str) else None,
            ):
                self.report.observations += 1
        except DwsError as exc:
            self._skip(f"observation of {ref}: {exc}", cause=exc)

    def _checked(self, run_id: str, event: Any, when: dt.datetime) -> None:
        """A check's verdict joins the current record of the ref it checked, when that record
        is the one the check ran against (same run, or the asset's latest materialization)."""
        evaluation = event.event_specific_data
        key: AssetKey = evaluation.asset_key
        binding = self.catalog.binding(key)
        if binding is None:
            return
        state = self.ws.store.get(binding.ref)
        if state is None or state.record is None:
            return
        record = LineageRecord.from_json(state.record)
        checks = dict((record.extra or {}).get("checks", {}))
        verdict = {
            "passed": bool(evaluation.passed),
            "run_id": run_id,
            "severity": getattr(evaluation.severity, "value", str(evaluation.severity)),
            "at": when.isoformat(),
        }
        description = getattr(evaluation, "description", None)
        if description:
            verdict["description"] = redact_text(str(description))
        name = evaluation.check_name
        if checks.get(name) == verdict:
            return
        checks[name] = verdict
        enriched = replace(record, extra={**record.extra, "checks": checks})
        try:
            with self.ws.store.locked():
                # Read again under the lock: another process may have rewritten the ref or
                # forgotten it (`dws-dagster forget`) since; the verdict joins only the record
                # it was read with, and a forgotten ref stays forgotten.
                now = self.ws.store.get(binding.ref)
                if now is None:
                    self._skip(
                        f"check '{name}' of '{key.to_user_string()}': the lineage of "
                        f"{binding.ref} was forgotten meanwhile; verdict not recorded"
                    )
                elif now.record == state.record:
                    self.ws.store.commit([enriched])
                    self.report.checks += 1
        except DwsError as exc:
            self._skip(f"check '{name}' of '{key.to_user_string()}': {exc}", cause=exc)

    # ------------------------------------------------------------------ run ended

    def _run_ended(
        self, run_id: str, kind: DagsterEventType, event: Any, when: dt.datetime
    ) -> None:
        """Read the run's own log once: its check evaluations (Dagster's run-sharded SQLite
        storage cannot list them across runs by storage id, and they follow the run's
        materializations), what it planned and materialized, and its step errors."""
        log = self._run_log(run_id)
        for entry in log.checks:
            self._checked(
                run_id, entry.dagster_event, dt.datetime.fromtimestamp(entry.timestamp, dt.UTC)
            )
        planned, materialized, errors = log.planned, log.materialized, log.errors
        missing = [item for item in planned if item not in materialized]
        failed = kind == DagsterEventType.RUN_FAILURE
        run_error = _error_text(getattr(event.event_specific_data, "error", None))
        results_written = any(
            ref is not None and self._is_results(ref) for ref in materialized.values()
        )
        secrets = (
            self._run_secrets(run_id) if missing and kind != DagsterEventType.RUN_SUCCESS else set()
        )
        for (key, partition), step_key in ((item, planned[item]) for item in missing):
            found_error: tuple[str | None, str | None] = (
                errors.get(step_key, (None, None)) if step_key is not None else (None, None)
            )
            message, stack = found_error
            if kind == DagsterEventType.RUN_CANCELED:
                message = message or f"run {run_id} was cancelled"
            elif kind == DagsterEventType.RUN_SUCCESS:
                message = f"not materialized by run {run_id} (output skipped)"
            else:
                message = (
                    message
                    or run_error[0]
                    or f"run {run_id} failed before '{key.to_user_string()}' was materialized"
                )
                stack = stack or run_error[1]
            if secrets:
                message = redact_text(message, secrets)
                stack = redact_text(stack, secrets) if stack else stack
            if kind != DagsterEventType.RUN_SUCCESS:
                self._record_failure(key, partition, run_id, message, when)
            run = self._run_info(run_id, key, partition)
            if run is not None:
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
        if planned or materialized:
            error = run_error[0]
            if failed and error:
                error = redact_text(error, secrets or self._run_secrets(run_id))
            self._parent_ended(run_id, kind, error, when)
        if results_written and self.snapshot_on_results:
            self._snapshot(run_id)

    # ------------------------------------------------------------------ the Dagster run

    def _child_event(self, event: AssetRunEvent) -> None:
        """An asset run's event, after its Dagster run's START. The START is put before the
        first asset event of the run each applier meets: a tick that meets the run midway
        repeats it, and the outbox, keyed by (runId, eventType), keeps the first."""
        self._parent_started_before(event.run.dagster_run_id)
        self.ol_events.append(event)

    def _parent_started_before(self, run_id: str) -> None:
        if run_id in self._parents_started:
            return
        self._parents_started.add(run_id)
        facts = self._run(run_id)
        if facts is not None:
            # A run seen before it started (queued) is dated by its creation.
            self.ol_events.append(
                DagsterRunEvent(
                    kind="START",
                    event_time=facts.started or facts.created,
                    namespace=self.namespace,
                    dagster_run_id=run_id,
                    dagster_job=facts.job,
                    dagster_version=_dagster_version(),
                )
            )

    def _parent_ended(
        self, run_id: str, kind: DagsterEventType, error: str | None, when: dt.datetime
    ) -> None:
        """The Dagster run's own end, after its assets' ends; dated by the run's end event,
        whose time Dagster stores as the run's end time."""
        facts = self._run(run_id)
        if facts is None:
            return
        self._parent_started_before(run_id)
        state = _RUN_END_STATES[kind]
        self.ol_events.append(
            DagsterRunEvent(
                kind=state,
                event_time=when,
                namespace=self.namespace,
                dagster_run_id=run_id,
                dagster_job=facts.job,
                dagster_version=_dagster_version(),
                error_message=(error or f"run {run_id} failed") if state == "FAIL" else None,
            )
        )

    def _run_secrets(self, run_id: str) -> set[str]:
        """Values of credential-like fields of the run's config: removed from its error
        texts wherever they appear (an exception may quote a password it was given)."""
        try:
            run = self.instance.get_run_by_id(run_id)
        except Exception:
            return set()
        return secret_values(getattr(run, "run_config", None) or {})

    def _run_log(self, run_id: str) -> _RunLog:
        """The run's log: what this tick read of it when it read it all, else read again
        (the run began before the tick). Reading a run's planned and materialization events
        twice cost a fifth of the sensor's time."""
        streamed = self._streamed.pop(run_id, None)
        if streamed is not None and self._read_whole(run_id):
            outcome = _RunLog(self.instance.all_logs(run_id, of_type=_RUN_OUTCOME_TYPES))
            streamed.checks, streamed.errors = outcome.checks, outcome.errors
            return streamed
        return _RunLog(self.instance.all_logs(run_id, of_type=_RUN_LOG_TYPES))

    def _read_whole(self, run_id: str) -> bool:
        """Whether this tick read all the run's planned and materialization events: the run's
        first event of any kind lies after where the tick began reading (the run then ended
        within what the tick read, as this is called on its end event).

        One lookup through the event log's (run_id, id) index; asking for the run's first
        planned event instead made SQLite walk the index of every planned event in the log
        (28 ms a run at 100,000 materializations, growing with the log)."""
        if self.read_after is None:
            return False
        first = self.instance.get_records_for_run(run_id, limit=1).records
        return bool(first) and first[0].storage_id > self.read_after

    def _record_failure(
        self, key: AssetKey, partition: str | None, run_id: str, message: str, when: dt.datetime
    ) -> None:
        ref = self.catalog.ref_written_by(key, partition)
        if ref is None:
            return
        asset = key.to_user_string()
        record = LineageRecord(
            ref=str(ref),
            version=None,
            status="failed",
            step=StepInfo(
                name=asset,
                kind=STEP_KIND,
                run_id=run_id,
                partition=partition,
                code_version=self.catalog.code_version(key),
            ),
            parameters={"dagster/partition": partition} if partition is not None else {},
            end_time=when.isoformat(timespec="microseconds"),
            error=message,
        )
        try:
            if self.ws.store.apply_failure(record):  # atomic writes: never partial data
                self.report.failures += 1
        except DwsError as exc:
            self._skip(f"failure of '{asset}' in run {run_id}: {exc}", cause=exc)

    def _snapshot(self, run_id: str) -> None:
        facts = self._run(run_id)
        tag = f"run-{run_id[:8]}"
        if any(tag in info.tags for info in list_snapshots(self.ws)):
            return  # taken when this run was first seen (a replay from an older cursor)
        message = f"after Dagster run {run_id}" + (f" of job '{facts.job}'" if facts else "")
        try:
            outcome = take_snapshot(self.ws, tag=tag, message=message)
        except SnapshotError as exc:
            self._skip(f"snapshot after run {run_id}: {exc}")
            return
        if outcome.created:
            self.report.snapshots.append(outcome.info.hash)

    # ------------------------------------------------------------------ facts

    def prefetch_runs(self, records: Any) -> None:
        """Look up the runs of a batch of records in one query instead of one per run."""
        run_ids = (
            record.run_id if isinstance(record, AssetEventRecord) else record.event_log_entry.run_id
            for record in records
        )
        wanted = [run_id for run_id in dict.fromkeys(run_ids) if run_id not in self._runs]
        found = dagster_compat.runs_job_times(self.instance, wanted)
        for run_id in wanted:
            self._runs[run_id] = _run_facts(run_id, found.get(run_id))

    def prefetch_lineage(self, records: Any) -> None:
        """Read what applying a batch's materializations asks the store (the current state of
        each ref, the record of each version) in a few queries, inside the batch's
        transaction. Metadata that is not a ref and version is left to `apply` to report."""
        refs: list[str] = []
        versions: list[tuple[str, str]] = []
        for record in records:
            if (
                not isinstance(record, AssetEventRecord)
                or record.kind != DagsterEventType.ASSET_MATERIALIZATION
            ):
                continue
            ref, version = record.metadata.get(keys.REF), record.metadata.get(keys.VERSION)
            if isinstance(ref, str) and shapes.ref_ok(ref):
                refs.append(ref)
                if isinstance(version, str):
                    versions.append((ref, version))
        if refs:
            self.ws.store.prefetch(refs, versions)

    def _run(self, run_id: str) -> _RunFacts | None:
        if run_id not in self._runs:
            self._runs[run_id] = _run_facts(
                run_id, dagster_compat.runs_job_times(self.instance, [run_id]).get(run_id)
            )
        return self._runs[run_id]

    def locate(self, ref: ResourceRef | str) -> str:
        """`Workspace.location`, once per ref and tick (the workspace cannot change within)."""
        text = str(ref)
        found = self._locations.get(text)
        if found is None:
            found = self._locations[text] = self.ws.location(ref)
        return found

    def _run_info(self, run_id: str, key: AssetKey, partition: str | None) -> RunInfo | None:
        """The run facts of one asset's run, shared by its START and COMPLETE events."""
        wanted = (run_id, key, partition)
        if wanted not in self._run_infos:
            self._run_infos[wanted] = self._new_run_info(run_id, key, partition)
        return self._run_infos[wanted]

    def _new_run_info(self, run_id: str, key: AssetKey, partition: str | None) -> RunInfo | None:
        facts = self._run(run_id)
        if facts is None:
            self._skip(
                f"run {run_id} is not in the instance; no OpenLineage event for "
                f"'{key.to_user_string()}'"
            )
            return None
        window = self.catalog.nominal_window(key, partition)
        return RunInfo(
            dagster_run_id=run_id,
            dagster_job=facts.job,
            dagster_run_created=facts.created,
            partition=partition,
            nominal_start=window[0] if window else None,
            nominal_end=window[1] if window else None,
            dependencies=tuple(k.to_user_string() for k in self.catalog.dependencies(key)),
            dagster_version=_dagster_version(),
            spark_version=_spark_version(),
        )

    def _job_info(self, key: AssetKey) -> JobInfo:
        found = self._job_infos.get(key)
        if found is None:
            found = self._job_infos[key] = self._new_job_info(key)
        return found

    def _new_job_info(self, key: AssetKey) -> JobInfo:
        code = self.catalog.code(key)
        return JobInfo(
            namespace=self.namespace,
            name=key.to_user_string(),
            description=self.catalog.description(key),
            owners=self.catalog.owners(key),
            source_code=code.source,
            source_path=code.path,
            git_url=code.git_url,
            git_commit=code.git_commit,
            git_branch=code.git_branch,
            code_version=self.catalog.code_version(key),
            git_root=code.git_root,
        )

    def _dataset(self, ref: ResourceRef | str, version: str | None = None) -> DatasetInfo:
        return DatasetInfo(location=self.locate(ref), ref=str(ref), version=version)

    def _written(
        self,
        ref: ResourceRef,
        root: ResourceRef | None,
        partition: str | None,
        version: str | None = None,
    ) -> DatasetInfo:
        """An output: a partition is named by its asset's root, the partition in the subset
        facet (one OpenLineage run writes one partition, so the version is that partition's)."""
        if root is None or partition is None or not root.covers(ref):  # strictly inside
            return self._dataset(ref, version)
        subpath = "/".join(ref.parts[len(root.parts) :])
        return DatasetInfo(
            location=self.locate(root),
            ref=str(root),
            partitions=(PartitionInfo(identifier=partition, subpath=subpath, version=version),),
        )

    def _inputs(
        self, items: Any, schemas: Mapping[str, tuple[tuple[str, str, bool], ...]] | None = None
    ) -> tuple[DatasetInfo, ...]:
        """Inputs (ref, version) as datasets: the partitions of one partitioned asset are one
        dataset, its root, with the partitions read in the subset facet; the schema of each
        dataset is the one Spark read (its first partition's, for a partitioned one)."""
        schemas = schemas or {}
        plain: dict[str, DatasetInfo] = {}
        grouped: dict[ResourceRef, list[PartitionInfo]] = {}
        order: list[ResourceRef | str] = []
        schema_of: dict[ResourceRef, tuple[tuple[str, str, bool], ...]] = {}
        for raw, version in items:
            ref = self._ref(raw) if isinstance(raw, str) else raw
            found = self.catalog.root_of(ref)
            if found is None or found[0] == ref:
                text = str(ref)
                if text not in plain:
                    plain[text] = DatasetInfo(
                        location=self.locate(ref),
                        ref=text,
                        version=version,
                        schema=schemas.get(text, ()),
                    )
                    order.append(text)
                continue
            root = found[0]
            if root not in grouped:
                grouped[root] = []
                order.append(root)
            subpath = "/".join(ref.parts[len(root.parts) :])
            grouped[root].append(
                PartitionInfo(
                    identifier=self._partition_key(ref) or subpath, subpath=subpath, version=version
                )
            )
            if root not in schema_of and schemas.get(str(ref)):
                schema_of[root] = schemas[str(ref)]
        return tuple(
            plain[item]
            if isinstance(item, str)
            else DatasetInfo(
                location=self.locate(item),
                ref=str(item),
                partitions=tuple(grouped[item]),
                schema=schema_of.get(item, ()),
            )
            for item in order
        )

    def _partition_key(self, ref: ResourceRef) -> str | None:
        """The partition key of a partition's ref: as the definitions map it (planned
        inputs), else as the workspace recorded it (the ref's last step)."""
        found = self.catalog.partition_key_of(ref)
        if found is not None:
            return found
        state = self.ws.store.get(ref)
        step = ((state.record or {}).get("step") or {}) if state is not None else {}
        key = step.get("partition") if isinstance(step, Mapping) else None
        return key if isinstance(key, str) and key else None

    def _without_data_deps(self, run: RunInfo, inputs: tuple[DatasetInfo, ...]) -> RunInfo:
        """`jobDependencies` name the assets the run depends on without reading their data:
        a `deps=` asset whose data the run did read (by path) is an input, not a dependency."""
        if not run.dependencies or not inputs:
            return run
        read = tuple(info.ref for info in inputs if info.ref)
        memo = (run.dependencies, read)
        kept = self._kept_deps.get(memo)
        if kept is None:
            kept = tuple(name for name in run.dependencies if not self._dependency_read(name, read))
            self._kept_deps[memo] = kept
        return run if len(kept) == len(run.dependencies) else replace(run, dependencies=kept)

    def _dependency_read(self, name: str, read: tuple[str, ...]) -> bool:
        """Whether the run read the data of the `deps=` asset `name` (its ref, or one inside
        or around it: refs are normalised, so that is a prefix up to a slash)."""
        binding = self.catalog.binding(AssetKey.from_user_string(name))
        if binding is None:
            return False
        root = str(binding.ref)
        return any(
            ref == root or ref.startswith(root + "/") or root.startswith(ref + "/") for ref in read
        )

    def _ref(self, text: str) -> ResourceRef:
        found = self._refs.get(text)
        if found is None:
            found = self._refs[text] = ResourceRef.parse(text)
        return found

    def _output(
        self,
        ref: ResourceRef,
        version: str | None,
        metadata: Mapping[str, Any],
        key: AssetKey | None = None,
        partition: str | None = None,
    ) -> OutputInfo:
        schema = metadata_value(metadata.get("dagster/column_schema"))
        columns: tuple[tuple[str, str, bool], ...] = ()
        if isinstance(schema, TableSchema):
            columns = tuple((c.name, c.type, bool(c.constraints.nullable)) for c in schema.columns)
        rows = metadata_value(metadata.get("dagster/row_count"))
        size = metadata_value(metadata.get(keys.SIZE_BYTES))
        lineage = metadata_value(metadata.get(META_COLUMN_LINEAGE))
        root = _root_from_metadata(metadata)
        if root is None and key is not None and partition is not None:
            root = self.catalog.partitioned_root(key)  # events recorded before dws/ref_root
        return OutputInfo(
            dataset=self._written(ref, root, partition, version),
            schema=columns,
            rows=int(rows) if rows is not None else None,
            size_bytes=int(size) if size is not None else None,
            file_format=metadata_value(metadata.get(keys.FORMAT)),
            column_lineage=lineage if isinstance(lineage, Mapping) else None,
        )

    def _is_results(self, ref: ResourceRef) -> bool:
        try:
            return self.ws.resource(ref.name).role == "results"
        except DwsError:
            return False

    def _skip(self, message: str, *, cause: DwsError | None = None) -> None:
        """Skip one event with a warning; but a corrupt workspace file fails the tick (before
        its cursor moves), so the events are applied once the file is repaired, not lost."""
        if isinstance(cause, WorkspaceConfigError):
            raise cause
        message = redact_text(message)
        log.warning(message)
        self.report.skipped.append(message)


_PLANNED = DagsterEventType.ASSET_MATERIALIZATION_PLANNED
#: What a run's end reads from the run's own log besides what the sensor reads anyway.
_RUN_OUTCOME_TYPES = {DagsterEventType.ASSET_CHECK_EVALUATION, DagsterEventType.STEP_FAILURE}
_RUN_LOG_TYPES = {*_RUN_OUTCOME_TYPES, _PLANNED, DagsterEventType.ASSET_MATERIALIZATION}

AssetPartition = tuple[AssetKey, str | None]


def _root_from_metadata(metadata: Mapping[str, Any]) -> ResourceRef | None:
    raw = metadata_value(metadata.get(META_REF_ROOT))
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return ResourceRef.parse(raw)
    except DwsError:  # untrusted metadata: the partition keeps its own identity
        return None


def _input_schemas(metadata: Mapping[str, Any]) -> dict[str, tuple[tuple[str, str, bool], ...]]:
    """`dws/input_schemas` as the IO manager wrote it; anything malformed is left out (events
    of older versions have none: their inputs carry no schema)."""
    raw = metadata_value(metadata.get(META_INPUT_SCHEMAS))
    if not isinstance(raw, Mapping):
        return {}
    found: dict[str, tuple[tuple[str, str, bool], ...]] = {}
    for name, columns in raw.items():
        if not isinstance(columns, list):
            continue
        fields = tuple(
            (column[0], column[1], bool(column[2]))
            for column in columns
            if isinstance(column, list)
            and len(column) == 3
            and isinstance(column[0], str)
            and isinstance(column[1], str)
        )
        if fields:
            found[str(name)] = fields
    return found


def _run_facts(
    run_id: str, found: tuple[str, dt.datetime, dt.datetime | None] | None
) -> _RunFacts | None:
    return (
        None
        if found is None
        else _RunFacts(
            run_id=run_id,
            job=found[0],
            created=found[1],
            started=found[2],
            description=f"Dagster run {run_id} of job '{found[0]}'",
        )
    )


class _RunLog:
    """A run's own events, sorted out: check evaluations, planned (asset, partition) → step
    key, materialized (asset, partition) → ref, and step key → (error, stack)."""

    def __init__(self, entries: Any = ()) -> None:
        self.checks: list[Any] = []
        self.planned: dict[AssetPartition, str | None] = {}
        self.materialized: dict[AssetPartition, ResourceRef | None] = {}
        self.errors: dict[str, tuple[str | None, str | None]] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: Any) -> None:
        """Add one of Dagster's `EventLogEntry`s of the run."""
        event = entry.dagster_event
        kind = event.event_type
        if kind == DagsterEventType.ASSET_CHECK_EVALUATION:
            self.checks.append(entry)
        elif kind == DagsterEventType.STEP_FAILURE:
            message, stack = _error_text(getattr(event.event_specific_data, "error", None))
            if event.step_key and message:
                self.errors[event.step_key] = (message, stack or "")
        else:
            record = AssetEventRecord.from_entry(0, entry)
            if record is not None:
                self.add_asset_event(record)

    def add_asset_event(self, record: AssetEventRecord) -> None:
        if record.kind == DagsterEventType.ASSET_MATERIALIZATION:
            ref = metadata_value(record.metadata.get(keys.REF))
            self.materialized[(record.asset_key, record.partition)] = (
                ResourceRef.parse(ref) if isinstance(ref, str) else None
            )
        elif record.kind == DagsterEventType.ASSET_MATERIALIZATION_PLANNED:
            for partition in record.partitions:
                self.planned[(record.asset_key, partition)] = record.step_key


def _error_text(error: Any) -> tuple[str | None, str | None]:
    """(message, stack trace) of a Dagster error, the user's own exception first (Dagster wraps
    it), redacted (`redact_text`)."""
    if error is None:
        return None, None
    inner = error
    while getattr(inner, "cause", None) is not None:
        inner = inner.cause
    message = inner.message.strip()
    cls_name = getattr(inner, "cls_name", None)
    if cls_name and not message.startswith(cls_name):
        message = f"{cls_name}: {message}"
    try:
        stack = error.to_string()
    except Exception:
        stack = "".join(getattr(error, "stack", []) or [])
    return redact_text(message), redact_text(stack)


@functools.cache
def _dagster_version() -> str | None:
    try:
        from dagster.version import __version__

        return str(__version__)
    except Exception:
        return None


@functools.cache
def _spark_version() -> str | None:
    try:
        import pyspark

        return str(pyspark.__version__)
    except Exception:
        return None
