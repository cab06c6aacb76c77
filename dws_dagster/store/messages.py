"""What the lineage store tells people when it refuses something or finds a ref in trouble:
which rule a step broke, what happened to a failed or unknown ref, and how to bring it back.

In one module because the same explanations reach users by several ways (a step refused, the
`status` command, a snapshot restore), and each should read the same wherever it is shown.
"""

from __future__ import annotations

from pathlib import Path

from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.refs import ResourceRef, as_ref
from dws_dagster.workspace.versions import short


def conflict_message(step: str, ref: ResourceRef, clashes: list[tuple[str, str]]) -> str:
    """The refusal of the one-writer rule: `step` may not write `ref`, which overlaps refs
    other steps write (`clashes`: (ref, owner) pairs)."""
    parts = []
    for other, owner in clashes:
        relation = (
            "the same ref"
            if other == str(ref)
            else "which contains it"
            if as_ref(other).covers(ref)
            else "inside it"
        )
        parts.append(f"step '{owner}' writes {other} ({relation})")
    return (
        f"step '{step}' may not write ref {ref}: {'; '.join(parts)}. Two steps writing one "
        "ref, or nested refs, would make its lineage ambiguous: give this output its own "
        f"subpath, or hand the ref over with 'dws-dagster forget {clashes[0][0]}'"
    )


def recovery_advice(ref: str, owner: str | None) -> str:
    """How to bring back a ref whose data may not match its lineage: its step re-run, or for
    source data (no step writes it) a new observation of the data as it is."""
    if owner is not None:
        return f"re-run its step '{owner}' to rewrite {ref}"
    return (
        f"it is source data (no step writes it): once its data is what steps should read, "
        f"record that as its lineage with 'dws-dagster observe {ref}' "
        "(LineageStore.observe_source)"
    )


def attention_note(ref: str, state: RefState) -> str:
    """What happened to a `failed` or `unknown` ref and how to bring it back (`status`, and
    the refusal to read an unknown ref)."""
    good = f" {short(state.version)}" if state.version else ""
    attempt = state.attempt
    if state.unknown and (state.owner is None or attempt is None):
        # Only a restore marks a source unknown (a source has no step to fail), and a failed
        # step always leaves its attempt.
        return (
            f"a snapshot restore could not bring back its version{good}, so its data may "
            f"not match its lineage (marked unknown); {recovery_advice(ref, state.owner)}"
        )
    attempt = attempt or {}
    writer = (attempt.get("step") or {}).get("name") or state.owner
    when = attempt.get("end_time") or attempt.get("start_time") or "an earlier run"
    if state.unknown:
        last = f" (its last good version was{good})" if good else ""
        return (
            f"its data may be partial after step '{writer}' failed ({when}){last}; re-run "
            f"'{writer}' to rewrite {ref}"
        )
    kept = f"; version{good} is still the one read" if good else ""
    return f"step '{writer}' failed ({when}){kept}; re-run '{writer}' to bring {ref} up to date"


def unknown_message(step: str, ref: str, state: RefState) -> str:
    """The refusal to let `step` read `ref`, whose data may be partial."""
    return (
        f"step '{step}' may not read ref {ref}: {attention_note(ref, state)}, then re-run '{step}'"
    )


def too_deep(where: Path | str, exc: Exception) -> str:
    """The message for lineage that cannot be encoded: values nested deeper than JSON encoding
    allows (orjson stops at 255 levels) can only come from an edited store or file."""
    return (
        f"the lineage in {where} holds a record whose parameters, metrics or extra "
        f"values nest too deeply to be written again ({exc}); restore it from a backup"
    )
