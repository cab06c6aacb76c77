"""The workspace's guarantees about one ref, as verdicts: its data is the version its lineage
says (no drift), the inputs it was built from are consistent now (one version of every ref
across their provenance, none `unknown`), and, when a replay of a snapshot replayed it, it was
reproduced. The dws asset checks (`dws_dagster/checks/`) report these for each bound asset,
and the words and what-to-run are those `dws-dagster status --verify` prints for the same ref:
the data verification and the notes come from `status_rows` and `status_report`, not a second
implementation.

Nothing here imports Dagster: a verdict is plain data, its `metadata` plain JSON values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dws_dagster.errors import LineageConsistencyError, UnknownRefStateError
from dws_dagster.replay.record import latest_verdict
from dws_dagster.replay.run import REPRODUCED
from dws_dagster.snapshots.file_hashes import FileHashCache
from dws_dagster.store.messages import attention_note
from dws_dagster.views.status.ref_rows import MISSING, UNCHECKED, ref_row, verify_row
from dws_dagster.views.status.summary import StatusReport
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.versions import short

#: How a data check found the version on disk.
CACHED, FULL = "cached", "full"


@dataclass(frozen=True)
class Verdict:
    """One guarantee about `ref`: `passed`, a sentence saying what was found (`description`),
    the versions compared (`recorded` by the lineage, `found`), what to run when it failed
    (`to_run`, one line a command), and details as plain JSON values. `warn_only`: the check
    could not tell (data it cannot read here), so it never blocks."""

    ref: str
    passed: bool
    description: str
    recorded: str | None = None
    found: str | None = None
    to_run: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    warn_only: bool = False


def _no_lineage(ref: str, what: str) -> Verdict:
    return Verdict(
        ref,
        False,
        f"{ref} has no lineage yet, so there is nothing to compare: materialize {what} first",
        to_run=(f"materialize {what}",),
    )


def data_verdict(ws: Workspace, ref: str, *, what: str, full: bool = False) -> Verdict:
    """Whether the data of `ref` is the version its lineage says. By default the bytes of
    files unchanged since they were last hashed are not read again (the machine's stat-keyed
    hash cache, kept up to date here); `full` re-reads every byte, as `status --verify`.
    `what` names the asset (or step) for the advice."""
    state = ws.store.get(ref)
    if state is None or (state.record is None and not state.unknown):
        return _no_lineage(ref, what)
    row = ref_row(ref, state)
    hashes = None if full else FileHashCache.of_workspace(ws.meta_dir)
    verify_row(ws, row, hashes=hashes)
    if hashes is not None:
        hashes.save()
    report = StatusReport([row], verified=True)
    problems = [p for p in report.problems if p.kind != "failed"]
    recorded, found = row["version"], row.get("found", row["version"])
    details = {"data": row["data"], "how": FULL if full else CACHED, "status": row["status"]}
    if row["data"] == UNCHECKED:
        return Verdict(
            ref,
            False,
            f"{ref} could not be verified here (remote data, or data this process cannot "
            "read); 'dws-dagster status --verify' on a machine that reads it tells",
            recorded=recorded,
            details=details,
            warn_only=True,
        )
    if row["data"] == MISSING:
        found = None
    if problems:
        return Verdict(
            ref,
            False,
            f"{ref}: {problems[0].note}",
            recorded=recorded,
            found=found,
            to_run=tuple(report.to_run()),
            details=details,
        )
    note = ""
    if row["status"] == "failed":  # the data is the last good version, which is still read
        note = f" (its last attempt failed: {row.get('attention', '')})"
    return Verdict(
        ref,
        True,
        f"the data of {ref} is version {short(recorded)}, the one its lineage says{note}",
        recorded=recorded,
        found=found,
        details=details,
    )


def inputs_verdict(ws: Workspace, ref: str, *, what: str) -> Verdict:
    """Whether the inputs `ref` was built from are consistent as they are now: none of them
    `unknown` (partial after a failed step), and one version of every ref across their
    provenance (what the step would be refused, were it run again now, by the one-version
    rule). Inputs changed since they were read are listed (the ref is stale, not wrong)."""
    state = ws.store.get(ref)
    if state is None or state.record is None:
        return _no_lineage(ref, what)
    record = state.record
    step = (record.get("step") or {}).get("name") or state.owner or what
    inputs = [(item["ref"], item["version"]) for item in record.get("inputs", ())]
    now = {name: ws.store.get(name) for name, _ in inputs}
    rows, current = [], []
    for name, read in inputs:
        found = now[name]
        version = found.version if found is not None and found.version else read
        current.append((name, version))
        rows.append({"ref": name, "read": read, "now": version, "changed": version != read})
    details: dict[str, Any] = {"inputs": rows}
    changed = [row["ref"] for row in rows if row["changed"]]
    for name, _ in inputs:
        found = now[name]
        if found is not None and found.unknown:
            return Verdict(
                ref,
                False,
                f"input {name} of {ref} may be partial: {attention_note(name, found)}",
                to_run=(_rerun(found.owner, name), f"then re-run '{step}'"),
                details=details,
            )
    try:
        ws.store.check_inputs(step, current, outputs=[ref])
    except (LineageConsistencyError, UnknownRefStateError) as exc:
        return Verdict(ref, False, str(exc), to_run=(_advice(str(exc)),), details=details)
    stale = (
        f"; {len(changed)} changed since '{step}' read them ({', '.join(changed)}): re-run "
        f"'{step}' to bring {ref} up to date"
        if changed
        else ""
    )
    count = len(inputs)
    return Verdict(
        ref,
        True,
        f"the {count} input{'s' if count != 1 else ''} of {ref} hold one version of every "
        f"ref across their provenance, none unknown{stale}",
        details=details,
    )


def _rerun(owner: str | None, ref: str) -> str:
    return f"re-run '{owner}' to rewrite {ref}" if owner else f"restore or rewrite {ref}"


def _advice(message: str) -> str:
    """The advice of a refusal (`re-run, in this order, ...`), which its message ends with."""
    _, _, advice = message.rpartition("; ")
    return advice or message


def reproduced_verdict(ws: Workspace, ref: str) -> Verdict | None:
    """The verdict of the newest kept replay of a snapshot that replayed `ref` (None: no replay
    did): passed when it was reproduced."""
    found = latest_verdict(ws, ref)
    if found is None:
        return None
    replay, verdict = found
    outcome = verdict["verdict"]
    name = replay["snapshot_name"] or replay["snapshot"][:12]
    prefix = replay["snapshot"][:12]
    details: dict[str, Any] = {
        "snapshot": replay["snapshot"],
        "replayed_at": replay["replayed_at"],
        "verdict": outcome,
    }
    if verdict.get("columns"):
        details["columns"] = list(verdict["columns"])
    state = ws.store.get(ref)
    since = ""
    if state is not None and state.version and state.version != verdict["recorded"]:
        since = (
            f"; the data changed since that snapshot (now {short(state.version)}): replay "
            "a newer snapshot to check this version"
        )
    detail = f" ({verdict['detail']})" if verdict.get("detail") else ""
    text = (
        f"replay of snapshot {name} ({replay['replayed_at']}): {ref} {outcome}{detail}; "
        f"recorded {short(verdict['recorded'])}, replayed {short(verdict['reproduced'])}{since}"
    )
    to_run: tuple[str, ...] = ()
    if outcome != REPRODUCED:
        to_run = (
            f"dws-dagster lineage {ref} --snapshot {prefix} (what the replay found), then "
            f"dws-dagster replay {prefix} {ref} once the step is fixed",
        )
    return Verdict(
        ref,
        outcome == REPRODUCED,
        text,
        recorded=verdict["recorded"],
        found=verdict["reproduced"],
        to_run=to_run,
        details=details,
    )
