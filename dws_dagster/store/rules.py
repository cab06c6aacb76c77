"""The rules a step must pass before it writes or reads, checked against committed lineage.

- The one-writer rule: no two steps write the same ref or refs nested in one another, so every
  ref's lineage names one step (`conflicts`).
- The one-version rule: no step reads two versions of one input, directly or through the
  provenance of its other inputs (`check_inputs`).
- No step reads a ref whose data may be partial (`unknown`), and no observation replaces the
  lineage of a ref a step writes.

Only checks, which raise the refusal a user sees (its wording in `messages`): the changes
(`changes`) run them in the same transaction as their writes, under the write lock, so no
step on any machine can slip in between a check and the write it allows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from dws_dagster.errors import LineageConflictError, LineageConsistencyError, UnknownRefStateError
from dws_dagster.store.current import CurrentLineage
from dws_dagster.store.history import History
from dws_dagster.store.messages import conflict_message, unknown_message
from dws_dagster.store.ref_state import InputCheck, RefState
from dws_dagster.store.transactions import StoreTransactions
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.refs import ResourceRef, as_ref
from dws_dagster.workspace.versions import short


class Rules:
    """The rules, checked against the current lineage and its history."""

    def __init__(self, tx: StoreTransactions, current: CurrentLineage, history: History) -> None:
        self._tx = tx
        self._current = current
        self._history = history

    def conflicts(self, step: str, ref: ResourceRef) -> list[tuple[str, str]]:
        """(ref, owner) of refs that overlap `ref` and belong to another step (the
        one-writer rule)."""
        return [
            (other, owner)
            for other, owner in self._current.overlapping_owners(ref)
            if owner is not None and owner != step
        ]

    def refuse_conflicts(self, step: str, ref: ResourceRef) -> None:
        clashes = self.conflicts(step, ref)
        if clashes:
            raise LineageConflictError(conflict_message(step, ref, clashes))

    def refuse_writer_conflicts(self, record: LineageRecord) -> None:
        """The one-writer rule for a record about to be written (observations have no writer)."""
        if record.step is not None and record.step.kind != "observation":
            self.refuse_conflicts(record.step.name, as_ref(record.ref))

    def check_step(
        self,
        step: str,
        claims: list[ResourceRef],
        inputs: Collection[tuple[ResourceRef | str, str]],
        outputs: Iterable[ResourceRef | str],
    ) -> InputCheck:
        for ref in claims:
            self.refuse_conflicts(step, ref)
        return (
            self.check_inputs(step, inputs, outputs=[*outputs, *claims])
            if inputs
            else InputCheck({})
        )

    def check_inputs(
        self,
        step: str,
        inputs: Collection[tuple[ResourceRef | str, str]],
        *,
        outputs: Iterable[ResourceRef | str] = (),
    ) -> InputCheck:
        """Provenance closure of a step's inputs, refusing unknown refs and mixed versions.

        Raises UnknownRefStateError for an input whose data may be partial, and
        LineageConsistencyError (the one-version rule) when the inputs carry two versions of one
        ref.
        """
        own = [as_ref(ref) for ref in outputs]
        carriers: dict[str, dict[str, list[str]]] = {}
        warnings: list[str] = []
        pairs = [(as_ref(raw_ref), version) for raw_ref, version in inputs]
        with self._tx.reading():
            states = self._current.states_of([str(ref) for ref, _version in pairs])
            for ref, version in pairs:
                key = str(ref)
                state = states.get(key)
                if state is not None and state.unknown:
                    raise UnknownRefStateError(unknown_message(step, key, state))
                closure = {key: version}
                record = None
                if state is not None:
                    record = (
                        state.record
                        if state.version == version
                        else self._history.find_record(key, version)
                    )
                if record is not None:
                    closure.update(record.get("provenance", {}))
                elif state is not None and state.version is not None and state.owner is not None:
                    warnings.append(
                        f"input {key} is at version {short(version)}, but its lineage says "
                        f"{short(state.version)} (written by step '{state.owner}'): the data "
                        "changed outside any recorded step; re-run that step to bring its "
                        "lineage back"
                    )
                for dep_ref, dep_version in closure.items():
                    if any(o.overlaps(as_ref(dep_ref)) for o in own):
                        continue
                    carriers.setdefault(dep_ref, {}).setdefault(dep_version, []).append(key)
            direct = {str(ref): version for ref, version in pairs}
            for dep_ref, versions in carriers.items():
                if len(versions) > 1:
                    raise LineageConsistencyError(
                        self._consistency_message(step, dep_ref, versions, direct.get(dep_ref))
                    )
        provenance = {ref: next(iter(versions)) for ref, versions in sorted(carriers.items())}
        return InputCheck(provenance, warnings)

    def _consistency_message(
        self, step: str, ref: str, versions: dict[str, list[str]], read_directly: str | None
    ) -> str:
        state = self._current.get(ref)
        # The version read directly is the data as it is now; else trust the lineage.
        current = read_directly or (state.version if state is not None else None)
        described = "; ".join(
            f"{short(v)}{' (current)' if v == current else ''} through input(s) "
            f"{', '.join(sorted(set(carriers)))}"
            for v, carriers in versions.items()
        )
        stale_steps: list[str] = []
        for version, carriers in versions.items():
            if version == current:
                continue
            for carrier in carriers:
                for name in self._steps_built_from(carrier, ref, version, set()):
                    if name not in stale_steps:
                        stale_steps.append(name)
        if current is not None and stale_steps:
            advice = (
                f"re-run, in this order, {', '.join(repr(s) for s in stale_steps)} so that "
                f"they read {ref}@{short(current)}, then re-run '{step}'"
            )
        else:
            advice = (
                f"re-run the steps that read an older version of {ref} so every input is "
                f"built from the same version, then re-run '{step}'"
            )
        return (
            f"step '{step}' would read two versions of ref {ref}: {described}. Mixing "
            f"versions of one input is refused; {advice}"
        )

    def _steps_built_from(
        self, ref: str, stale_ref: str, stale_version: str, seen: set[str]
    ) -> list[str]:
        """Steps between `stale_ref@stale_version` and `ref`, upstream first."""
        if ref in seen:
            return []
        seen.add(ref)
        state = self._current.get(ref)
        if state is None or state.record is None:
            return []
        record = state.record
        if record.get("provenance", {}).get(stale_ref) != stale_version:
            return []
        steps: list[str] = []
        for item in record.get("inputs", ()):
            for name in self._steps_built_from(item["ref"], stale_ref, stale_version, seen):
                if name not in steps:
                    steps.append(name)
        own = (record.get("step") or {}).get("name")
        if own and own not in steps:
            steps.append(own)
        return steps

    def refuse_owned(self, ref: str) -> RefState | None:
        state = self._current.get(ref)
        if state is not None and state.owner is not None:
            raise LineageConflictError(
                f"ref {ref} is written by step '{state.owner}', so its lineage comes from that "
                f"step, not from an observation: re-run '{state.owner}' to rewrite {ref} and "
                f"its lineage{' (that clears unknown)' if state.unknown else ''}"
            )
        return state
