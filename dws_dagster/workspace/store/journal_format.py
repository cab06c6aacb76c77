"""Reading the journal-format files of a workspace written before the database store (dws_dagster
up to commit 60b9e85), for `journal_import` only.

Under `.dataworkspace/`:

- `lineage/journal/NNNNNNNN.jsonl`: the history, one operation per line (`record`, `fail`,
  `claim`, `forget`, `reset`); `lineage/current.json`: the fold of the journal up to a
  position (segment, byte offset), so the current lineage is that fold plus the tail after it.
- `snapshots/index.json` (tags, message, time, metrics, results copies) and
  `snapshots/<hash>.json`, each snapshot's manifest (every ref's state).
- `openlineage/outbox/journal/NNNNNNNN.jsonl`: every OpenLineage event spooled, one per line;
  `openlineage/outbox/state.json`: the delivery position (the end of the last event sent)
  and the delivery counters.

Everything read is untrusted input and goes through the checks the journal store made
(`shapes`/`formats`), raising `WorkspaceConfigError` naming the file. A torn last line of a
journal segment (a crash in the middle of an append) is ignored, as the journal readers did.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace import shapes

#: The folders of `.dataworkspace/` the journal format kept (moved away once imported).
LINEAGE_DIR = Path("lineage")
SNAPSHOTS_DIR = Path("snapshots")
OUTBOX_DIR = Path("openlineage") / "outbox"
FOLDERS = (LINEAGE_DIR, SNAPSHOTS_DIR, OUTBOX_DIR)

_RESTORE = "restore it from git or a backup"
_RESTORE_LINEAGE = (
    "restore the lineage folder from git or a backup (or move that line out of the file)"
)


def segments(journal_dir: Path) -> list[tuple[int, Path]]:
    """The segments of a journal folder (`NNNNNNNN.jsonl`), in order."""
    if not journal_dir.is_dir():
        return []
    found = []
    for entry in os.scandir(journal_dir):
        stem, dot, ext = entry.name.partition(".")
        if dot and ext == "jsonl" and stem.isdigit():
            found.append((int(stem), journal_dir / entry.name))
    return sorted(found)


def has_journal_files(meta_dir: Path) -> bool:
    """Whether `meta_dir` holds anything of the journal format (a few stat calls when not)."""
    lineage, snaps, outbox = (meta_dir / folder for folder in FOLDERS)
    if lineage.is_dir() and ((lineage / "current.json").exists() or segments(lineage / "journal")):
        return True
    if snaps.is_dir() and any(name.endswith(".json") for name in os.listdir(snaps)):
        return True
    return outbox.is_dir() and (
        (outbox / "state.json").exists() or bool(segments(outbox / "journal"))
    )


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(start, end, line) for each complete non-blank line of `path`; a torn last line (no
    newline: a crash in the middle of an append) is left out."""
    data = path.read_bytes()
    whole = data.rfind(b"\n") + 1
    start = 0
    while start < whole:
        stop = data.index(b"\n", start) + 1
        if data[start:stop].strip():
            yield start, stop, data[start:stop]
        start = stop


def _read_json(path: Path, what: str) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise WorkspaceConfigError(f"{what} {path} is not valid JSON ({exc}); {_RESTORE}") from None


# ------------------------------------------------------------------------------ lineage


@dataclass
class LineageFiles:
    """`current.json` (None when missing) and where its fold ends in the journal."""

    current: dict[str, Any] | None
    position: tuple[int, int]
    current_path: Path
    journal_dir: Path

    def history(self) -> Iterator[tuple[Path, list[tuple[bool, dict[str, Any]]]]]:
        """Each segment's checked operations, oldest first: (path, [(in the tail after
        current.json's position, op)])."""
        for number, path in segments(self.journal_dir):
            lines = list(_lines(path))
            ops: list[Any] = []
            for start, _stop, line in lines:
                try:
                    ops.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    raise WorkspaceConfigError(
                        f"lineage journal {path} is corrupt at byte {start}: not valid JSON; "
                        f"{_RESTORE_LINEAGE}"
                    ) from None

            def where(index: int, lines: list[tuple[int, int, bytes]] = lines) -> str:
                return f"byte {lines[index][0]} (line {index + 1})"

            checked = shapes.check_ops(ops, path, where)
            in_tail = self._tail_test(number, path, lines)
            yield (
                path,
                [
                    (in_tail(start), op)
                    for (start, _stop, _line), op in zip(lines, checked, strict=True)
                ],
            )

    def _tail_test(
        self, number: int, path: Path, lines: list[tuple[int, int, bytes]]
    ) -> Callable[[int], bool]:
        """Whether the line starting at a byte of segment `number` comes after `current.json`'s
        position (the fold replays it)."""
        segment, offset = self.position
        if number != segment:
            return lambda _start: number > segment
        if offset and not any(stop == offset for _start, stop, _line in lines):
            raise WorkspaceConfigError(
                f"current lineage {self.current_path} is corrupt: position: byte {offset} of "
                f"{path} is not the end of an operation; {_RESTORE}"
            )
        return lambda start: start >= offset


def read_lineage(meta_dir: Path) -> LineageFiles:
    folder = meta_dir / LINEAGE_DIR
    path = folder / "current.json"
    current = None
    position = (1, 0)
    if path.exists():
        data = shapes.checked(
            "current", _read_json(path, "current lineage"), path, what="current lineage"
        )
        current = shapes.check_states(data["refs"], path, what="current lineage")
        position = (data["position"]["segment"], data["position"]["offset"])
    return LineageFiles(current, position, path, folder / "journal")


def fold(
    state: dict[str, dict[str, Any]], op: dict[str, Any], manifest: Callable[[str], dict[str, Any]]
) -> None:
    """Apply one operation to `state` ({ref: RefState JSON}) exactly as the journal store did;
    `manifest(hash)` gives a snapshot's refs (for `reset`)."""
    kind = op["op"]
    if kind == "record":
        record = op["record"]
        step = record.get("step") or {}
        if step.get("kind", "observation") == "observation":
            owner = (state.get(record["ref"]) or {}).get("owner")
        else:
            owner = step.get("name")
        state[record["ref"]] = {"owner": owner, "record": record}
    elif kind == "fail":
        record = op["record"]
        before = state.get(record["ref"]) or {}
        state[record["ref"]] = {
            "owner": (record.get("step") or {}).get("name", before.get("owner")),
            "record": before.get("record"),
            "attempt": record,
            "unknown": bool(op.get("unknown")),
        }
    elif kind == "claim":
        before = state.get(op["ref"]) or {}
        if before.get("owner") is None:
            state[op["ref"]] = {**before, "owner": op["step"]}
    elif kind == "forget":
        state.pop(op["ref"], None)
    elif kind == "reset":
        refs = manifest(op["snapshot"])
        state.clear()
        state.update({ref: dict(value) for ref, value in refs.items()})
        for ref in op.get("unknown", ()):
            if ref in state:
                state[ref]["unknown"] = True


# ---------------------------------------------------------------------------- snapshots


def read_index(meta_dir: Path) -> list[dict[str, Any]]:
    """The snapshot index's entries, oldest first (none when there is no index)."""
    path = meta_dir / SNAPSHOTS_DIR / "index.json"
    if not path.exists():
        return []
    data = shapes.checked("index", _read_json(path, "snapshot index"), path, what="snapshot index")
    seen: dict[str, int] = {}
    for number, entry in enumerate(data["snapshots"]):
        for name in (entry["hash"], *entry.get("tags", ())):
            if seen.setdefault(name, number) != number:
                raise WorkspaceConfigError(
                    f"snapshot index {path} is corrupt: snapshots[{number}]: {name!r} also "
                    f"names snapshots[{seen[name]}]; {_RESTORE}, or remove one of them"
                )
    return list(data["snapshots"])


def read_manifest(meta_dir: Path, snapshot_hash: str) -> dict[str, Any]:
    """A snapshot manifest's refs, checked as the journal store checked them."""
    if not shapes.is_snapshot_hash(snapshot_hash):  # checked before it names a file
        raise WorkspaceConfigError(
            f"{snapshot_hash!r} is not a snapshot hash (32 lowercase hex digits), so it names "
            f"no manifest; {_RESTORE}"
        )
    path = meta_dir / SNAPSHOTS_DIR / f"{snapshot_hash}.json"
    advice = f"{_RESTORE}, or remove that snapshot from snapshots/index.json"
    if not path.exists():
        raise WorkspaceConfigError(f"snapshot manifest {path} is missing; {advice}")
    data = shapes.checked(
        "manifest",
        _read_json(path, "snapshot manifest"),
        path,
        what="snapshot manifest",
        advice=advice,
    )
    if data["hash"] != snapshot_hash:
        raise WorkspaceConfigError(
            f"snapshot manifest {path} is corrupt: hash: {data['hash']!r} is the wrong hash "
            f"(not the one in its file name); {advice}"
        )
    return shapes.check_states(data["refs"], path, what="snapshot manifest", advice=advice)


# ------------------------------------------------------------------------------- outbox


@dataclass
class OutboxEvent:
    """One spooled event: its line (the JSON text sent, sorted keys as the outbox writes its
    bodies), key, time (`time_key`), and whether it lies past the delivery position."""

    line: bytes
    run_id: str
    event_type: str
    event_time: str
    pending: bool


@dataclass
class OutboxFiles:
    state: dict[str, Any] = field(default_factory=dict)
    events: list[OutboxEvent] = field(default_factory=list)


def _iso_ok(value: Any) -> bool:
    return _parse_time(value) is not None


def _parse_time(value: Any) -> dt.datetime | None:
    """An ISO-8601 time as the outbox read it: a date means its midnight, no zone means UTC."""
    try:
        parsed = dt.datetime.fromisoformat(str(value).strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


def time_key(value: dt.datetime) -> str:
    """An eventTime as `dws_ol_events.event_time` holds it: UTC and fixed width, so comparing
    the text compares the instants (the outbox filters `events(since)` in the database)."""
    return value.astimezone(dt.UTC).isoformat(timespec="microseconds")


def read_outbox(meta_dir: Path, *, max_time: int, max_type: int) -> OutboxFiles:
    """The outbox's delivery state and every event spooled, in spool order, each marked pending
    when it lies past the delivery position (as the journal outbox's delivery read them).
    `max_time`, `max_type`: the longest eventTime and eventType the tables hold."""
    folder = meta_dir / OUTBOX_DIR
    state_path = folder / "state.json"
    found = OutboxFiles()
    position = (1, 0)
    advice = (
        "restore it from a backup, or delete it to send every archived event again "
        "(catalogs ignore duplicates)"
    )
    if state_path.exists():
        state = shapes.checked(
            "outbox state",
            _read_json(state_path, "outbox state"),
            state_path,
            what="outbox state",
            advice=advice,
        )
        for name in ("next_attempt_at", "last_error_at", "last_delivery_at"):
            value = state.get(name)
            if value is not None and (not _iso_ok(value) or len(value) > max_time):
                raise WorkspaceConfigError(
                    f"outbox state {state_path} is corrupt: {name}: {value[:40]!r} is not an "
                    f"ISO time; {advice}"
                )
        found.state = state
        position = (state["position"]["segment"], state["position"]["offset"])
    seen: set[tuple[str, str]] = set()
    for number, path in segments(folder / "journal"):
        for start, stop, line in _lines(path):
            event = _event(line, path, start, max_time=max_time, max_type=max_type)
            if number == position[0] and start < position[1] < stop:
                raise WorkspaceConfigError(
                    f"outbox state {state_path} is corrupt: position: byte {position[1]} of "
                    f"{path} is inside an event; {advice}"
                )
            key = (event.run_id, event.event_type)
            if key in seen:  # the outbox never spooled a key twice: keep the first
                continue
            seen.add(key)
            event.pending = (number, stop) > position
            found.events.append(event)
    return found


def _event(line: bytes, path: Path, start: int, *, max_time: int, max_type: int) -> OutboxEvent:
    """A journal line checked as the outbox checked events before spooling them."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        event = None
    where = f"outbox journal {path} is corrupt at byte {start}"
    advice = "move that line out of the file (or restore the file from a backup)"
    if not isinstance(event, dict):
        raise WorkspaceConfigError(f"{where} (not a JSON object); {advice}")
    run = event.get("run")
    run_id = run.get("runId") if isinstance(run, dict) else None
    kind, when = event.get("eventType"), _parse_time(event.get("eventTime"))
    problems = [
        name
        for name, ok in (
            ("run.runId", isinstance(run_id, str) and run_id),
            ("eventType", isinstance(kind, str) and kind and len(kind) <= max_type),
            (
                "eventTime",
                isinstance(event.get("eventTime"), str)
                and when is not None
                and len(time_key(when)) <= max_time,
            ),
        )
        if not ok
    ]
    if problems or when is None:
        raise WorkspaceConfigError(
            f"{where}: missing or invalid {', '.join(problems)} (an OpenLineage RunEvent has "
            f"run.runId, eventType and an ISO-8601 eventTime); {advice}"
        )
    return OutboxEvent(line.rstrip(b"\r\n"), str(run_id), str(kind), time_key(when), False)
