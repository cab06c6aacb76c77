"""What the lineage sensor looks up about Dagster runs: their facts (job, creation and start
times), their own log when they end (check evaluations, what they planned and materialized, step
errors) and the secrets of their config, which are removed from the error texts they produced.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dagster import AssetKey, DagsterEventType

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.sensor.stored_events import AssetEventRecord
from dws_dagster.workspace.redaction import redact_text, secret_values
from dws_dagster.workspace.refs import ResourceRef

_PLANNED = DagsterEventType.ASSET_MATERIALIZATION_PLANNED
#: What a run's end reads from the run's own log besides what the sensor reads anyway.
_RUN_OUTCOME_TYPES = {DagsterEventType.ASSET_CHECK_EVALUATION, DagsterEventType.STEP_FAILURE}
_RUN_LOG_TYPES = {*_RUN_OUTCOME_TYPES, _PLANNED, DagsterEventType.ASSET_MATERIALIZATION}

AssetPartition = tuple[AssetKey, str | None]
#: Dagster's run tag holding a run's partition key
PARTITION_TAG = "dagster/partition"
#: Dagster's run tags that say what launched a run and for which data: its OpenLineage tags
LAUNCH_TAGS = (
    "dagster/schedule_name",
    "dagster/sensor_name",
    "dagster/backfill",
    PARTITION_TAG,
    "dagster/asset_partition_range_start",
    "dagster/asset_partition_range_end",
)


@dataclass(frozen=True)
class RunFacts:
    run_id: str
    job: str
    created: dt.datetime
    description: str
    #: when the run started; None when it had not yet when its record was read
    started: dt.datetime | None = None
    #: the snapshot the run replays (`dws-dagster replay`), whose lineage is the replay's own
    replay_of: str | None = None
    #: the run's partition key (None: none, or a range)
    partition: str | None = None
    #: the `LAUNCH_TAGS` the run has, as (key, value)
    launch_tags: tuple[tuple[str, str], ...] = ()


class RunLookup:
    """The runs one tick meets. Their facts are read a batch of events at a time and kept for
    the tick; a run's own log is read once, when it ends."""

    def __init__(self, instance: Any, *, read_after: int | None = None) -> None:
        self.instance = instance
        #: the storage id after which this tick reads every event it applies (None: unknown)
        self.read_after = read_after
        #: The facts of each run met this tick (None: not in the instance), filled a batch at
        #: a time by `look_up`, which a memoizer of one run at a time could not do.
        self._facts: dict[str, RunFacts | None] = {}
        #: Planned and materialization events this tick read, by run, until the run ends.
        self._streamed: dict[str, RunLog] = {}

    def look_up(self, run_ids: Iterable[str]) -> None:
        """Read the facts of the runs not met yet in one query instead of one per run."""
        wanted = [run_id for run_id in dict.fromkeys(run_ids) if run_id not in self._facts]
        found = dagster_compat.runs_job_times(self.instance, wanted)
        for run_id in wanted:
            self._facts[run_id] = _run_facts(run_id, found.get(run_id))

    def facts(self, run_id: str) -> RunFacts | None:
        """The run's facts (None: the run is not in the instance)."""
        if run_id not in self._facts:
            self.look_up([run_id])
        return self._facts[run_id]

    def is_replay(self, run_id: str) -> bool:
        """Whether the run is one `dws-dagster replay` launched: its events belong to the
        replay's scratch workspace, which recorded them itself."""
        facts = self.facts(run_id)
        return facts is not None and facts.replay_of is not None

    def stream(self, record: AssetEventRecord) -> None:
        """Keep a planned or materialization event the tick read, for its run's end."""
        self._streamed.setdefault(record.run_id, RunLog()).add_asset_event(record)

    def secrets(self, run_id: str) -> set[str]:
        """Values of credential-like fields of the run's config: removed from its error
        texts wherever they appear (an exception may quote a password it was given)."""
        try:
            run = self.instance.get_run_by_id(run_id)
        except Exception:
            return set()
        return secret_values(getattr(run, "run_config", None) or {})

    def log(self, run_id: str) -> RunLog:
        """The run's log: what this tick read of it when it read it all, else read again
        (the run began before the tick). Reading only the run's check evaluations and step
        failures when the tick read the rest spares reading its asset events twice."""
        streamed = self._streamed.pop(run_id, None)
        if streamed is not None and self._read_whole(run_id):
            outcome = RunLog(self.instance.all_logs(run_id, of_type=_RUN_OUTCOME_TYPES))
            streamed.checks, streamed.errors = outcome.checks, outcome.errors
            return streamed
        return RunLog(self.instance.all_logs(run_id, of_type=_RUN_LOG_TYPES))

    def _read_whole(self, run_id: str) -> bool:
        """Whether this tick read all the run's planned and materialization events: the run's
        first event of any kind lies after where the tick began reading (the run then ended
        within what the tick read, as this is called on its end event).

        One lookup through the event log's (run_id, id) index; asking for the run's first
        planned event instead makes SQLite walk the index of every planned event in the log,
        which grows with the log."""
        if self.read_after is None:
            return False
        first = self.instance.get_records_for_run(run_id, limit=1).records
        return bool(first) and first[0].storage_id > self.read_after


def _run_facts(
    run_id: str, found: tuple[str, dt.datetime, dt.datetime | None, dict[str, str]] | None
) -> RunFacts | None:
    return (
        None
        if found is None
        else RunFacts(
            run_id=run_id,
            job=found[0],
            created=found[1],
            started=found[2],
            description=f"Dagster run {run_id} of job '{found[0]}'",
            replay_of=found[3].get(keys.REPLAY_OF),
            partition=found[3].get(PARTITION_TAG) or None,
            launch_tags=tuple(
                (tag, str(found[3][tag])) for tag in LAUNCH_TAGS if found[3].get(tag)
            ),
        )
    )


class RunLog:
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
            message, stack = error_text(getattr(event.event_specific_data, "error", None))
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


def error_text(error: Any) -> tuple[str | None, str | None]:
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
