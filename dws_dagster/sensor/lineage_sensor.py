"""The lineage sensor: Dagster's event log → the workspace's lineage, snapshots and OpenLineage.

Each tick reads the event log in ascending storage-id order from its cursor, in bounded
batches, for as long as its time budget allows; each batch is applied to the workspace store and
its OpenLineage events are spooled in the outbox in the same transaction (lineage and events
commit together), before the cursor moves past it. The outbox is then delivered within what
is left of the budget, with retry and backoff across ticks, so a catalog that is down loses
nothing and never stalls the lineage.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    DefaultSensorStatus,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from dws_dagster.assets.binding_config import RefBinding
from dws_dagster.assets.workspace_resource import WorkspaceResource
from dws_dagster.errors import SensorConfigError
from dws_dagster.sensor.apply_lineage import EVENT_TYPES, ApplyReport, EventApplier
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.sensor.event_reader import EventReader
from dws_dagster.store.gc_pause import GcSparesOlderObjects
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.redaction import redact_text

DEFAULT_NAME = "dws_lineage_sensor"
#: Share of the time budget for reading and applying events; the rest is for delivery.
APPLY_SHARE = 0.7
#: Share of the time budget one OpenLineage event may take to be sent and answered, however
#: slowly a catalog answers: a tick lasts at most its budget and this share of it.
DEADLINE_SHARE = 0.5


@dataclass
class TickOutcome:
    """What one tick (or one call of `process_events`) did.

    `delivery_error` is the error that stopped this call's delivery (None: it did not fail);
    `last_delivery_error` the last error of the outbox's current run of failures, also when
    this call waited for the next attempt time (`next_attempt_at`) and sent nothing. Both are
    redacted.
    """

    cursor: int
    batches: int = 0
    more: bool = False
    applied: ApplyReport = field(default_factory=ApplyReport)
    openlineage: bool = True
    spooled: int = 0
    delivered: int = 0
    pending: int = 0
    delivery_error: str | None = None
    last_delivery_error: str | None = None
    next_attempt_at: dt.datetime | None = None
    delivery_busy: bool = False
    delivery_paused: bool = False

    def tick_text(self) -> str:
        """What the tick did, in a few sentences: the text Dagster keeps on the tick (its skip
        reason), which the UI shows where it lists the sensor's ticks."""
        a = self.applied
        if a.events:
            done = [
                f"{a.materializations} lineage record{_s(a.materializations)} "
                f"({a.records} new to the store)"
            ]
            for count, what in (
                (a.failures, "failed step"),
                (a.observations, "observation"),
                (a.checks, "check"),
                (a.results_files, "results.json"),
            ):
                if count:
                    done.append(f"{count} {what}{_s(count) if what != 'results.json' else ''}")
            if a.snapshots:
                done.append(
                    f"snapshot{_s(len(a.snapshots))} {', '.join(h[:12] for h in a.snapshots)}"
                )
            text = f"Applied {a.events} event{_s(a.events)}: {', '.join(done)}."
        else:
            text = "No new events."
        if a.skipped:
            text += f" {len(a.skipped)} skipped (see the tick's logs)."
        if self.more:
            text += " More events wait for the next tick."
        if not self.openlineage:
            return text
        text += (
            f" OpenLineage: {self.spooled} event{_s(self.spooled)} spooled, "
            f"{self.delivered} delivered, {self.pending} pending"
        )
        if self.delivery_paused:
            text += " (the transport is disabled)"
        elif self.delivery_busy:
            text += " (another process is delivering)"
        error = self.delivery_error or self.last_delivery_error
        if error:
            text += f"; last delivery error: {_shortened(error)}"
            if self.next_attempt_at is not None:
                text += f"; next attempt after {self.next_attempt_at:%Y-%m-%d %H:%M:%S %Z}"
        return redact_text(text + ".")

    def summary(self) -> str:
        """The tick's text with the reading details, for the sensor's log."""
        return (
            f"{self.tick_text()} ({self.applied.events} events in {self.batches} "
            f"batch{'es' if self.batches != 1 else ''}, cursor {self.cursor})"
        )


def _s(count: int) -> str:
    return "" if count == 1 else "s"


#: Characters of a delivery error a tick shows (its start and its end, where the cause is);
#: all of it is in `dws-dagster openlineage status`.
TICK_ERROR_CHARS = 400


def _shortened(text: str) -> str:
    if len(text) <= TICK_ERROR_CHARS:
        return text
    half = TICK_ERROR_CHARS // 2
    return f"{text[:half].rstrip()} … {text[-half:].lstrip()}"


def default_namespace(ws: Workspace) -> str:
    """The OpenLineage namespace of the workspace's jobs: `OPENLINEAGE_NAMESPACE`, as the
    OpenLineage integrations read it, else the workspace's name."""
    return os.environ.get("OPENLINEAGE_NAMESPACE") or ws.name


def process_events(
    instance: Any,
    ws: Workspace,
    *,
    after_storage_id: int = 0,
    repository_def: Any | None = None,
    batch_size: int = 500,
    time_budget_seconds: float = 20.0,
    namespace: str | None = None,
    default_resource: str | None = None,
    snapshot_on_results: bool = False,
    openlineage: bool = True,
    deliver: bool = True,
    save_cursor: Callable[[int], None] | None = None,
    bindings: Sequence[RefBinding] = (),
) -> TickOutcome:
    """Apply the event log after `after_storage_id` to `ws`: what one sensor tick does.

    Usable without a sensor (scripts, the demo, tests): pass the storage id returned in the
    previous outcome's `cursor` to continue where it stopped.

    Examples:
        What the sensor's ticks do, from a script (after runs made without the daemon):

        .. code-block:: python

            from dagster import DagsterInstance

            from dws_dagster import Workspace, process_events

            ws = Workspace.open()
            with DagsterInstance.get() as instance:  # $DAGSTER_HOME
                cursor = 0  # keep it between calls to continue where the last one stopped
                while True:
                    outcome = process_events(instance, ws, after_storage_id=cursor)
                    cursor = outcome.cursor
                    if not outcome.more:
                        break
                print(outcome.tick_text())  # Applied 12 events: ...

        Pass `repository_def=defs.get_repository_def()` to say what the code location knows of each
        asset (its bindings, its partitions).
    """
    _check_settings("lineage sensor", batch_size, time_budget_seconds)
    with GcSparesOlderObjects() as gc_spares:
        return _process_events(
            instance,
            ws,
            after_storage_id=after_storage_id,
            repository_def=repository_def,
            batch_size=batch_size,
            time_budget_seconds=time_budget_seconds,
            namespace=namespace,
            default_resource=default_resource,
            snapshot_on_results=snapshot_on_results,
            openlineage=openlineage,
            deliver=deliver,
            save_cursor=save_cursor,
            between_batches=gc_spares.spare_survivors,
            bindings=bindings,
        )


def _process_events(
    instance: Any,
    ws: Workspace,
    *,
    after_storage_id: int,
    repository_def: Any | None,
    batch_size: int,
    time_budget_seconds: float,
    namespace: str | None,
    default_resource: str | None,
    snapshot_on_results: bool,
    openlineage: bool,
    deliver: bool,
    save_cursor: Callable[[int], None] | None,
    between_batches: Callable[[], None],
    bindings: Sequence[RefBinding],
) -> TickOutcome:
    started = time.monotonic()
    apply_until = started + time_budget_seconds * APPLY_SHARE
    catalog = AssetCatalog(ws, repository_def, default_resource=default_resource, bindings=bindings)
    outbox = None
    transport = None
    if openlineage:
        from dws_dagster.ol.outbox.durable import Outbox

        outbox = Outbox(ws)
        # A damaged delivery row or pending flag fails the tick before anything is applied
        # (WorkspaceConfigError naming the row): the cursor stays.
        outbox.check()
    if outbox is not None and deliver:
        from dws_dagster.ol.transport.factory import make_transport

        # A bad OpenLineage configuration fails the tick before anything is applied: the
        # cursor stays, and the same events are applied once it is fixed.
        transport, _ = make_transport(ws)
    outcome = TickOutcome(cursor=after_storage_id, openlineage=outbox is not None)
    applier = EventApplier(
        instance,
        ws,
        catalog,
        namespace=namespace or default_namespace(ws),
        snapshot_on_results=snapshot_on_results,
        read_after=after_storage_id,
    )
    reader = EventReader(instance, EVENT_TYPES, after_storage_id=after_storage_id)
    while True:
        records = reader.next(batch_size)
        if not records:
            break
        applier.openlineage.events.clear()
        applier.prefetch_runs(records)
        # One transaction per batch, committed before the cursor moves, holding the batch's
        # lineage and its OpenLineage events: a crash leaves both or neither. One hold of the
        # store's lock per batch (writers wait at most a batch), except when
        # snapshots are taken per run: a snapshot of large data may take long, and takes the
        # lock itself; then each apply and the spool commit on their own.
        with nullcontext() if snapshot_on_results else ws.store.locked():
            applier.prefetch_lineage(records)
            for record in records:
                applier.apply(record)
            if outbox is not None:
                outcome.spooled += outbox.spool(
                    _render(applier.openlineage.events, applier.openlineage.locate)
                )
        outcome.cursor = records[-1].storage_id  # lineage stored, events spooled: move on
        outcome.batches += 1
        if save_cursor is not None:
            save_cursor(outcome.cursor)
        if len(records) < batch_size:
            break
        if time.monotonic() >= apply_until:
            outcome.more = True
            break
        between_batches()
    outcome.applied = applier.report
    if outbox is not None and transport is not None:
        remaining = time_budget_seconds - (time.monotonic() - started)
        # Each event within a deadline too (a catalog answering a byte a second would hold
        # the tick): a tick lasts at most its budget and DEADLINE_SHARE of it.
        report = outbox.deliver(
            transport,
            budget_seconds=max(remaining, time_budget_seconds * 0.1),
            deadline_seconds=time_budget_seconds * DEADLINE_SHARE,
        )
        outcome.delivered = report.sent
        outcome.pending = report.pending
        if report.last_error:  # stored redacted; redacted again with this transport's secrets
            from dws_dagster.ol.transport.text import redact

            outcome.last_delivery_error = redact(report.last_error, transport)
        outcome.delivery_error = outcome.last_delivery_error if report.failed else None
        outcome.next_attempt_at = report.next_attempt_at
        outcome.delivery_busy, outcome.delivery_paused = report.busy, report.paused
    elif outbox is not None:
        status = outbox.status()
        outcome.pending = status.pending
        if status.attempts and status.last_error:
            outcome.last_delivery_error = redact_text(status.last_error)
            outcome.next_attempt_at = status.next_attempt_at
    return outcome


def _check_settings(who: str, batch_size: int, time_budget_seconds: float) -> None:
    if batch_size < 1:
        raise SensorConfigError(f"{who}: batch_size must be at least 1, got {batch_size}")
    if time_budget_seconds <= 0:
        raise SensorConfigError(
            f"{who}: time_budget_seconds must be positive, got {time_budget_seconds}"
        )


def _render(events: list[Any], locate: Callable[[str], str]) -> list[dict[str, Any]]:
    """The batch's events in the order the applier put them: a Dagster run's own START
    before its assets' events, its end after theirs."""
    from dws_dagster.ol.events import build_run_event
    from dws_dagster.ol.facets import PRODUCER
    from dws_dagster.ol.run_events import DagsterRunEvent, build_dagster_run_event

    return [
        build_dagster_run_event(event, producer=PRODUCER)
        if isinstance(event, DagsterRunEvent)
        else build_run_event(event, locate=locate, producer=PRODUCER)
        for event in events
    ]


def parse_cursor(cursor: str | None, *, sensor_name: str) -> int:
    """The storage id a sensor cursor holds (`{"storage_id": N}`; none yet: 0)."""
    if not cursor:
        return 0
    try:
        data = json.loads(cursor)
        storage_id = int(data["storage_id"]) if isinstance(data, dict) else int(data)
    except (ValueError, KeyError, TypeError):
        raise SensorConfigError(
            f"sensor '{sensor_name}' has a cursor it cannot read ({cursor[:80]!r}); reset it "
            "in the Dagster UI (Sensor → Cursor), which makes it re-read the event log — "
            "applying events again changes nothing"
        ) from None
    return storage_id


def format_cursor(storage_id: int) -> str:
    return json.dumps({"storage_id": storage_id})


def lineage_sensor(
    *,
    name: str = DEFAULT_NAME,
    workspace: WorkspaceResource | None = None,
    workspace_resource_key: str = "workspace",
    minimum_interval_seconds: int = 30,
    batch_size: int = 500,
    time_budget_seconds: float = 20.0,
    namespace: str | None = None,
    default_resource: str | None = None,
    snapshot_on_results: bool = False,
    openlineage: bool = True,
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
    bindings: Sequence[RefBinding] = (),
) -> SensorDefinition:
    """A sensor keeping the workspace's lineage, results and OpenLineage events up to date.

    The workspace is `workspace`, or the `WorkspaceResource` under `workspace_resource_key`
    in the Definitions' resources. Each tick applies up to `batch_size` events per batch, as
    many batches as `time_budget_seconds` allows, then delivers spooled OpenLineage events
    with what is left, each within half the budget however slowly a catalog answers: a
    tick lasts at most 1.5 times its budget (keep that below Dagster's sensor timeout, 60 s
    by default).
    `snapshot_on_results` takes a workspace snapshot, tagged `run-<run id prefix>`, after each
    run that materialized a results asset. `default_resource` names where assets without
    `dws_ref` metadata live (as on the IO manager), `bindings` the assets bound by
    configuration (as on the IO manager). Runs on its own (`RUNNING`) by default.

    Examples:
        .. code-block:: python

            from dagster import Definitions, asset
            from pyspark.sql import DataFrame

            from dws_dagster import (
                SparkWorkspaceIOManager,
                WorkspaceResource,
                dws_ref,
                dws_source_asset,
                lineage_sensor,
            )

            trips = dws_source_asset("trips", "source-data", "trips", format="csv")

            @asset(metadata=dws_ref("results", "trips_per_zone"))
            def trips_per_zone(trips: DataFrame) -> DataFrame:
                return trips.groupBy("zone").count()

            workspace = WorkspaceResource(root=".")
            defs = Definitions(
                assets=[trips, trips_per_zone],
                sensors=[lineage_sensor(snapshot_on_results=True, minimum_interval_seconds=60)],
                resources={
                    "workspace": workspace,  # the sensor's workspace (workspace_resource_key)
                    "io_manager": SparkWorkspaceIOManager(workspace=workspace),
                },
            )
    """
    _check_settings(f"lineage_sensor '{name}'", batch_size, time_budget_seconds)
    if minimum_interval_seconds < 1:
        raise SensorConfigError(
            f"lineage_sensor '{name}': minimum_interval_seconds must be at "
            f"least 1, got {minimum_interval_seconds}"
        )
    required = set() if workspace is not None else {workspace_resource_key}

    @sensor(
        name=name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys=required,
        description="Workspace lineage, results, snapshots and OpenLineage events from "
        "the Dagster event log (dws_dagster).",
    )
    def _lineage_sensor(context: SensorEvaluationContext, **given: Any) -> SensorResult:
        # Direct invocation passes required resources as arguments; the daemon's ticks put
        # them on the context.
        resource = (
            workspace
            if workspace is not None
            else given.get(
                workspace_resource_key, getattr(context.resources, workspace_resource_key, None)
            )
        )
        if not isinstance(resource, WorkspaceResource):
            raise SensorConfigError(
                f"sensor '{name}': resource '{workspace_resource_key}' is a "
                f"{type(resource).__name__}, not a WorkspaceResource; add "
                f"resources={{'{workspace_resource_key}': WorkspaceResource(root=...)}} to your "
                "Definitions, or pass workspace= to lineage_sensor"
            )
        start = parse_cursor(context.cursor, sensor_name=name)
        outcome = process_events(
            context.instance,
            resource.workspace(),
            after_storage_id=start,
            repository_def=context.repository_def,
            batch_size=batch_size,
            time_budget_seconds=time_budget_seconds,
            namespace=namespace,
            default_resource=default_resource,
            snapshot_on_results=snapshot_on_results,
            openlineage=openlineage,
            bindings=bindings,
        )
        for message in outcome.applied.skipped:
            context.log.warning(message)
        context.log.info(outcome.summary())
        # The sensor requests no runs: Dagster records each tick as skipped, and its skip
        # reason is the one text of a tick the open-source UI shows (on the tick list's
        # status tag, in the tick's details, on the sensor list's latest tick).
        return SensorResult(
            cursor=format_cursor(outcome.cursor), skip_reason=SkipReason(outcome.tick_text())
        )

    return _lineage_sensor
