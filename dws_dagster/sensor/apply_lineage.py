"""One Dagster event → the workspace's lineage: records, failures, observations, check verdicts,
`results.json` files and snapshots; the OpenLineage events it implies are collected on the side
(`catalog_events.asset_events`).

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
from typing import Any

from dagster import AssetKey, DagsterEventType

from dws_dagster import metadata_keys as keys
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.assets.materialization import (
    STEP_KIND,
    metrics_from_metadata,
    record_from_metadata,
)
from dws_dagster.errors import DwsError, SnapshotError, WorkspaceConfigError
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.sensor.catalog_events.asset_events import OpenLineageEvents
from dws_dagster.sensor.check_verdicts import CheckVerdict, read_verdict
from dws_dagster.sensor.run_lookup import RunLookup, error_text
from dws_dagster.sensor.stored_events import AssetEventRecord
from dws_dagster.snapshots.index import list_snapshots
from dws_dagster.snapshots.results_metrics import RESULTS_FILE
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.workspace import shapes
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.files import atomic_write_bytes, pretty_json
from dws_dagster.workspace.records import LineageRecord, StepInfo, sanitize_parameters
from dws_dagster.workspace.redaction import get_logger, redact_text
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.versions import MARKER_NAME

log = get_logger("dws_dagster.sensor")

RUN_END_TYPES = (
    DagsterEventType.RUN_SUCCESS,
    DagsterEventType.RUN_FAILURE,
    DagsterEventType.RUN_CANCELED,
)
#: The event types the sensor reads from the event log.
EVENT_TYPES = (
    DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    DagsterEventType.ASSET_MATERIALIZATION,
    DagsterEventType.ASSET_OBSERVATION,
    *RUN_END_TYPES,
)


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

    def skip(self, message: str, *, cause: DwsError | None = None) -> None:
        """Skip one event with a warning; but a corrupt workspace file fails the tick (before
        its cursor moves), so the events are applied once the file is repaired, not lost."""
        if isinstance(cause, WorkspaceConfigError):
            raise cause
        message = redact_text(message)
        log.warning(message)
        self.skipped.append(message)


class EventApplier:
    """Applies Dagster event records to a workspace; collects the OpenLineage events
    (`openlineage.events`)."""

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
        self.ws = ws
        self.catalog = catalog
        self.snapshot_on_results = snapshot_on_results
        self.report = ApplyReport()
        self.runs = RunLookup(instance, read_after=read_after)
        #: Refs as parsed, once per tick: every event of a run names the same few, and parsing
        #: validates each part again.
        self._ref = functools.cache(ResourceRef.parse)
        self.openlineage = OpenLineageEvents(
            ws,
            catalog,
            self.runs,
            namespace=namespace,
            parse_ref=self._ref,
            skip=self.report.skip,
        )

    # ------------------------------------------------------------------ dispatch

    def apply(self, record: Any) -> None:
        """Apply one record: an `AssetEventRecord`, or Dagster's record of a run's end (or of
        an asset event, read as an `AssetEventRecord`)."""
        run_id = record.run_id if isinstance(record, AssetEventRecord) else None
        if run_id is None:
            run_id = record.event_log_entry.run_id
        if run_id and self.runs.is_replay(run_id):
            return  # a replay's run: lineage, failures, snapshots and events are the replay's
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
            self.runs.stream(record)
            self.openlineage.planned(record, when)
        elif record.kind == DagsterEventType.ASSET_MATERIALIZATION:
            self.runs.stream(record)
            self._materialized(record, when)
        else:
            self._observed(record)

    def prefetch_runs(self, records: Any) -> None:
        """Look up the runs of a batch of records in one query instead of one per run."""
        self.runs.look_up(
            record.run_id if isinstance(record, AssetEventRecord) else record.event_log_entry.run_id
            for record in records
        )

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

    # ------------------------------------------------------------------ materialized

    def _materialized(self, event: AssetEventRecord, when: dt.datetime) -> None:
        run_id, key, partition = event.run_id, event.asset_key, event.partition
        metadata = event.metadata
        if keys.REPLAY_OF in metadata:  # a replay's scratch workspace recorded it already
            return
        asset = key.to_user_string()
        record = record_from_metadata(metadata, asset=asset, run_id=run_id, partition=partition)
        run = self.openlineage.run_info(run_id, key, partition)
        if record is None:  # not a workspace asset: its run still completes
            if run is not None:
                self.openlineage.materialized(run, event, when, None)
            return
        ref = self._ref(record.ref)
        if self._is_results(ref):
            record = self._with_results(record, metadata)
        try:
            if self.ws.store.apply(record):
                self.report.records += 1
            self.report.materializations += 1
        except DwsError as exc:  # e.g. the ref was handed to another step since
            self.report.skip(
                f"materialization of '{asset}' ({record.ref}) in run {run_id}: {exc}", cause=exc
            )
        if run is not None:
            self.openlineage.materialized(run, event, when, record)

    def _with_results(self, record: LineageRecord, metadata: Mapping[str, Any]) -> LineageRecord:
        """Metrics into the record, and `results.json` beside the data it describes."""
        try:
            metrics = sanitize_parameters(metrics_from_metadata(metadata), what="metric")
        except DwsError as exc:
            self.report.skip(f"results of {record.ref}: metrics not recorded: {exc}")
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
            self.report.skip(
                f"results of {record.ref}: the data there is no longer version "
                f"{record.version}; results.json not written"
            )
            return record
        run_id = record.step.run_id if record.step else None
        facts = self.runs.facts(run_id) if run_id else None
        results = {
            "step": record.step_name,
            "ref": record.ref,
            "version": record.version,
            "run_id": run_id,
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

    def _is_results(self, ref: ResourceRef) -> bool:
        try:
            return self.ws.resource(ref.name).role == "results"
        except DwsError:
            return False

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
            self.report.skip(f"observation of {ref}: {exc}", cause=exc)

    def _checks(self, run_id: str, entries: Any) -> bool:
        """The run's check evaluations: each verdict joins the record of what it judged, and
        each asset (or partition of it) the run checked gets a checks run in OpenLineage.
        True when any such run was emitted."""
        facts = self.runs.facts(run_id)
        run_partition = facts.partition if facts is not None else None
        judged: dict[tuple[AssetKey, str | None], list[CheckVerdict]] = {}
        for entry in entries:
            verdict = read_verdict(entry, self.catalog, run_partition)
            if verdict is None:
                continue
            self._checked(run_id, verdict)
            judged.setdefault((verdict.key, verdict.partition), []).append(verdict)
        emitted = False
        for (key, partition), verdicts in judged.items():
            emitted = self.openlineage.checked(run_id, key, partition, verdicts) or emitted
        return emitted

    def _checked(self, run_id: str, verdict: CheckVerdict) -> None:
        """A check's verdict joins the current record of the ref it judged (the partition's,
        for a check of a partition), when that record is the one the check ran against (same
        run, or the asset's latest materialization)."""
        key = verdict.key
        ref = self.catalog.ref_written_by(key, verdict.partition)
        if ref is None:
            return
        state = self.ws.store.get(ref)
        if state is None or state.record is None:
            return
        record = LineageRecord.from_json(state.record)
        checks = dict((record.extra or {}).get("checks", {}))
        entry = {
            "passed": verdict.passed,
            "run_id": run_id,
            "severity": verdict.severity,
            "at": verdict.at.isoformat(),
        }
        if verdict.description:
            entry["description"] = verdict.description
        name = verdict.name
        if checks.get(name) == entry:
            return
        checks[name] = entry
        enriched = replace(record, extra={**record.extra, "checks": checks})
        try:
            with self.ws.store.locked():
                # Read again under the lock: another process may have rewritten the ref or
                # forgotten it (`dws-dagster forget`) since; the verdict joins only the record
                # it was read with, and a forgotten ref stays forgotten.
                now = self.ws.store.get(ref)
                if now is None:
                    self.report.skip(
                        f"check '{name}' of '{key.to_user_string()}': the lineage of "
                        f"{ref} was forgotten meanwhile; verdict not recorded"
                    )
                elif now.record == state.record:
                    self.ws.store.commit([enriched])
                    self.report.checks += 1
        except DwsError as exc:
            self.report.skip(f"check '{name}' of '{key.to_user_string()}': {exc}", cause=exc)

    # ------------------------------------------------------------------ run ended

    def _run_ended(
        self, run_id: str, kind: DagsterEventType, event: Any, when: dt.datetime
    ) -> None:
        """Read the run's own log once: its check evaluations (Dagster's run-sharded SQLite
        storage cannot list them across runs by storage id, and they follow the run's
        materializations), what it planned and materialized, and its step errors."""
        run_log = self.runs.log(run_id)
        checked = self._checks(run_id, run_log.checks)
        planned, materialized, errors = run_log.planned, run_log.materialized, run_log.errors
        missing = [item for item in planned if item not in materialized]
        failed = kind == DagsterEventType.RUN_FAILURE
        run_error = error_text(getattr(event.event_specific_data, "error", None))
        results_written = any(
            ref is not None and self._is_results(ref) for ref in materialized.values()
        )
        secrets = (
            self.runs.secrets(run_id) if missing and kind != DagsterEventType.RUN_SUCCESS else set()
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
            self.openlineage.not_materialized(
                run_id, key, partition, when, failed=failed, message=message, stack=stack
            )
        if planned or materialized or checked:
            error = run_error[0]
            if failed and error:
                error = redact_text(error, secrets or self.runs.secrets(run_id))
            self.openlineage.run_ended(run_id, kind, error, when)
        if results_written and self.snapshot_on_results:
            self._snapshot(run_id)

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
            self.report.skip(f"failure of '{asset}' in run {run_id}: {exc}", cause=exc)

    def _snapshot(self, run_id: str) -> None:
        facts = self.runs.facts(run_id)
        tag = f"run-{run_id[:8]}"
        if any(tag in info.tags for info in list_snapshots(self.ws)):
            return  # taken when this run was first seen (a replay from an older cursor)
        message = f"after Dagster run {run_id}" + (f" of job '{facts.job}'" if facts else "")
        try:
            outcome = take_snapshot(self.ws, tag=tag, message=message)
        except SnapshotError as exc:
            self.report.skip(f"snapshot after run {run_id}: {exc}")
            return
        if outcome.created:
            self.report.snapshots.append(outcome.info.hash)
