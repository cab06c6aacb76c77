"""What the lineage store is for: the changes steps and the lineage sensor make (claim,
commit, apply, fail, observe, forget), each checked against the rules and written as one unit.

Every change is one transaction that first takes the workspace's write lock (see `database`
for why one lock and not row locks), checks the rules (`rules`) against what is committed,
writes (`writes`), and commits: a crash at any point leaves the change whole or absent.
Records are content-addressed (`dws_records.digest`), so applying one twice stores it once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from dws_dagster.errors import RemoteDataError
from dws_dagster.store.current import CurrentLineage
from dws_dagster.store.history import History
from dws_dagster.store.ref_state import InputCheck, Observed
from dws_dagster.store.rules import Rules
from dws_dagster.store.transactions import StoreTransactions, StoreWorkspace
from dws_dagster.store.writes import Writes, observation_record
from dws_dagster.workspace.records import LineageRecord, now_iso
from dws_dagster.workspace.refs import ResourceRef, as_ref


class LineageChanges:
    """The changes to a workspace's lineage: each reads through `current` and `history`, is
    checked by `rules` and written by `writes`, in one transaction of `tx`; `workspace` names
    refs and versions source data."""

    def __init__(
        self,
        workspace: StoreWorkspace,
        tx: StoreTransactions,
        current: CurrentLineage,
        history: History,
        rules: Rules,
        writes: Writes,
    ) -> None:
        self._workspace = workspace
        self._tx = tx
        self._current = current
        self._history = history
        self._rules = rules
        self._writes = writes

    # ------------------------------------------------------------------ reading ahead

    def prefetch(self, refs: Iterable[str], records: Iterable[tuple[str, str]] = ()) -> None:
        """Read the states of `refs` and the good records of `records` ((ref, version) pairs)
        into the open transaction, for the store calls it makes next: a batch of the sensor's
        events asks a few queries instead of two per event (each a round trip to PostgreSQL).
        Outside a transaction nothing would keep them: nothing is read."""
        cache = self._tx.cache()
        if cache is None:
            return
        self._current.states_of(list(refs))
        pairs = [
            pair for pair in dict.fromkeys(records) if self._tx.record_memo(*pair) not in cache
        ]
        found = self._history.find_records(pairs)
        cache.update((self._tx.record_memo(*pair), found.get(pair)) for pair in pairs)

    # ------------------------------------------------------------------ steps

    def claim(self, step: str, refs: Iterable[ResourceRef | str]) -> None:
        """Make `step` the writer of `refs`, or refuse with LineageConflictError (the
        one-writer rule).
        All or nothing: one ref refused, none is claimed."""
        self.begin_step(step, claims=refs)

    def begin_step(
        self,
        step: str,
        *,
        claims: Iterable[ResourceRef | str] = (),
        inputs: Collection[tuple[ResourceRef | str, str]] = (),
        observe: Iterable[tuple[ResourceRef | str, str]] = (),
        outputs: Iterable[ResourceRef | str] = (),
        lock: bool = False,
    ) -> InputCheck:
        """Check a step, then claim its outputs and observe its source inputs: all or nothing.

        Every ref of `claims` is checked against other steps (the one-writer rule) and every
        input of `inputs` for unknown state and mixed versions (the one-version rule, as
        `check_inputs`; `outputs` are refs the step claimed before). Only when all passed are
        the claims and the observations of `observe` (source data no step writes, at a version
        the store has not seen) written, in the same transaction as the checks, under the
        workspace's write lock: a step refused for one ref leaves no claim behind, and no step
        on any machine can claim a ref between the check and the claim.

        With nothing to write (a step run again) no lock is taken, unless `lock`: a writer
        about to write data then learns before touching it that the store cannot be written.
        """
        wanted = list(dict.fromkeys(as_ref(ref) for ref in claims))
        seen = {str(as_ref(ref)): version for ref, version in observe}
        outputs = list(outputs)
        if not lock:
            with self._tx.reading():  # one read transaction for every check, not one per query
                # Checked first: the checks read the states the pending writes need.
                check = self._rules.check_step(step, wanted, inputs, outputs)
                if not any(self._pending_step_writes(wanted, seen)):
                    return check
        with self._tx.locked() as connection:
            check = self._rules.check_step(step, wanted, inputs, outputs)
            # () when nothing is left to write (a writer that asked for the lock all the same)
            claims_now, observations = self._pending_step_writes(wanted, seen) or ((), ())
            at = now_iso()
            for ref, _state in claims_now:
                self._writes.put(connection, ref, owner=step)
                self._writes.log(connection, "claim", ref, detail={"step": step}, at=at)
            for ref, version, state in observations:
                self._writes.write_record(connection, observation_record(ref, version), state)
        return check

    def begin_steps(
        self,
        step: str,
        parts: Sequence[tuple[ResourceRef | str, Collection[tuple[ResourceRef | str, str]]]],
    ) -> list[InputCheck]:
        """`begin_step` for each (claim, inputs) of `parts`, in one transaction under the write
        lock: the partitions of a range written in one step, each checked with its own inputs
        as one step per partition would be, claimed all or none (one partition refused, none
        is claimed)."""
        wanted = list(dict.fromkeys(as_ref(ref) for ref, _ in parts))
        with self._tx.locked() as connection:
            checks = [
                self._rules.check_step(step, [as_ref(ref)], inputs, ()) for ref, inputs in parts
            ]
            claims_now, _ = self._pending_step_writes(wanted, {})
            at = now_iso()
            for ref, _state in claims_now:
                self._writes.put(connection, ref, owner=step)
                self._writes.log(connection, "claim", ref, detail={"step": step}, at=at)
        return checks

    def _pending_step_writes(self, claims: list[ResourceRef], observe: dict[str, str]) -> Any:
        """The claims not on record yet, and the observations of source data at a version not
        seen before (refs claimed now are not sources)."""
        states = self._current.states_of([str(ref) for ref in claims] + list(observe))
        claims_now = [
            (str(ref), states.get(str(ref)))
            for ref in claims
            if (state := states.get(str(ref))) is None or state.owner is None
        ]
        claimed = {str(ref) for ref in claims}
        observations = [
            (key, version, states.get(key))
            for key, version in observe.items()
            if key not in claimed
            and (
                (state := states.get(key)) is None
                or (state.owner is None and state.version != version)
            )
        ]
        return claims_now, observations

    # ------------------------------------------------------------------ recording

    def commit(self, records: Iterable[LineageRecord]) -> list[LineageRecord]:
        """Record good materializations; a record equal to the current one is not written
        twice. The one-writer rule is checked again in the same transaction, so a writer that
        skipped `claim` cannot overwrite another step's ref."""
        wanted = list(records)
        with self._tx.locked() as connection:
            for record in wanted:
                self._rules.refuse_writer_conflicts(record)
                data = record.to_json()
                state = self._current.get(record.ref)
                if state is not None and state.record == data and state.attempt is None:
                    continue
                self._writes.write_record(connection, data, state)
        return wanted

    def apply(self, record: LineageRecord) -> bool:
        """Apply a materialization recorded elsewhere (the lineage sensor replaying the event
        log); True if it changed the lineage.

        Idempotent and never a step back: a record its writer already committed is skipped,
        unless it enriches the current record of the same run (results metrics); a record the
        store never saw (a store rebuilt from the event log) is applied only if it is not older
        than the current one, so replaying old events cannot undo later runs or a restore.
        """
        data = record.to_json()
        run_id = record.step.run_id if record.step is not None else None
        with self._tx.locked() as connection:
            state = self._current.get(record.ref)
            current = state.record if state is not None else None
            if current == data:
                return False
            known = (
                self._history.find_record(record.ref, record.version) if record.version else None
            )
            if known is not None and (known.get("step") or {}).get("run_id") == run_id:
                same_run_is_current = (
                    state is not None
                    and state.attempt is None
                    and current is not None
                    and current.get("version") == record.version
                    and (current.get("step") or {}).get("run_id") == run_id
                )
                if not same_run_is_current:
                    return False
            elif current is not None and (current.get("end_time") or "") > (record.end_time or ""):
                return False
            self._rules.refuse_writer_conflicts(record)
            self._writes.write_record(connection, data, state)
            return True

    def apply_failure(self, record: LineageRecord, *, unknown: bool = False) -> bool:
        """Record a failed attempt found after the fact (a run that failed or was cancelled
        before materializing a planned asset); True if it was new. Skipped when that run's
        attempt is already recorded, the run did materialize the ref, or a later good record
        exists — so replays add nothing and the last good lineage is always kept."""
        run_id = record.step.run_id if record.step is not None else None
        with self._tx.locked() as connection:
            state = self._current.get(record.ref)
            if state is not None:
                for seen in (state.attempt, state.record):
                    if seen is not None and (seen.get("step") or {}).get("run_id") == run_id:
                        return False
                good_end = (state.record or {}).get("end_time") or ""
                if good_end and good_end > (record.end_time or record.start_time or ""):
                    return False
            self._writes.write_failure(connection, record.to_json(), state, unknown)
            return True

    def observe(
        self,
        ref: ResourceRef | str,
        version: str,
        extra: dict[str, Any] | None = None,
        *,
        at: str | None = None,
        recover: bool = False,
    ) -> bool:
        """Record the version of data no step wrote (source data); False if already known.

        `recover`: the data was versioned just now (not an event replayed from the past), so
        it also clears `unknown` when the version is the one on record.
        """
        key = str(as_ref(ref))
        with self._tx.locked() as connection:
            state = self._current.get(key)
            if state is not None and state.owner is not None:
                return False  # a step writes this ref: drift is reported, not adopted
            if state is not None and state.version == version and not (recover and state.unknown):
                return False
            self._writes.write_record(
                connection, observation_record(key, version, extra, at), state
            )
            return True

    def observe_source(
        self,
        ref: ResourceRef | str,
        version: str | None = None,
        *,
        extra: dict[str, Any] | None = None,
    ) -> Observed:
        """Record source data's version now as its lineage, clearing `unknown` (what
        `dws-dagster observe REF` does): the way back for a source ref a partial restore could
        not bring back, once its data is what steps should read.

        `version` defaults to the local data's version now. Refused (LineageConflictError) for
        a ref a step writes: only re-running that step rewrites its data and lineage.
        """
        key = str(self._workspace.check_ref(as_ref(ref)))
        self._rules.refuse_owned(key)  # before hashing the data, which may take long
        if version is None:
            version = self._version_now(key)
        with self._tx.locked():
            state = self._rules.refuse_owned(key)
            recorded = self.observe(key, version, extra, recover=True)
            return Observed(
                ref=key,
                version=version,
                recorded=recorded,
                was_unknown=state is not None and state.unknown,
            )

    def _version_now(self, ref: str) -> str:
        try:
            return self._workspace.version_of(ref)
        except RemoteDataError:
            raise RemoteDataError(
                f"ref {ref} lives in remote resource '{as_ref(ref).name}': its version cannot "
                "be read from here; observe it through its Dagster source asset "
                "(dws_source_asset), or pass the version it has now"
            ) from None

    def fail(self, records: Iterable[LineageRecord], unknown: Iterable[str] = ()) -> None:
        """Record failed attempts; the last good record stays, `unknown` refs become unreadable."""
        partial = {str(as_ref(ref)) for ref in unknown}
        with self._tx.locked() as connection:
            for record in records:
                self._writes.write_failure(
                    connection,
                    record.to_json(),
                    self._current.get(record.ref),
                    record.ref in partial,
                )

    def forget(self, ref: ResourceRef | str) -> bool:
        """Drop a ref's lineage (and its owner), e.g. to hand the ref to another step."""
        with self._tx.locked() as connection:
            return self._writes.delete_ref(connection, str(as_ref(ref)))
