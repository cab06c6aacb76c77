"""What replaying a snapshot would run: the steps behind the requested refs, in dependency order,
each with what it read, what it wrote and how it can be run again, or why it cannot.

The plan is read from the snapshot's lineage alone (not today's), so it says what produced the
snapshot's results then. A step is replayable only when everything it needs was recorded: a
Dagster asset its asset key, partition and run config (`parameters`); a script its command
line; both the code they ran (a git commit, or a Dagster code version to match). Whatever is
missing is named, and every step downstream of a step that cannot be replayed cannot be either:
replay never fills a gap with today's state.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dws_dagster.errors import SnapshotError
from dws_dagster.snapshots.index import SnapshotInfo, resolve_snapshot
from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.redaction import REDACTED
from dws_dagster.workspace.refs import ResourceRef

#: Step kinds the lineage records (`StepInfo.kind`).
DAGSTER_ASSET = "dagster-asset"
SCRIPT = "script"
#: The partition a Dagster asset's record names among its parameters (not run config).
PARTITION_PARAMETER = "dagster/partition"


@dataclass(frozen=True)
class ReplayStep:
    """One recorded step of the snapshot's lineage, as replay would run it again."""

    key: str
    kind: str
    name: str
    run_id: str | None
    partition: str | None
    #: (ref, recorded version) of every ref the step wrote that the snapshot holds.
    outputs: tuple[tuple[str, str], ...]
    #: (ref, recorded version) of every input the step read.
    inputs: tuple[tuple[str, str], ...]
    #: Dagster: the op's run config as recorded; scripts: their recorded parameters.
    parameters: Mapping[str, Any]
    command_line: tuple[str, ...]
    #: Scripts: the folder they ran in, relative to the workspace root.
    working_folder: str | None
    git_commit: str | None
    code_version: str | None
    #: Keys of the steps whose outputs this step reads.
    after: tuple[str, ...] = ()
    #: Rows each output held when it was recorded, where the writer counted them (Spark).
    rows: Mapping[str, int] = field(default_factory=dict)
    #: Why the step cannot be replayed; None when it can.
    blocked: str | None = None

    @property
    def replayable(self) -> bool:
        return self.blocked is None

    @property
    def run_config(self) -> dict[str, Any]:
        """The op config a Dagster replay passes (the partition is not config)."""
        return {k: v for k, v in self.parameters.items() if k != PARTITION_PARAMETER}


@dataclass(frozen=True)
class ReplayPlan:
    """The steps to replay, in dependency order, and the source data they start from."""

    snapshot: SnapshotInfo
    requested: tuple[str, ...]
    steps: tuple[ReplayStep, ...]
    #: (ref, version) of the source data the steps read, as the snapshot holds it.
    sources: tuple[tuple[str, str], ...] = field(default=())

    @property
    def replayable(self) -> bool:
        return all(step.replayable for step in self.steps)


def plan_replay(ws: Workspace, snapshot: str, refs: Sequence[ResourceRef | str] = ()) -> ReplayPlan:
    """The replay plan of `refs` (default: the snapshot's results) from snapshot `snapshot`.

    Refs the snapshot holds no step's record for are refused, naming them: there is nothing
    to replay for source data or a ref no step wrote."""
    info = resolve_snapshot(ws, snapshot)
    states = dict(ws.store.snapshot_items(info.hash))
    requested = _requested(ws, info, states, refs)
    return _plan(ws, info, states, requested)


def _requested(
    ws: Workspace,
    info: SnapshotInfo,
    states: Mapping[str, RefState],
    refs: Sequence[ResourceRef | str],
) -> tuple[str, ...]:
    if refs:
        wanted = [
            str(ws.check_ref(ref if isinstance(ref, ResourceRef) else ResourceRef.parse(ref)))
            for ref in refs
        ]
    else:
        results = {name for name, r in ws.resources.items() if r.role == "results"}
        wanted = [
            ref
            for ref, state in states.items()
            if ResourceRef.parse(ref).name in results and _step_record(state) is not None
        ]
        if not wanted:
            raise SnapshotError(
                f"snapshot {info.name} holds no results a step wrote; name the refs to replay "
                "(dws-dagster replay SNAPSHOT REF ...)"
            )
    missing = [ref for ref in wanted if _step_record(states.get(ref)) is None]
    if missing:
        raise SnapshotError(
            f"snapshot {info.name} holds no step's record of {', '.join(missing)}: only refs a "
            "step wrote can be replayed (see 'dws-dagster lineage REF --snapshot "
            f"{info.name}')"
        )
    return tuple(sorted(dict.fromkeys(wanted)))


def _step_record(state: RefState | None) -> LineageRecord | None:
    """The record of the step that wrote the ref, or None (source data, observations)."""
    if state is None or state.record is None or state.owner is None:
        return None
    record = LineageRecord.from_json(state.record)
    return None if record.is_observation or record.version is None else record


def _step_key(record: LineageRecord) -> str:
    step = record.step
    assert step is not None
    if step.kind == DAGSTER_ASSET:
        return f"{step.name}[{step.partition}]" if step.partition is not None else step.name
    # One run of a script writes all its outputs: its run id, else its start, tells runs apart.
    return f"{step.name}@{step.run_id or record.start_time}"


def _plan(
    ws: Workspace, info: SnapshotInfo, states: Mapping[str, RefState], requested: Iterable[str]
) -> ReplayPlan:
    written: dict[str, LineageRecord] = {}
    by_step: dict[str, list[LineageRecord]] = {}
    for ref, state in states.items():
        record = _step_record(state)
        if record is not None:
            written[ref] = record
            by_step.setdefault(_step_key(record), []).append(record)
    sources: dict[str, str] = {}
    depends: dict[str, set[str]] = {}
    gaps: dict[str, list[str]] = {}
    pending = [_step_key(written[ref]) for ref in requested]
    while pending:
        key = pending.pop()
        if key in depends:
            continue
        depends[key] = set()
        gaps[key] = []
        for input_ref, version in sorted({p for r in by_step[key] for p in r.inputs}):
            producers = _producers(states, written, input_ref, version)
            if producers is None:
                gaps[key].append(
                    f"it read {input_ref}@{version[:16]}, which the snapshot does not hold "
                    "(replaced before the snapshot was taken)"
                )
            elif not producers:
                sources[input_ref] = version
            for producer in producers or ():
                depends[key].add(_step_key(producer))
                pending.append(_step_key(producer))
    order = list(graphlib.TopologicalSorter(depends).static_order())
    steps: dict[str, ReplayStep] = {}
    for key in order:
        group = sorted(by_step[key], key=lambda r: r.ref)
        after = tuple(sorted(depends[key]))
        blocked = _why_not(group[0], gaps[key], [steps[k] for k in after])
        steps[key] = _step(key, group, after, blocked)
    return ReplayPlan(
        snapshot=info,
        requested=tuple(requested),
        steps=tuple(steps[key] for key in order),
        sources=tuple(sorted(sources.items())),
    )


def _producers(
    states: Mapping[str, RefState], written: Mapping[str, LineageRecord], ref: str, version: str
) -> list[LineageRecord] | None:
    """The records whose steps wrote input `ref` at `version`: [] for source data (read as
    found, observed, or no record at all), None when the snapshot holds another version of
    a ref a step wrote. An input may be a folder above the refs steps wrote (a partitioned
    asset read whole): its producers are the steps of every ref below it."""
    state = states.get(ref)
    if state is not None and state.version is not None and state.version != version:
        return None
    if ref in written:
        return [written[ref]]
    parent = ResourceRef.parse(ref)
    return [r for child, r in written.items() if parent.covers(ResourceRef.parse(child))]


def _why_not(record: LineageRecord, gaps: list[str], upstream: Sequence[ReplayStep]) -> str | None:
    step = record.step
    assert step is not None
    if gaps:
        return "; ".join(gaps)
    if step.kind == DAGSTER_ASSET:
        secret = [k for k, v in record.parameters.items() if _holds_redacted(v)]
        if secret:
            return (
                f"its run config held secrets ({', '.join(sorted(secret))}), which were never "
                "recorded"
            )
    elif step.kind == SCRIPT:
        if not step.command_line:
            return "no command line was recorded (the step did not run as a script)"
        if any(REDACTED in part for part in step.command_line):
            return "its command line held a secret, which was never recorded"
        if step.working_folder is None:
            return "the folder it ran in was not recorded, or is outside the workspace"
    else:
        return f"steps of kind {step.kind!r} cannot be replayed"
    if step.git_commit is None and step.code_version is None:
        return (
            "neither a git commit nor a code version was recorded: the code it ran cannot "
            "be recovered"
        )
    stuck = [s.key for s in upstream if not s.replayable]
    if stuck:
        return f"it reads what {', '.join(stuck)} wrote, which cannot be replayed"
    return None


def _holds_redacted(value: Any) -> bool:
    if isinstance(value, str):
        return REDACTED in value
    if isinstance(value, Mapping):
        return any(_holds_redacted(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_redacted(v) for v in value)
    return False


def _step(
    key: str, group: list[LineageRecord], after: tuple[str, ...], blocked: str | None
) -> ReplayStep:
    first = group[0]
    step = first.step
    assert step is not None
    inputs = sorted({pair for record in group for pair in record.inputs})
    return ReplayStep(
        key=key,
        kind=step.kind,
        name=step.name,
        run_id=step.run_id,
        partition=step.partition,
        outputs=tuple((r.ref, r.version) for r in group if r.version is not None),
        rows={r.ref: r.extra["rows"] for r in group if isinstance(r.extra.get("rows"), int)},
        inputs=tuple(inputs),
        parameters=dict(first.parameters),
        command_line=tuple(step.command_line),
        working_folder=step.working_folder,
        git_commit=step.git_commit,
        code_version=step.code_version,
        after=after,
        blocked=blocked,
    )
