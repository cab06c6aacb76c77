"""The upgrade from the journal format: a workspace whose lineage, snapshots and OpenLineage
outbox are files under `.dataworkspace/` (dws_dagster up to commit 60b9e85) is imported into
the workspace store the first time it is opened (`LineageStore.workspace_id` calls
`import_journal_files`), with nothing to run by hand.

- **All or nothing.** Every file is read and checked (`journal_format`) and written in ONE write
  transaction, which also sets `dws_workspaces.imported`. A corrupt file raises a
  `WorkspaceConfigError` naming it and nothing is imported; a crash before the commit leaves
  the store as it was, and the next open imports again.
- **Once.** The transaction takes the workspace's write lock and reads `imported` first, so
  processes opening the workspace together import it once; the others find it done.
- **Then the files move** to `.dataworkspace/journal-imported/` (kept as a backup, never read
  again). A crash between the commit and the move is finished by the next open: it finds
  `imported` set and only moves what is left.
- **Faithful.** The whole history goes to `dws_operations` in journal order with every record
  in `dws_records` (so `find_record` finds every past good record); the current lineage is what
  the journal store folded: `current.json` plus the journal tail after its position. Records are
  stored exactly as `LineageStore._record_id` stores them (same body and digest), so a record
  written again later is recognised. Snapshots keep their hash, order and tags' order; the
  outbox's events past the delivery position stay pending, the others are delivered.

A store that already holds lineage of this workspace but no import is refused, so two histories
are never merged silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson
import xxhash
from sqlalchemy import String, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace.files import fsync_dir
from dws_dagster.workspace.records import identity_digest, now_iso
from dws_dagster.workspace.redaction import get_logger
from dws_dagster.workspace.store import journal_format as jf
from dws_dagster.workspace.store import schema

#: Where the journal-format folders go once imported (inside `.dataworkspace/`).
IMPORTED_DIR = "journal-imported"
#: Rows per statement when inserting many.
_BATCH = 1000

log = get_logger("dws_dagster.workspace.import")


def _length(column: Any) -> int:
    """The declared length of a String column (what an imported value may not exceed)."""
    length = cast(String, column.type).length
    assert isinstance(length, int), column
    return length


_TIME = _length(schema.operations.c.at)


@dataclass
class Counts:
    records: int = 0
    operations: int = 0
    refs: int = 0
    snapshots: int = 0
    events: int = 0
    pending: int = 0


def import_journal_files(store: Any) -> None:
    """Import the journal-format files of `store`'s workspace into its database, once, and move
    them to `.dataworkspace/journal-imported/`. Costs a few stat calls when there are none.

    Gets the workspace id from the Database itself: `store.workspace_id` is set only once this
    returns, so a failed import is tried again by the next call in this process too."""
    workspace = store.workspace
    meta: Path = workspace.meta_dir
    if not jf.has_journal_files(meta):
        return
    db = store.db
    ws_id = db.workspace_id(workspace.name)
    table = schema.workspaces
    imported_at = select(table.c.imported).where(table.c.id == ws_id)
    counts = None
    try:
        with db.transaction() as connection:  # files left behind (read-only?): no write lock
            imported = connection.execute(imported_at).scalar()
        if imported is None:
            with db.transaction(write_for=ws_id) as connection:
                imported = connection.execute(imported_at).scalar()  # under the lock: once
                if imported is None:
                    _refuse_merge(connection, ws_id, workspace.name, db.shown, meta)
                    counts = _Import(connection, ws_id, meta).run()
                    connection.execute(
                        update(table).where(table.c.id == ws_id).values(imported=now_iso())
                    )
    except ImportRefusedError:
        raise
    except (WorkspaceConfigError, OSError) as exc:
        reason = (
            str(exc)
            if isinstance(exc, WorkspaceConfigError)
            else f"could not read {exc.filename or 'a file'}: {exc.strerror or exc}"
        )
        raise WorkspaceConfigError(
            f"cannot import the journal-format files of workspace {workspace.name!r} into the "
            f"workspace store {db.shown}: {reason}. Nothing was imported: fix or restore that "
            "file, then open the workspace again (it is imported on first open)"
        ) from None
    except SQLAlchemyError as exc:
        raise db.describe_error(exc, "import the journal-format files") from None
    backup = meta / IMPORTED_DIR
    moved = _move_away(meta, backup)
    if counts is not None:
        log.warning(
            "workspace %r: imported its journal-format lineage into the workspace store %s "
            "(%d records, %d history operations, %d refs, %d snapshots, %d OpenLineage events, "
            "%d pending); the old files are kept as a backup in %s",
            workspace.name,
            db.shown,
            counts.records,
            counts.operations,
            counts.refs,
            counts.snapshots,
            counts.events,
            counts.pending,
            backup,
        )
    elif moved:
        log.warning(
            "workspace %r: its journal-format files were imported into the workspace "
            "store %s before (%s); moved what was left of them to %s",
            workspace.name,
            db.shown,
            imported,
            backup,
        )


class ImportRefusedError(WorkspaceConfigError):
    """The store holds lineage of the workspace already: the journal files are not merged."""


def _refuse_merge(connection: Connection, ws_id: int, name: str, shown: str, meta: Path) -> None:
    for table in (schema.operations, schema.refs, schema.snapshots, schema.ol_events):
        if connection.execute(
            select(table.c.workspace_id).where(table.c.workspace_id == ws_id).limit(1)
        ).first():
            raise ImportRefusedError(
                f"the workspace store {shown} already holds lineage of workspace {name!r}, so "
                f"the journal-format files in {meta} (lineage/, snapshots/, "
                "openlineage/outbox/) would be a second history: to import them, open the "
                "workspace with an empty store (DWS_STORE_URL to a new database); to drop "
                f"them, move those folders out of {meta}"
            )


def _move_away(meta: Path, backup: Path) -> list[Path]:
    """Move the journal-format folders into `backup` (returns those this call moved); another
    process doing the same at once is fine (what it moved first is gone), and a failure leaves
    the files where they are (they are not read again: the store says they were imported)."""
    moved = []
    for folder in jf.FOLDERS:
        source = meta / folder
        if not source.exists():
            continue
        target = backup / folder
        number = 1
        while target.exists():  # a backup from an earlier copy of the workspace stays
            number += 1
            target = target.with_name(f"{folder.name}.{number}")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(source, target)
            fsync_dir(target.parent)
            fsync_dir(source.parent)
        except FileNotFoundError:
            continue  # another process moved it meanwhile
        except OSError as exc:
            log.warning(
                "could not move %s to %s (%s): it was imported and is not read again; "
                "move it yourself",
                source,
                target,
                exc,
            )
            continue
        moved.append(target)
    return moved


class _Import:
    """One import, inside the caller's transaction."""

    def __init__(self, connection: Connection, ws_id: int, meta: Path) -> None:
        self.connection = connection
        self.ws_id = ws_id
        self.meta = meta
        self.ids: dict[str, int] = {}  # record digest -> id
        self.counts = Counts()
        self._manifests: dict[str, dict[str, Any]] = {}

    def run(self) -> Counts:
        self._history()
        self._snapshots()
        self._outbox()
        return self.counts

    # ------------------------------------------------------------------ records

    def _record_ids(self, items: list[tuple[dict[str, Any], bool]], where: Path) -> list[int]:
        """The ids of records `items` ((record, good)), inserting those not stored yet: the
        same body and digest as `LineageStore._record_id`."""
        digests = []
        new: dict[str, dict[str, Any]] = {}
        for data, good in items:
            try:
                body = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
            except orjson.JSONEncodeError as exc:
                raise WorkspaceConfigError(
                    f"{where} holds a record of {data.get('ref')} nested too deeply to be "
                    f"stored ({exc}); restore it from git or a backup"
                ) from None
            digest = xxhash.xxh3_128_hexdigest(body, seed=1 if good else 0)
            digests.append(digest)
            if digest in self.ids or digest in new:
                continue
            end = data.get("end_time")
            if end is not None and len(end) > _TIME:
                raise WorkspaceConfigError(
                    f"{where} is corrupt: a record of {data['ref']} has an end_time of "
                    f"{len(end)} characters, not a time; restore it from git or a backup"
                )
            step = data.get("step") or {}
            new[digest] = {
                "workspace_id": self.ws_id,
                "ref": data["ref"],
                "version": data.get("version"),
                "run_id": step.get("run_id"),
                "end_time": end,
                "good": good,
                "digest": digest,
                "identity": identity_digest(data),
                "body": body.decode(),
                "inputs": data.get("inputs", ()),
            }
        rows = list(new.values())
        table = schema.records
        for start in range(0, len(rows), _BATCH):
            batch = rows[start : start + _BATCH]
            # One executemany, then the ids by digest (unique per workspace): RETURNING in
            # parameter order makes SQLite insert row by row, ten times slower.
            self.connection.execute(
                insert(table), [{k: v for k, v in row.items() if k != "inputs"} for row in batch]
            )
            self.ids.update(
                (digest, int(record_id))
                for record_id, digest in self.connection.execute(
                    select(table.c.id, table.c.digest).where(
                        table.c.workspace_id == self.ws_id,
                        table.c.digest.in_([row["digest"] for row in batch]),
                    )
                )
            )
            inputs: list[dict[str, Any]] = []
            for row in batch:
                record_id = self.ids[row["digest"]]
                pairs = {item["ref"]: item["version"] for item in row["inputs"]}
                inputs.extend(
                    {
                        "record_id": record_id,
                        "ref": ref,
                        "version": version,
                        "workspace_id": self.ws_id,
                    }
                    for ref, version in pairs.items()
                )
            self._insert(schema.record_inputs, inputs)
        self.counts.records += len(rows)
        return [self.ids[digest] for digest in digests]

    def _insert(self, table: Any, rows: list[dict[str, Any]]) -> None:
        for start in range(0, len(rows), _BATCH):
            self.connection.execute(insert(table), rows[start : start + _BATCH])

    # ------------------------------------------------------------------ lineage

    def _history(self) -> None:
        files = jf.read_lineage(self.meta)
        state: dict[str, dict[str, Any]] = dict(files.current or {})
        for path, ops in files.history():
            carried = [
                (op["record"], op["op"] == "record")
                for _tail, op in ops
                if op["op"] in ("record", "fail")
            ]
            ids = iter(self._record_ids(carried, path))
            rows = []
            for in_tail, op in ops:
                rows.append(self._operation(op, ids))
                if in_tail:
                    jf.fold(state, op, self._manifest)
            self._insert(schema.operations, rows)
            self.counts.operations += len(rows)
        self._states(schema.refs, state, files.current_path, {})

    def _operation(self, op: dict[str, Any], ids: Iterator[int]) -> dict[str, Any]:
        """The `dws_operations` row of a journal operation, as `LineageStore` logs it."""
        kind = op["op"]
        row: dict[str, Any] = {
            "workspace_id": self.ws_id,
            "op": kind,
            "ref": None,
            "record_id": None,
            "detail": None,
        }
        detail: dict[str, Any] | None = None
        at = op.get("at")
        if kind in ("record", "fail"):
            record = op["record"]
            row["ref"], row["record_id"] = record["ref"], next(ids)
            if kind == "fail" and op.get("unknown"):
                detail = {"unknown": True}
            at = at or record.get("end_time") or record.get("start_time")
        elif kind == "claim":
            row["ref"], detail = op["ref"], {"step": op["step"]}
        elif kind == "forget":
            row["ref"] = op["ref"]
        else:  # reset
            detail = {"snapshot": op["snapshot"], "unknown": list(op.get("unknown", []))}
        if not isinstance(at, str) or len(at) > _TIME:
            # The journal never read its times back; an entry without one gets the import's.
            at = now_iso()
        row["detail"] = orjson.dumps(detail).decode() if detail else None
        row["at"] = at
        return row

    def _manifest(self, snapshot_hash: str) -> dict[str, Any]:
        if snapshot_hash not in self._manifests:
            self._manifests[snapshot_hash] = jf.read_manifest(self.meta, snapshot_hash)
        return self._manifests[snapshot_hash]

    def _states(
        self, table: Any, states: dict[str, dict[str, Any]], where: Path, extra: dict[str, Any]
    ) -> None:
        """Rows of `dws_refs` or `dws_snapshot_refs` for `{ref: RefState JSON}`."""
        refs = sorted(states)
        carried: list[tuple[dict[str, Any], bool]] = []
        for ref in refs:
            for name, good in (("record", True), ("attempt", False)):
                if states[ref].get(name) is not None:
                    carried.append((states[ref][name], good))
        ids = iter(self._record_ids(carried, where))
        rows = []
        for ref in refs:
            value = states[ref]
            rows.append(
                {
                    "workspace_id": self.ws_id,
                    "ref": ref,
                    **extra,
                    "owner": value.get("owner"),
                    "record_id": next(ids) if value.get("record") is not None else None,
                    "attempt_id": next(ids) if value.get("attempt") is not None else None,
                    "unknown": bool(value.get("unknown", False)),
                }
            )
        self._insert(table, rows)
        if table is schema.refs:
            self.counts.refs = len(rows)

    # ------------------------------------------------------------------ snapshots

    def _snapshots(self) -> None:
        entries = jf.read_index(self.meta)
        index = self.meta / jf.SNAPSHOTS_DIR / "index.json"
        rows: list[dict[str, Any]] = []
        tags: list[dict[str, Any]] = []
        for position, entry in enumerate(entries, start=1):
            created = entry.get("created", "")
            if len(created) > _TIME:
                raise WorkspaceConfigError(
                    f"snapshot index {index} is corrupt: snapshots[{position - 1}].created: "
                    "not a time; restore it from git or a backup"
                )
            metrics = entry.get("metrics")
            rows.append(
                {
                    "workspace_id": self.ws_id,
                    "hash": entry["hash"],
                    "position": position,
                    "message": entry.get("message", ""),
                    "created": created,
                    "metrics": None if metrics is None else orjson.dumps(metrics).decode(),
                    "results": orjson.dumps(entry.get("results", [])).decode(),
                }
            )
            tags.extend(
                {"workspace_id": self.ws_id, "tag": tag, "hash": entry["hash"]}
                for tag in entry.get("tags", ())
            )
        for position, tag in enumerate(tags, start=1):
            tag["position"] = position
        self._insert(schema.snapshots, rows)
        self._insert(schema.snapshot_tags, tags)
        for entry in entries:
            path = self.meta / jf.SNAPSHOTS_DIR / f"{entry['hash']}.json"
            self._states(
                schema.snapshot_refs, self._manifest(entry["hash"]), path, {"hash": entry["hash"]}
            )
        self.counts.snapshots = len(rows)

    # ------------------------------------------------------------------ outbox

    def _outbox(self) -> None:
        events = schema.ol_events
        found = jf.read_outbox(
            self.meta,
            max_time=_length(events.c.event_time),
            max_type=_length(events.c.event_type),
        )
        # The journal outbox kept no spool time: an event was spooled as it happened, so its
        # eventTime is the nearest time known.
        self._insert(
            events,
            [
                {
                    "workspace_id": self.ws_id,
                    "run_id": event.run_id,
                    "event_type": event.event_type,
                    "event_time": event.event_time,
                    "body": event.line.decode(),
                    "spooled": event.event_time,
                    "pending": event.pending,
                }
                for event in found.events
            ],
        )
        self.counts.events = len(found.events)
        self.counts.pending = sum(event.pending for event in found.events)
        state = found.state
        if state:
            delivery = schema.ol_delivery
            counters = {
                "delivered": state.get("delivered", 0),
                "attempts": state.get("attempts", 0),
                **{
                    name: state.get(name)
                    for name in (
                        "next_attempt_at",
                        "last_error",
                        "last_error_at",
                        "last_delivery_at",
                    )
                },
            }
            if not self.connection.execute(
                update(delivery).where(delivery.c.workspace_id == self.ws_id).values(**counters)
            ).rowcount:
                self.connection.execute(
                    insert(delivery).values(workspace_id=self.ws_id, **counters)
                )
