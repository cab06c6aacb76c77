"""The lineage store: an append-only journal folded into the current lineage of every ref.

Layout under `.dataworkspace/lineage/`:

- `journal/NNNNNNNN.jsonl`: one JSON operation per line (`claim`, `record`, `fail`, `forget`,
  `reset`), appended under `lock` and fsynced. Appending costs the same whatever the number of
  refs; a torn last line (a crash mid-append) is ignored by readers and cut by the next writer.
- `current.json`: the fold of the journal up to a position, rewritten atomically now and then
  (compaction) so that readers replay only a short tail. Compaction starts a new segment; older
  segments stay as the history of every record.

Readers take no lock: they see `current.json` whole (atomic rename) and complete journal lines.
"""

from __future__ import annotations

import bisect
import gc
import os
import threading
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from filelock import FileLock

from ..errors import (
    DwsError,
    LineageConflictError,
    LineageConsistencyError,
    UnknownRefStateError,
    WorkspaceConfigError,
)
from . import shapes
from .digests import key_digest, pack_position, unpack_position
from .files import (
    WorkspaceWriteError,
    append_durably,
    atomic_write_bytes,
    fsync_dir,
    fsync_file,
    held,
    journal_segments,
    parse_json,
    segment_path,
)
from .records import LineageRecord, StepInfo, now_iso
from .refs import ResourceRef, as_ref
from .versions import short

if TYPE_CHECKING:
    from .config import Workspace

STORE_FORMAT = 1
LOCK_TIMEOUT_SECONDS = 120.0
#: Compact when the journal tail holds more operations than this, or than the number of refs.
COMPACT_MIN_OPS = 2000
#: A replay of more operations than this re-sorts the refs once instead of inserting each.
_BULK_OPS = 64


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building large acyclic structures (parsed
    JSON, rows): each of its collections walks the objects built so far, which made opening a
    store of 100,000 refs cost more than ten times one of 10,000. Parsed JSON forms no
    reference cycles, so pausing leaves no garbage behind.

    On resuming, what was built goes straight to the oldest generation (`gc.freeze()` then
    `gc.unfreeze()`, when nothing else is frozen) rather than being walked by the next young
    collection, which took a sixth of a lineage query's time.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


class GcSparesOlderObjects:
    """Keeps what exists on entry, and what survives each batch of a long pass
    (`spare_survivors()`), out of the cyclic garbage collector's collections until exit
    (`gc.freeze()`; `gc.unfreeze()` on exit). Does nothing when the collector is off or
    something else froze objects.

    The lineage sensor's tick keeps batches of Dagster records alive for a while, which
    promoted them to the oldest generation, so a full collection came every other batch and
    walked the whole process (Dagster's definitions, the store's indexes): a quarter of a
    tick. Freezing is a constant-time list splice; young collections still run, so cycles made
    and dropped within a batch are freed as before, and frozen objects are still freed by
    reference counting. Pausing the collector for the whole tick instead saved no more time
    and let a 20-second tick's cycles pile up (peak RSS 210 → 330 MB at 100,000
    materializations).
    """

    def __init__(self) -> None:
        self._owned = False

    def __enter__(self) -> GcSparesOlderObjects:
        self._owned = gc.isenabled() and not gc.get_freeze_count()
        if self._owned:
            gc.freeze()
        return self

    def spare_survivors(self) -> None:
        """Spare what exists now too (call between batches)."""
        if self._owned:
            gc.freeze()

    def __exit__(self, *_exc: object) -> None:
        if self._owned:
            gc.unfreeze()
            self._owned = False


class StoreLockError(DwsError):
    """The workspace store's lock could not be taken in time."""


@dataclass(slots=True)
class RefState:
    """The current lineage of one ref.

    `record` is the last good materialization; `attempt` a failed attempt made after it;
    `unknown` means the failed attempt may have left partial data, so the ref must be rewritten
    before anything reads it. `owner` is the step that writes the ref (rule (a)).
    """

    owner: str | None = None
    record: dict[str, Any] | None = None
    attempt: dict[str, Any] | None = None
    unknown: bool = False

    @property
    def status(self) -> str:
        if self.unknown:
            return "unknown"
        if self.attempt is not None:
            return "failed"
        if self.record is not None:
            return "ok" if self.owner is not None else "source"
        return "pending"

    @property
    def version(self) -> str | None:
        return None if self.record is None else self.record.get("version")

    @property
    def latest(self) -> dict[str, Any] | None:
        """The most recent record: the failed attempt if there is one, else the good one."""
        return self.attempt if self.attempt is not None else self.record

    def lineage_record(self) -> LineageRecord | None:
        return None if self.record is None else LineageRecord.from_json(self.record)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"owner": self.owner, "record": self.record}
        if self.attempt is not None:
            data["attempt"] = self.attempt
        if self.unknown:
            data["unknown"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RefState:
        # Positional: a third faster than keywords, and a store holds one per ref.
        return cls(data.get("owner"), data.get("record"), data.get("attempt"),
                   bool(data.get("unknown", False)))


@dataclass(frozen=True)
class InputCheck:
    """What `LineageStore.check_inputs` found: the provenance closure, and drift warnings."""

    provenance: dict[str, str]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Observed:
    """What `LineageStore.observe_source` did: the version recorded for `ref`, whether that was
    new (`recorded`), and whether the ref was `unknown` before."""

    ref: str
    version: str
    recorded: bool
    was_unknown: bool


class LineageStore:
    """Current lineage of a workspace's refs, shared safely by many processes."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.dir = workspace.meta_dir / "lineage"
        self.journal_dir = self.dir / "journal"
        self.current_path = self.dir / "current.json"
        self.checked_path = self.dir / "current.checked"
        self._lock = FileLock(str(self.dir / "lock"), timeout=LOCK_TIMEOUT_SECONDS)
        #: This thread's hold of the lock: its depth, and whether the state was refreshed
        #: since it was taken (nobody else can append until it is released).
        self._hold = threading.local()
        self._refs: dict[str, RefState] = {}
        #: `_refs` keys in order, or None until needed (rebuilt after a long replay).
        self._sorted: list[str] | None = []
        self._segment = 1
        self._offset = 0
        self._tail_ops = 0
        self._loaded = False
        #: Whether this process appended operations it did not read back through the format's
        #: check (its own records): then lineage written whole is checked before it is vouched
        #: for (`note_checked`).
        self._unchecked = False
        #: Where in the journal the good record of each (ref, version) is (segment, byte
        #: offset), once needed: records are read back on demand, so memory does not grow
        #: with the history (a sensor catching up with 40,000 runs held every record before).
        # key_digest(ref, version) -> packed journal position of every good record, so past
        # records are found without keeping them in memory.
        self._by_version: dict[int, int] | None = None
        #: Journal segments appended to without fsync, inside `deferred_sync()`.
        self._unsynced: set[Path] | None = None

    @contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """Appends inside the block are fsynced once, when it ends, instead of one by one: the
        lineage sensor applies a batch of events this way and moves its cursor only after the
        block, so a crash before the sync just re-applies (idempotently) the same events. Other
        processes see the appended lines at once, as before."""
        if self._unsynced is not None:  # nested: the outer block syncs
            yield
            return
        self._unsynced = set()
        try:
            yield
        finally:
            pending, self._unsynced = self._unsynced, None
            for path in sorted(pending):
                if path.exists():
                    fsync_file(path)

    # ------------------------------------------------------------------ locking

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's inter-process lock (re-entrant within one store object and thread:
        a nested hold costs no system call)."""
        hold = self._hold
        if getattr(hold, "depth", 0):
            hold.depth += 1
            try:
                yield
            finally:
                hold.depth -= 1
            return
        with held(self._lock, folder=self.journal_dir, on_timeout=lambda: StoreLockError(
                f"could not lock the lineage store {self.dir} within {LOCK_TIMEOUT_SECONDS:.0f} "
                "s: another process holds it; wait for it, or remove the lock file if that "
                "process is gone")):
            hold.depth, hold.fresh = 1, False
            try:
                yield
            finally:
                hold.depth, hold.fresh = 0, False

    # ------------------------------------------------------------------ reading

    def refresh(self) -> None:
        """Bring the in-memory state up to date with what other processes wrote."""
        hold = self._hold
        if getattr(hold, "fresh", False):
            return  # refreshed under the lock this thread still holds: nothing can have changed
        if not self._loaded:
            with gc_paused():
                self._load_compacted()
                self._read_tail()
        else:
            self._read_tail()
        if getattr(hold, "depth", 0):
            hold.fresh = True

    def _load_compacted(self) -> None:
        self._refs = {}
        self._segment, self._offset, self._tail_ops = 1, 0, 0
        found = read_identified(self.current_path, what="current lineage")
        self._unchecked = False
        if found is not None:
            data, identity = found
            shell = shapes.checked("current", data, self.current_path,
                                  what="current lineage")
            refs = shell["refs"] if checked_before(self.checked_path, identity) else \
                shapes.check_states(shell["refs"], self.current_path, what="current lineage")
            self._segment = shell["position"]["segment"]
            self._offset = shell["position"]["offset"]
            self._refs = {ref: RefState.from_json(state) for ref, state in refs.items()}
        self._sorted = None
        self._loaded = True

    def states_checked(self, states: dict[str, Any]) -> bool:
        """Whether `states` (ref states as JSON, about to be written whole: `current.json`, a
        manifest) are surely of the format: without a check when every state this store holds
        was read through one (no operation appended by this process since)."""
        if not self._unchecked:
            return True
        ok = shapes.states_ok(states)
        self._unchecked = not ok
        return ok

    def _segment_path(self, number: int) -> Path:
        return segment_path(self.journal_dir, number)

    def _segments(self) -> list[int]:
        return journal_segments(self.journal_dir)

    def _read_tail(self) -> None:
        try:
            unchanged = self._segment_path(self._segment).stat().st_size == self._offset
        except FileNotFoundError:
            unchanged = self._offset == 0
        if unchanged and not self._segment_path(self._segment + 1).exists():
            return  # the common case, in two stat calls
        with gc_paused():
            self._read_segments()

    def _read_segments(self) -> None:
        for number in [n for n in self._segments() if n >= self._segment]:
            if number > self._segment:
                self._segment, self._offset = number, 0
            path = self._segment_path(number)
            with open(path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
            end = data.rfind(b"\n") + 1
            if not end:
                continue
            ops = parse_journal(data[:end], path, self._offset)
            if len(ops) > _BULK_OPS:
                self._sorted = None  # sorting once beats inserting each new ref in order
            for op in ops:
                self._apply(op)
            if self._by_version is not None:
                _index_records(self._by_version, ops, data[:end], number, self._offset)
            self._tail_ops += len(ops)
            self._offset += end

    @property
    def _sorted_refs(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self._refs)
        return self._sorted

    def _set(self, ref: str, state: RefState) -> None:
        if ref not in self._refs and self._sorted is not None:
            bisect.insort(self._sorted, ref)
        self._refs[ref] = state

    def _apply(self, op: dict[str, Any]) -> None:
        kind = op.get("op")
        if kind == "record":  # by far the most common: kept lean, a store replays thousands
            record = op["record"]
            ref = record["ref"]
            step = record.get("step") or {}
            if step.get("kind", "observation") == "observation":
                previous = self._refs.get(ref)
                owner = previous.owner if previous is not None else None
            else:
                owner = step.get("name")
            self._set(ref, RefState(owner, record))
        elif kind == "fail":
            record = op["record"]
            state = self._refs.get(record["ref"]) or RefState()
            self._set(record["ref"], RefState(
                owner=(record.get("step") or {}).get("name", state.owner), record=state.record,
                attempt=record, unknown=bool(op.get("unknown"))))
        elif kind == "claim":
            state = self._refs.get(op["ref"]) or RefState()
            if state.owner is None:
                self._set(op["ref"], RefState(owner=op["step"], record=state.record,
                                              attempt=state.attempt, unknown=state.unknown))
        elif kind == "forget":
            if self._refs.pop(op["ref"], None) is not None and self._sorted is not None:
                self._sorted.remove(op["ref"])
        elif kind == "reset":
            manifest = read_snapshot_manifest(self.workspace, op["snapshot"])
            self._refs = {ref: RefState.from_json(state)
                          for ref, state in manifest["refs"].items()}
            for ref in op.get("unknown", ()):
                if ref in self._refs:
                    self._refs[ref].unknown = True
            self._sorted = None
        else:
            raise WorkspaceConfigError(
                f"journal under {self.journal_dir} holds an operation {kind!r} this version of "
                "dws_dagster does not know; upgrade dws_dagster"
            )

    def get(self, ref: ResourceRef | str) -> RefState | None:
        self.refresh()
        return self._refs.get(str(ref))

    def items(self) -> list[tuple[str, RefState]]:
        """Every ref with lineage, sorted by ref."""
        self.refresh()
        return [(ref, self._refs[ref]) for ref in self._sorted_refs]

    def state(self) -> dict[str, RefState]:
        self.refresh()
        return dict(self._refs)

    def overlapping(self, ref: ResourceRef) -> list[str]:
        """Refs with lineage that are `ref`, contain it, or lie inside it."""
        self.refresh()
        found = [str(a) for a in ref.ancestors() if str(a) in self._refs]
        text = str(ref)
        if text in self._refs:
            found.append(text)
        prefix = text + "/"
        start = bisect.bisect_left(self._sorted_refs, prefix)
        for candidate in self._sorted_refs[start:]:
            if not candidate.startswith(prefix):
                break
            found.append(candidate)
        return found

    def find_record(self, ref: ResourceRef | str, version: str) -> dict[str, Any] | None:
        """The good record that produced `ref@version`: the current one, else from history."""
        state = self.get(ref)
        if state is not None and state.record is not None and state.version == version:
            return state.record
        key = (str(ref), version)
        digest = key_digest(*key)
        if self._by_version is None:  # built once, then kept up to date as the journal grows
            self._index_history()
        assert self._by_version is not None
        where = self._by_version.get(digest)
        record = self._record_at(where, key) if where is not None else None
        if where is not None and record is None:  # the journal was replaced meanwhile
            self._index_history()
            where = self._by_version.get(digest)
            record = self._record_at(where, key) if where is not None else None
        return record

    def _index_history(self) -> None:
        index: dict[int, int] = {}
        with gc_paused():
            for number in self._segments():
                path = self._segment_path(number)
                with open(path, "rb") as handle:
                    data = handle.read()
                data = data[: data.rfind(b"\n") + 1]
                # Not checked here: this only notes where records are, and each is checked
                # when read back (`_record_at`); checking the whole history cost a snapshot of
                # 10,000 refs a tenth of its time.
                _index_records(index, parse_journal(data, path, 0, check=False), data, number,
                               0)
        self._by_version = index

    def _record_at(self, where: int, key: tuple[str, str | None]) -> dict[str, Any] | None:
        """The record at a packed journal position, if it still is the one for `key`."""
        segment, offset = unpack_position(where)
        try:
            with open(self._segment_path(segment), "rb") as handle:
                handle.seek(offset)
                op = orjson.loads(handle.readline())
        except (OSError, orjson.JSONDecodeError):
            return None
        record = op.get("record") if isinstance(op, dict) and op.get("op") == "record" else None
        if record is None or not shapes.record_ok(record) \
                or (record.get("ref"), record.get("version")) != key:
            return None
        return record

    def history(self) -> Iterator[dict[str, Any]]:
        """Every operation of the journal, oldest first (complete lines only)."""
        for number in self._segments():
            path = self._segment_path(number)
            with open(path, "rb") as handle:
                data = handle.read()
            yield from parse_journal(data[: data.rfind(b"\n") + 1], path, 0)

    # ------------------------------------------------------------------ writing

    def _append(self, ops: list[dict[str, Any]]) -> None:
        """Append operations durably; the caller holds the lock and has refreshed."""
        if not ops:
            return
        number = self._segment
        if self._segment_path(number + 1).exists():
            # A compaction this process has not read: cannot happen under the lock after a
            # refresh, so checked with one stat rather than by listing the journal per append.
            number = max(self._segments()[-1], number)
        payload = b"".join(orjson.dumps(op) + b"\n" for op in ops)
        path = self._segment_path(number)
        append_durably(path, payload, valid_bytes=self._offset if number == self._segment
                       else None, sync=self._unsynced is None)
        if self._unsynced is not None:
            self._unsynced.add(path)
        if number == self._segment:  # the file now ends with `payload`: apply it as read back
            written = parse_journal(payload, path, self._offset, check=False)
            self._unchecked = True
            for op in written:
                self._apply(op)
            if self._by_version is not None:
                _index_records(self._by_version, written, payload, number, self._offset)
            self._offset += len(payload)
            self._tail_ops += len(ops)
        else:
            self._read_tail()
        if self._tail_ops >= max(COMPACT_MIN_OPS, len(self._refs)):
            try:
                self.compact()
            except WorkspaceWriteError:
                # The operations are in the journal already; folding it is only a speed-up,
                # tried again on a later append once the disk has room.
                pass

    def compact(self) -> None:
        """Fold the journal into `current.json` and start a new journal segment."""
        with self.locked():
            self.refresh()
            next_segment = self._segment + 1
            refs = {ref: self._refs[ref].to_json() for ref in self._sorted_refs}
            try:  # encoded before anything is written: a refusal leaves the files as they are
                body = orjson.dumps({
                    "format": STORE_FORMAT,
                    "position": {"segment": next_segment, "offset": 0},
                    "refs": refs,
                })
            except orjson.JSONEncodeError as exc:
                raise WorkspaceConfigError(too_deep(self.dir, exc)) from None
            self._segment_path(next_segment).touch()
            fsync_dir(self.journal_dir)
            atomic_write_bytes(self.current_path, body)
            note_checked(self.current_path, self.checked_path, self.states_checked(refs))
            self._segment, self._offset, self._tail_ops = next_segment, 0, 0

    # ------------------------------------------------------------------ rules

    def conflicts(self, step: str, ref: ResourceRef) -> list[tuple[str, str]]:
        """(ref, owner) of refs that overlap `ref` and belong to another step (rule (a))."""
        found = []
        for other in self.overlapping(ref):
            owner = self._refs[other].owner
            if owner is not None and owner != step:
                found.append((other, owner))
        return found

    def _refuse_conflicts(self, step: str, ref: ResourceRef) -> None:
        clashes = self.conflicts(step, ref)
        if clashes:
            raise LineageConflictError(conflict_message(step, ref, clashes))

    def _refuse_writer_conflicts(self, record: LineageRecord) -> None:
        """Rule (a) for a record about to be written (observations have no writer)."""
        if record.step is not None and record.step.kind != "observation":
            self._refuse_conflicts(record.step.name, as_ref(record.ref))

    def claim(self, step: str, refs: Iterable[ResourceRef | str]) -> None:
        """Make `step` the writer of `refs`, or refuse with LineageConflictError (rule (a)).
        All or nothing: one ref refused, none is claimed."""
        self.begin_step(step, claims=refs)

    def begin_step(self, step: str, *, claims: Iterable[ResourceRef | str] = (),
                   inputs: Collection[tuple[ResourceRef | str, str]] = (),
                   observe: Iterable[tuple[ResourceRef | str, str]] = (),
                   outputs: Iterable[ResourceRef | str] = (), lock: bool = False
                   ) -> InputCheck:
        """Check a step, then claim its outputs and observe its source inputs: all or nothing.

        Every ref of `claims` is checked against other steps (rule (a)) and every input of
        `inputs` for unknown state and mixed versions (rule (b), as `check_inputs`; `outputs`
        are refs the step claimed before). Only when all passed are the claims and the
        observations of `observe` (source data no step writes, at a version the store has not
        seen) appended, in one append under the lock: a step refused for one ref leaves no
        claim that would block the steps writing its other refs, and no step can claim a ref
        between the check and the claim.

        With nothing to write (a step run again) the lock is not taken, unless `lock`: a writer
        about to write data then learns before touching it that the store cannot be written
        (a read-only or full disk).
        """
        wanted = list(dict.fromkeys(as_ref(ref) for ref in claims))
        seen = {str(as_ref(ref)): version for ref, version in observe}
        self.refresh()
        if not lock and not self._step_ops(step, wanted, seen):
            # Nothing to write (a step run again): the checks need no lock, as before a claim.
            return self._check_step(step, wanted, inputs, outputs)
        with self.locked():
            self.refresh()
            check = self._check_step(step, wanted, inputs, outputs)
            self._append(self._step_ops(step, wanted, seen))
        return check

    def _check_step(self, step: str, claims: list[ResourceRef],
                    inputs: Collection[tuple[ResourceRef | str, str]],
                    outputs: Iterable[ResourceRef | str]) -> InputCheck:
        for ref in claims:
            self._refuse_conflicts(step, ref)
        return self.check_inputs(step, inputs, outputs=[*outputs, *claims]) if inputs \
            else InputCheck({})

    def _step_ops(self, step: str, claims: list[ResourceRef],
                  observe: dict[str, str]) -> list[dict[str, Any]]:
        """The claims not on record yet, and the observations of source data at a version
        not seen before (refs claimed now are not sources)."""
        ops: list[dict[str, Any]] = [
            {"op": "claim", "ref": str(ref), "step": step, "at": now_iso()}
            for ref in claims
            if (state := self._refs.get(str(ref))) is None or state.owner is None]
        claimed = {str(ref) for ref in claims}
        for key, version in observe.items():
            state = self._refs.get(key)
            if key not in claimed and (state is None or (
                    state.owner is None and state.version != version)):
                ops.append(_observation_op(key, version))
        return ops

    def check_inputs(self, step: str, inputs: Collection[tuple[ResourceRef | str, str]],
                     *, outputs: Iterable[ResourceRef | str] = ()) -> InputCheck:
        """Provenance closure of a step's inputs, refusing unknown refs and mixed versions.

        Raises UnknownRefStateError for an input whose data may be partial, and
        LineageConsistencyError (rule (b)) when the inputs carry two versions of one ref.
        """
        self.refresh()
        own = [as_ref(ref) for ref in outputs]
        carriers: dict[str, dict[str, list[str]]] = {}
        warnings: list[str] = []
        for raw_ref, version in inputs:
            ref = as_ref(raw_ref)
            key = str(ref)
            state = self._refs.get(key)
            if state is not None and state.unknown:
                raise UnknownRefStateError(_unknown_message(step, key, state))
            closure = {key: version}
            record = self.find_record(key, version) if state is not None else None
            if record is not None:
                closure.update(record.get("provenance", {}))
            elif state is not None and state.version is not None and not _is_source(state):
                warnings.append(
                    f"input {key} is at version {short(version)}, but its lineage says "
                    f"{short(state.version)} (written by step '{state.owner}'): the data changed "
                    "outside any recorded step; re-run that step to bring its lineage back"
                )
            for dep_ref, dep_version in closure.items():
                if any(o.overlaps(as_ref(dep_ref)) for o in own):
                    continue
                carriers.setdefault(dep_ref, {}).setdefault(dep_version, []).append(key)
        direct = {str(as_ref(ref)): version for ref, version in inputs}
        for dep_ref, versions in carriers.items():
            if len(versions) > 1:
                raise LineageConsistencyError(
                    self._consistency_message(step, dep_ref, versions, direct.get(dep_ref)))
        provenance = {ref: next(iter(versions)) for ref, versions in sorted(carriers.items())}
        return InputCheck(provenance, warnings)

    def _consistency_message(self, step: str, ref: str, versions: dict[str, list[str]],
                             read_directly: str | None) -> str:
        state = self._refs.get(ref)
        # The version read directly is the data as it is now; else trust the lineage.
        current = read_directly or (state.version if state is not None else None)
        described = "; ".join(
            f"{short(v)}{' (current)' if v == current else ''} through input(s) "
            f"{', '.join(sorted(set(carriers)))}" for v, carriers in versions.items())
        stale_steps: list[str] = []
        for version, carriers in versions.items():
            if version == current:
                continue
            for carrier in carriers:
                for name in self._steps_built_from(carrier, ref, version, set()):
                    if name not in stale_steps:
                        stale_steps.append(name)
        if current is not None and stale_steps:
            advice = (f"re-run, in this order, {', '.join(repr(s) for s in stale_steps)} so that "
                      f"they read {ref}@{short(current)}, then re-run '{step}'")
        else:
            advice = (f"re-run the steps that read an older version of {ref} so every input is "
                      f"built from the same version, then re-run '{step}'")
        return (f"step '{step}' would read two versions of ref {ref}: {described}. Mixing "
                f"versions of one input is refused; {advice}")

    def _steps_built_from(self, ref: str, stale_ref: str, stale_version: str,
                          seen: set[str]) -> list[str]:
        """Steps between `stale_ref@stale_version` and `ref`, upstream first."""
        state = self._refs.get(ref)
        if ref in seen or state is None or state.record is None:
            return []
        seen.add(ref)
        record = state.record
        if record.get("provenance", {}).get(stale_ref) != stale_version:
            return []
        steps: list[str] = []
        for item in record.get("inputs", ()):
            for name in self._steps_built_from(item["ref"], stale_ref, stale_version, seen):
                if name not in steps:
                    steps.append(name)
        name = (record.get("step") or {}).get("name")
        if name and name not in steps:
            steps.append(name)
        return steps

    # ------------------------------------------------------------------ recording

    def commit(self, records: Iterable[LineageRecord]) -> list[LineageRecord]:
        """Record good materializations; a record equal to the current one is not written twice.

        Rule (a) is checked again under the lock, so a writer that skipped `claim` cannot
        overwrite another step's ref.
        """
        wanted = list(records)
        with self.locked():
            self.refresh()
            ops = []
            for record in wanted:
                self._refuse_writer_conflicts(record)
                data = record.to_json()
                state = self._refs.get(record.ref)
                if state is not None and state.record == data and state.attempt is None:
                    continue
                ops.append({"op": "record", "record": data})
            self._append(ops)
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
        with self.locked():
            self.refresh()
            state = self._refs.get(record.ref)
            current = state.record if state is not None else None
            if current == data:
                return False
            known = self.find_record(record.ref, record.version) if record.version else None
            if known is not None and (known.get("step") or {}).get("run_id") == run_id:
                same_run_is_current = (
                    state is not None and state.attempt is None and current is not None
                    and current.get("version") == record.version
                    and (current.get("step") or {}).get("run_id") == run_id)
                if not same_run_is_current:
                    return False
            elif current is not None and (current.get("end_time") or "") > \
                    (record.end_time or ""):
                return False
            self._refuse_writer_conflicts(record)
            self._append([{"op": "record", "record": data}])
            return True

    def apply_failure(self, record: LineageRecord, *, unknown: bool = False) -> bool:
        """Record a failed attempt found after the fact (a run that failed or was cancelled
        before materializing a planned asset); True if it was new. Skipped when that run's
        attempt is already recorded, the run did materialize the ref, or a later good record
        exists — so replays add nothing and the last good lineage is always kept."""
        run_id = record.step.run_id if record.step is not None else None
        with self.locked():
            self.refresh()
            state = self._refs.get(record.ref)
            if state is not None:
                for seen in (state.attempt, state.record):
                    if seen is not None and (seen.get("step") or {}).get("run_id") == run_id:
                        return False
                good_end = (state.record or {}).get("end_time") or ""
                if good_end and good_end > (record.end_time or record.start_time or ""):
                    return False
            self._append([{"op": "fail", "record": record.to_json(), "unknown": unknown}])
            return True

    def observe(self, ref: ResourceRef | str, version: str,
                extra: dict[str, Any] | None = None, *, at: str | None = None,
                recover: bool = False) -> bool:
        """Record the version of data no step wrote (source data); False if already known.

        `recover`: the data was versioned just now (not an event replayed from the past), so
        it also clears `unknown` when the version is the one on record.
        """
        key = str(as_ref(ref))
        with self.locked():
            self.refresh()
            state = self._refs.get(key)
            if state is not None and state.owner is not None:
                return False  # a step writes this ref: drift is reported, not adopted
            if state is not None and state.version == version \
                    and not (recover and state.unknown):
                return False
            self._append([_observation_op(key, version, extra, at)])
            return True

    def observe_source(self, ref: ResourceRef | str, version: str | None = None, *,
                       extra: dict[str, Any] | None = None) -> Observed:
        """Record source data's version now as its lineage, clearing `unknown` (what
        `dws-dagster observe REF` does): the way back for a source ref a partial restore could
        not bring back, once its data is what steps should read.

        `version` defaults to the local data's version now. Refused (LineageConflictError) for
        a ref a step writes: only re-running that step rewrites its data and lineage.
        """
        key = str(self.workspace.check_ref(as_ref(ref)))
        self._refuse_owned(key)  # before hashing the data, which may take long
        if version is None:
            version = self._version_now(key)
        with self.locked():
            state = self._refuse_owned(key)
            recorded = self.observe(key, version, extra, recover=True)
            return Observed(ref=key, version=version, recorded=recorded,
                            was_unknown=state is not None and state.unknown)

    def _refuse_owned(self, ref: str) -> RefState | None:
        state = self.get(ref)
        if state is not None and state.owner is not None:
            raise LineageConflictError(
                f"ref {ref} is written by step '{state.owner}', so its lineage comes from that "
                f"step, not from an observation: re-run '{state.owner}' to rewrite {ref} and "
                f"its lineage{' (that clears unknown)' if state.unknown else ''}")
        return state

    def _version_now(self, ref: str) -> str:
        from .config import RemoteDataError

        try:
            return self.workspace.version_of(ref)
        except RemoteDataError:
            raise RemoteDataError(
                f"ref {ref} lives in remote resource '{as_ref(ref).name}': its version cannot "
                "be read from here; observe it through its Dagster source asset "
                "(dws_source_asset), or pass the version it has now"
            ) from None

    def fail(self, records: Iterable[LineageRecord], unknown: Iterable[str] = ()) -> None:
        """Record failed attempts; the last good record stays, `unknown` refs become unreadable."""
        partial = {str(as_ref(ref)) for ref in unknown}
        with self.locked():
            self.refresh()
            self._append([{"op": "fail", "record": record.to_json(),
                           "unknown": record.ref in partial} for record in records])

    def forget(self, ref: ResourceRef | str) -> bool:
        """Drop a ref's lineage (and its owner), e.g. to hand the ref to another step."""
        key = str(as_ref(ref))
        with self.locked():
            self.refresh()
            if key not in self._refs:
                return False
            self._append([{"op": "forget", "ref": key, "at": now_iso()}])
            return True

    def reset(self, snapshot_hash: str, unknown: Iterable[str] = ()) -> None:
        """Make a snapshot's lineage the current lineage (restore), then compact."""
        with self.locked():
            self.refresh()
            self._append([{"op": "reset", "snapshot": snapshot_hash,
                           "unknown": sorted(set(unknown)), "at": now_iso()}])
            self.compact()


# ------------------------------------------------ files written whole and checked once
#
# `current.json` and snapshot manifests hold every ref's lineage: checking 10,000 refs costs
# about as much as parsing them, on every command. So when the store writes one of them from
# lineage known to be checked, it notes the file's identity beside it (`<name>.checked`: device,
# inode, size, modification and change times); a reader finding that very file skips the check.
# Any other copy (edited by hand, cloned, restored from a backup, replaced) has another inode
# or change time, which no one can set, so it is checked in full.


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def read_identified(path: Path, *, what: str) -> tuple[Any, list[int]] | None:
    """The parsed JSON of `path` and the identity of the file read (None if it is missing)."""
    try:
        with open(path, "rb") as handle:
            identity = _identity(os.fstat(handle.fileno()))
            raw = handle.read()
    except FileNotFoundError:
        return None
    return parse_json(raw, path, what=what), identity


def checked_before(sidecar: Path, identity: list[int]) -> bool:
    try:
        return bool(orjson.loads(sidecar.read_bytes()) == identity)
    except (OSError, orjson.JSONDecodeError):
        return False


def note_checked(path: Path, sidecar: Path, ok: bool) -> None:
    """Note that `path`, just written, holds checked lineage (`ok`), or forget any such note."""
    try:
        sidecar.unlink(missing_ok=True)
        if ok:
            atomic_write_bytes(sidecar, orjson.dumps(_identity(path.stat())), durable=False)
    except OSError:
        pass  # then the next reader checks the file in full


def _index_records(index: dict[int, int],
                   ops: list[dict[str, Any]], data: bytes, segment: int, base: int) -> None:
    """Note where each good record of `ops` (parsed from `data`, read from `segment` at byte
    `base`) lies: `parse_journal` keeps one operation per non-blank line, in order. Operations
    may be unchecked: what is not a record of the expected shape is left out."""
    starts, position = [], 0
    for line in data.split(b"\n")[:-1]:
        if line.strip():
            starts.append(position)
        position += len(line) + 1
    for op, start in zip(ops, starts, strict=True):
        record = op.get("record") if type(op) is dict and op.get("op") == "record" else None
        if type(record) is dict and type(ref := record.get("ref")) is str \
                and type(version := record.get("version")) in (str, type(None)):
            index[key_digest(ref, version)] = pack_position(segment, base + start)


def parse_journal(data: bytes, path: Path, offset: int, *, check: bool = True
                  ) -> list[dict[str, Any]]:
    """The operations in `data`, complete JSON lines read from `path` at byte `offset`,
    checked against the journal's format (`formats.JournalOp`) unless `check` is False (lines
    this process just wrote).

    One `orjson.loads` over the lines joined as an array: parsing line by line costs more
    than the parsing itself when a store of many refs is opened. A corrupt line is then looked
    for line by line, to name where it is.
    """
    def where(index: int) -> str:
        return _line_of(data, offset, index)

    ops: list[Any]
    try:  # JSON strings hold no raw newline, so each one can only separate two lines
        ops = orjson.loads(b"[" + data.rstrip(b"\r\n").replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:  # a corrupt or blank line: find it line by line
        lines = [line for line in data.split(b"\n") if line.strip()]
        ops = []
        for index, line in enumerate(lines):
            try:
                ops.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                raise WorkspaceConfigError(
                    f"lineage journal {path} is corrupt at {where(index)}: not valid JSON; "
                    "restore the lineage folder from git or a backup (or move that line out "
                    "of the file)") from None
    return shapes.check_ops(ops, path, where) if check else ops


def _line_of(data: bytes, offset: int, index: int) -> str:
    """Where the `index`-th non-blank line of `data` (read at byte `offset`) starts."""
    position = 0
    seen = -1
    for line in data.split(b"\n"):
        if line.strip():
            seen += 1
            if seen == index:
                break
        position += len(line) + 1
    return f"byte {offset + position} (line {index + 1} of the unread tail)"


def _is_source(state: RefState) -> bool:
    return state.owner is None


def conflict_message(step: str, ref: ResourceRef, clashes: list[tuple[str, str]]) -> str:
    parts = []
    for other, owner in clashes:
        relation = ("the same ref" if other == str(ref)
                    else "which contains it" if as_ref(other).covers(ref) else "inside it")
        parts.append(f"step '{owner}' writes {other} ({relation})")
    return (f"step '{step}' may not write ref {ref}: {'; '.join(parts)}. Two steps writing one "
            "ref, or nested refs, would make its lineage ambiguous: give this output its own "
            f"subpath, or hand the ref over with 'dws-dagster forget {clashes[0][0]}'")


def _observation_op(ref: str, version: str, extra: dict[str, Any] | None = None,
                    at: str | None = None) -> dict[str, Any]:
    record = LineageRecord(ref=ref, version=version,
                           step=StepInfo(name="observation", kind="observation"),
                           start_time=at or now_iso(), end_time=at or now_iso(),
                           extra=extra or {})
    return {"op": "record", "record": record.to_json()}


def recovery_advice(ref: str, owner: str | None) -> str:
    """How to bring back a ref whose data may not match its lineage: its step re-run, or for
    source data (no step writes it) a new observation of the data as it is."""
    if owner is not None:
        return f"re-run its step '{owner}' to rewrite {ref}"
    return (f"it is source data (no step writes it): once its data is what steps should read, "
            f"record that as its lineage with 'dws-dagster observe {ref}' "
            "(LineageStore.observe_source)")


def attention_note(ref: str, state: RefState) -> str:
    """What happened to a `failed` or `unknown` ref and how to bring it back (`status`, and
    the refusal to read an unknown ref)."""
    good = f" {short(state.version)}" if state.version else ""
    attempt = state.attempt
    if state.unknown and (state.owner is None or attempt is None):
        # Only a restore marks a source unknown (a source has no step to fail), and a failed
        # step always leaves its attempt.
        return (f"a snapshot restore could not bring back its version{good}, so its data may "
                f"not match its lineage (marked unknown); {recovery_advice(ref, state.owner)}")
    attempt = attempt or {}
    writer = (attempt.get("step") or {}).get("name") or state.owner
    when = attempt.get("end_time") or attempt.get("start_time") or "an earlier run"
    if state.unknown:
        last = f" (its last good version was{good})" if good else ""
        return (f"its data may be partial after step '{writer}' failed ({when}){last}; re-run "
                f"'{writer}' to rewrite {ref}")
    kept = f"; version{good} is still the one read" if good else ""
    return f"step '{writer}' failed ({when}){kept}; re-run '{writer}' to bring {ref} up to date"


def _unknown_message(step: str, ref: str, state: RefState) -> str:
    return (f"step '{step}' may not read ref {ref}: {attention_note(ref, state)}, then "
            f"re-run '{step}'")


def too_deep(where: Path, exc: Exception) -> str:
    """The message for lineage that cannot be encoded again: values nested deeper than JSON
    encoding allows (orjson stops at 255 levels) can only come from an edited file."""
    return (f"the lineage under {where} holds a record whose parameters, metrics or extra "
            f"values nest too deeply to be written again ({exc}); restore the lineage folder "
            "from git or a backup")


def snapshot_manifest_path(workspace: Workspace, snapshot_hash: str) -> Path:
    return workspace.meta_dir / "snapshots" / f"{snapshot_hash}.json"


def read_snapshot_manifest(workspace: Workspace, snapshot_hash: str) -> dict[str, Any]:
    """Load a snapshot manifest, checking its format and that its content matches its
    hash-named file (the hash is checked before it becomes a file name)."""
    if not shapes.is_snapshot_hash(snapshot_hash):
        raise WorkspaceConfigError(
            f"{snapshot_hash!r} is not a snapshot hash (32 lowercase hex digits), so it names "
            "no manifest; restore the snapshot index or lineage journal that holds it from git "
            "or a backup")
    path = snapshot_manifest_path(workspace, snapshot_hash)
    with gc_paused():
        found = read_identified(path, what="snapshot manifest")
    if found is None:
        raise WorkspaceConfigError(f"snapshot manifest {path} is missing; restore it from git "
                                   "or a backup, or delete the snapshot")
    data, identity = found
    advice = "restore it from git or a backup, or delete the snapshot"
    shell = shapes.checked("manifest", data, path, what="snapshot manifest",
                          advice=advice)
    if shell["hash"] != snapshot_hash:
        raise WorkspaceConfigError(
            f"snapshot manifest {path} is corrupt: hash: {shell['hash']!r} is the wrong hash "
            f"(not the one in its file name); {advice}")
    if not checked_before(manifest_checked_path(path), identity):
        shapes.check_states(shell["refs"], path, what="snapshot manifest", advice=advice)
    return data


def manifest_checked_path(manifest: Path) -> Path:
    return manifest.with_name(manifest.stem + ".checked")
