"""Snapshots of the workspace's lineage: take, restore, diff, history, delete.

A snapshot is the state of every ref's lineage at one moment, kept in the workspace store
(`dws_snapshot_refs`: references to the records, so a snapshot of 100,000 refs copies no record)
with an index entry (`dws_snapshots`, `dws_snapshot_tags`): tags, message, time, metrics and
its results copies. Its hash covers what versions refs have and how they were made (never when,
where or by whom), so it is the same on any machine. Taking one is one transaction: all or
nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import xxhash
from sqlalchemy import delete, func, insert, select

from dws_dagster.errors import SnapshotError, SnapshotNotFoundError, WorkspaceConfigError
from dws_dagster.workspace import shapes
from dws_dagster.workspace.files import canonical_json, pretty_json, writing
from dws_dagster.workspace.records import identity_digest
from dws_dagster.workspace.records import (
    record_identity as record_identity,  # re-exported: callers of the old home
)
from dws_dagster.workspace.redaction import redact_text
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.snapshots import snapshot_data
from dws_dagster.workspace.snapshots.file_hashes import FileHashCache
from dws_dagster.workspace.snapshots.objects import ObjectStore
from dws_dagster.workspace.snapshots.remote import RemoteData
from dws_dagster.workspace.snapshots.results_metrics import snapshot_metrics
from dws_dagster.workspace.snapshots.retention import (
    CODE,
    DRIFT,
    LINEAGE,
    MISSING,
    REMOTE,
    RESOURCE,
    DataRow,
    DataScan,
    RetentionReport,
    capture,
    resource_states,
    retain,
)
from dws_dagster.workspace.store import schema
from dws_dagster.workspace.store.gc_pause import gc_paused
from dws_dagster.workspace.store.messages import too_deep
from dws_dagster.workspace.store.ref_state import RefState
from dws_dagster.workspace.swap import staging_path
from dws_dagster.workspace.versions import is_ignored_name, short, special_names
from dws_dagster.workspace.views.graph import prefetch_upstream, upstream_records
from dws_dagster.workspace.workspace import RESTORE_INTENT_FILE, RESULTS_SNAPSHOT_DIR, Workspace

INDEX_FORMAT = 1
_HEXISH = re.compile(r"^[0-9a-f]{4,}$")  # as short as a usable hash prefix
CURRENT = "current"


@dataclass
class SnapshotInfo:
    """An entry of the snapshot index."""

    hash: str
    tags: list[str] = field(default_factory=list)
    message: str = ""
    created: str = ""
    metrics: dict[str, Any] | None = None
    results: list[dict[str, str]] = field(default_factory=list)
    #: Code resources' git state ({name: {"git_commit", "dirty"}}); None: a snapshot taken
    #: before snapshots captured data (it holds lineage only).
    resources: dict[str, dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        return self.tags[0] if self.tags else self.hash[:12]

    def to_json(self) -> dict[str, Any]:
        data = {
            "hash": self.hash,
            "tags": self.tags,
            "message": self.message,
            "created": self.created,
            "metrics": self.metrics,
            "results": self.results,
        }
        if self.resources is not None:  # absent: a snapshot of lineage only (before 0002)
            data["resources"] = self.resources
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SnapshotInfo:
        return cls(
            hash=data["hash"],
            tags=list(data.get("tags", [])),
            message=data.get("message", ""),
            created=data.get("created", ""),
            metrics=data.get("metrics"),
            results=list(data.get("results", [])),
        )


@dataclass
class SnapshotOutcome:
    info: SnapshotInfo
    created: bool
    tag_added: bool = False
    warnings: list[str] = field(default_factory=list)
    #: What retaining the snapshot's data cost (None: no new snapshot was taken).
    retention: RetentionReport | None = None
    #: Refs whose data changed outside any step (their records say another version).
    drift: list[str] = field(default_factory=list)


@dataclass
class RestoreReport:
    info: SnapshotInfo
    data_unchanged: list[str] = field(default_factory=list)
    data_restored: list[str] = field(default_factory=list)
    not_restored: list[tuple[str, str]] = field(default_factory=list)
    lineage_restored: list[str] = field(default_factory=list)
    lineage_removed: list[str] = field(default_factory=list)
    #: Code resources in git left as they are (ref, what to do): restoring them rewrites
    #: files git tracks, so it is asked for (`code=True`).
    code_left: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class ChangeDetail:
    """One line of a `RefChange` as data, so a reader can group lines (the inputs of a step
    that read 62 partitions): `what` changed (`version`, `status`, `step`, `parameter`,
    `code_version`, `git_commit`, `code`, `input`, `metrics`, `data`, `files`), `name` the
    parameter, input or code ref (for `data`: what the data is), `before` and `after` its
    values (None: none on that side); `text` is the line as `RefChange.changes` holds it."""

    text: str
    what: str
    name: str | None = None
    before: Any = None
    after: Any = None


@dataclass
class RefChange:
    ref: str
    kind: str  # added | removed | changed
    changes: list[str] = field(default_factory=list)
    #: `changes` as data, line for line (`lines()`); not part of a change's identity.
    details: list[ChangeDetail] = field(default_factory=list, compare=False, repr=False)

    def lines(self) -> list[ChangeDetail]:
        """`details`, or each line of `changes` as a detail that only its text tells."""
        if len(self.details) == len(self.changes):
            return list(self.details)
        return [ChangeDetail(text, "other") for text in self.changes]


def _change(ref: str, kind: str, details: list[ChangeDetail]) -> RefChange:
    return RefChange(ref, kind, [d.text for d in details], details)


# ---------------------------------------------------------------------------- index

_SNAPSHOTS = schema.snapshots
_TAGS = schema.snapshot_tags


def _index_where(ws: Workspace) -> str:
    return f"snapshot index of workspace store {ws.store.shown}"


def list_snapshots(ws: Workspace) -> list[SnapshotInfo]:
    """Snapshots, oldest first. The index is read as untrusted input, like any file of the
    workspace: a database can be edited by hand or restored from elsewhere."""
    store = ws.store
    ws_id = store.workspace_id
    with store.reading() as connection:
        rows = connection.execute(
            select(
                _SNAPSHOTS.c.hash,
                _SNAPSHOTS.c.message,
                _SNAPSHOTS.c.created,
                _SNAPSHOTS.c.metrics,
                _SNAPSHOTS.c.results,
                _SNAPSHOTS.c.resources,
            )
            .where(_SNAPSHOTS.c.workspace_id == ws_id)
            .order_by(_SNAPSHOTS.c.position)
        ).all()
        tag_rows = connection.execute(
            select(_TAGS.c.hash, _TAGS.c.tag)
            .where(_TAGS.c.workspace_id == ws_id)
            .order_by(_TAGS.c.position, _TAGS.c.tag)
        ).all()
    tags: dict[str, list[str]] = {}
    for digest, tag in tag_rows:
        tags.setdefault(digest, []).append(tag)
    where = _index_where(ws)
    entries = [
        {
            "hash": digest,
            "tags": tags.pop(digest, []),
            "message": message,
            "created": created,
            "metrics": _json(metrics, where, digest, "metrics"),
            "results": _json(results, where, digest, "results"),
        }
        for digest, message, created, metrics, results, _ in rows
    ]
    states = {
        digest: _resource_states(_json(raw, where, digest, "resources"), where, digest)
        for digest, *_, raw in rows
    }
    if tags:
        orphan = next(iter(tags))
        raise WorkspaceConfigError(
            f"{where} is corrupt: tag {tags[orphan][0]!r} names snapshot {orphan[:12]}, which "
            "is not in the index; restore the store from a backup"
        )
    data = shapes.checked(
        "index",
        {"format": INDEX_FORMAT, "snapshots": entries},
        where,
        what="snapshot index",
        advice="restore the store from a backup",
    )
    infos = [SnapshotInfo.from_json(item) for item in data["snapshots"]]
    for info in infos:
        info.resources = states[info.hash]
    return infos


def _resource_states(value: Any, where: str, digest: str) -> dict[str, dict[str, Any]] | None:
    if value is None:
        return None
    if type(value) is dict and all(
        type(name) is str
        and type(state) is dict
        and type(state.get("git_commit")) is str
        and type(state.get("dirty")) is bool
        for name, state in value.items()
    ):
        return value
    raise WorkspaceConfigError(
        f"{where} is corrupt: snapshot {str(digest)[:12]}: resources is not what "
        "dws_dagster writes; restore the store from a backup"
    )


def _json(text: Any, where: str, digest: str, column: str) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        raise WorkspaceConfigError(
            f"{where} is corrupt: snapshot {str(digest)[:12]}: {column} is not JSON; restore "
            "the store from a backup"
        ) from None


def _add_snapshot(ws: Workspace, info: SnapshotInfo) -> None:
    store = ws.store
    ws_id = store.workspace_id
    with store.locked() as connection:
        position = connection.execute(
            select(func.coalesce(func.max(_SNAPSHOTS.c.position), 0)).where(
                _SNAPSHOTS.c.workspace_id == ws_id
            )
        ).scalar()
        connection.execute(
            insert(_SNAPSHOTS).values(
                workspace_id=ws_id,
                hash=info.hash,
                position=_next(ws, position, "snapshot"),
                message=info.message,
                created=info.created,
                metrics=None if info.metrics is None else orjson.dumps(info.metrics).decode(),
                results=orjson.dumps(info.results).decode(),
                resources=None if info.resources is None else orjson.dumps(info.resources).decode(),
            )
        )
        for tag in info.tags:
            _add_tag(ws, info.hash, tag)


def _add_tag(ws: Workspace, digest: str, tag: str) -> None:
    store = ws.store
    ws_id = store.workspace_id
    with store.locked() as connection:
        position = connection.execute(
            select(func.coalesce(func.max(_TAGS.c.position), 0)).where(
                _TAGS.c.workspace_id == ws_id
            )
        ).scalar()
        connection.execute(
            insert(_TAGS).values(
                workspace_id=ws_id, tag=tag, hash=digest, position=_next(ws, position, "tag")
            )
        )


def _next(ws: Workspace, last: Any, what: str) -> int:
    """The position after `last`, the greatest on record (a database column edited by hand
    can hold text there, which SQLite sorts after every number)."""
    if type(last) is not int:
        raise WorkspaceConfigError(
            f"{_index_where(ws)} is corrupt: a {what} position is {str(last)[:40]!r}, not a "
            "number; restore the store from a backup"
        )
    return last + 1


def _remove_tag(ws: Workspace, tag: str) -> None:
    store = ws.store
    with store.locked() as connection:
        connection.execute(
            delete(_TAGS).where(_TAGS.c.workspace_id == store.workspace_id, _TAGS.c.tag == tag)
        )


def _remove_snapshot(ws: Workspace, digest: str) -> None:
    store = ws.store
    ws_id = store.workspace_id
    with store.locked() as connection:
        connection.execute(
            delete(_TAGS).where(_TAGS.c.workspace_id == ws_id, _TAGS.c.hash == digest)
        )
        connection.execute(
            delete(_SNAPSHOTS).where(
                _SNAPSHOTS.c.workspace_id == ws_id, _SNAPSHOTS.c.hash == digest
            )
        )
        store.drop_snapshot(digest)
        snapshot_data.delete_rows(ws, digest)


def snapshot_manifest(ws: Workspace, digest: str) -> dict[str, Any]:
    """A snapshot's lineage as the manifest `graph.SnapshotView` reads."""
    return {
        "format": INDEX_FORMAT,
        "hash": digest,
        "refs": {ref: state.to_json() for ref, state in ws.store.snapshot_items(digest)},
    }


def resolve_snapshot(ws: Workspace, name: str) -> SnapshotInfo:
    """Find a snapshot by tag, full hash, or unique hash prefix (at least 4 characters)."""
    return _resolve(list_snapshots(ws), name)


def _resolve(infos: list[SnapshotInfo], name: str) -> SnapshotInfo:
    for info in infos:
        if name in info.tags or name == info.hash:
            return info
    matches = [info for info in infos if len(name) >= 4 and info.hash.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise SnapshotNotFoundError(
            f"snapshot prefix {name!r} is ambiguous: it matches "
            f"{', '.join(m.hash[:16] for m in matches)}; give more characters"
        )
    known = ", ".join(i.name for i in infos[-5:]) or "none yet"
    raise SnapshotNotFoundError(
        f"no snapshot is tagged {name!r} or has a hash starting with it (recent: {known}); "
        "see 'dws-dagster history'"
    )


def validate_tag(tag: str) -> str:
    """Refuse a tag that cannot name a folder, be printed or be told from a hash, before
    anything is written. A tag names a results folder, and its staging copy
    `.dws-staging-<tag>-<32 hex>` too: file names hold 255 bytes, so a tag holds 200 (UTF-8)."""
    max_bytes = 200
    if (
        not isinstance(tag, str)
        or not tag
        or len(tag) > 128
        or any(c.isspace() or c in "/\\\x00" or not c.isprintable() for c in tag)
        or tag in (".", "..", CURRENT)
    ):
        raise SnapshotError(
            f"invalid tag {tag!r}: use 1-128 printable characters without "
            f"spaces or slashes, other than '{CURRENT}'"
        )
    size = len(tag.encode("utf-8"))
    if size > max_bytes:
        raise SnapshotError(
            f"tag {tag[:20]!r}... is {size} bytes in UTF-8; a tag names a folder, so it may "
            f"hold at most {max_bytes} bytes: choose a shorter tag"
        )
    if _HEXISH.match(tag):
        raise SnapshotError(
            f"tag {tag!r} looks like a snapshot hash; choose a tag that does "
            "not (for example 'v-{tag}')"
        )
    return tag


# --------------------------------------------------------------------------- taking


def snapshot_hash(
    ws: Workspace, states: dict[str, RefState], data: list[DataRow], code: dict[str, dict[str, Any]]
) -> str:
    """Deterministic, portable hash of a workspace state: no paths, hosts or timestamps."""
    try:
        rows = [
            (ref, state.status, None if state.record is None else identity_digest(state.record))
            for ref, state in sorted(states.items())
        ]
    except orjson.JSONEncodeError as exc:
        raise WorkspaceConfigError(too_deep(f"workspace store {ws.store.shown}", exc)) from None
    return hash_of_rows(ws, rows, data, code)


def hash_of_rows(
    ws: Workspace,
    rows: list[tuple[str, str, str | None]],
    data: list[DataRow],
    code: dict[str, dict[str, Any]],
) -> str:
    """The snapshot hash of (ref, status, identity digest of its record) rows sorted by ref
    (what the store gives without reading any record), the data found on disk (each ref's
    kind and version, sorted by ref) and the code resources' git state: two snapshots differ
    whenever the workspace's lineage, data or code differ."""
    body = {
        "resources": sorted([r.name, r.role] for r in ws.resources.values()),
        "refs": rows,
        "data": [[row.ref, row.kind, row.version] for row in data],
        "code": code,
    }
    return xxhash.xxh3_128_hexdigest(canonical_json(body))


def _results_refs(ws: Workspace, refs: list[str]) -> list[str]:
    """The refs (with a good record) of results resources, in the resources' order."""
    # Stored refs are normalised, so the resource is the text before the first slash.
    order = {
        name: i
        for i, (name, resource) in enumerate(ws.resources.items())
        if resource.role == "results"
    }
    chosen = [ref for ref in refs if ref.split("/", 1)[0] in order]
    return sorted(chosen, key=lambda r: (order[r.split("/", 1)[0]], r))


def take_snapshot(
    ws: Workspace, tag: str | None = None, message: str = "", *, remote: RemoteData | None = None
) -> SnapshotOutcome:
    """Snapshot the workspace: its lineage, the data of every ref and of source-data and code
    resources (retained, so the snapshot restores while it exists), code's git state; results
    get a per-snapshot copy with `lineage.json`. A restore a crash interrupted is finished
    first (`remote` moves its remote data, if it has any): a snapshot of a half-restored
    workspace would be of nothing anyone made."""
    if tag is not None:
        validate_tag(tag)
    if (ws.meta_dir / RESTORE_INTENT_FILE).exists():
        from dws_dagster.workspace.snapshots.restore import finish_interrupted_restore

        finish_interrupted_restore(ws, remote)
    store = ws.store
    placed: list[Path] = []
    hashes = FileHashCache.of_workspace(ws.meta_dir)
    objects = ObjectStore.of_workspace(ws.meta_dir)
    warnings: list[str] = []
    scanned = False
    try:
        # Scanning every ref and copying what changed may take long (a first snapshot copies
        # everything), and steps wait for the store's lock at most its timeout: both happen
        # before taking it. Under the lock the lineage is checked to be what was scanned (if
        # a step committed meanwhile, the scan is redone there: the hash cache makes it
        # cheap), and every object a new version needs is checked present (a `gc` may have
        # freed what nothing referenced yet). The results copies go if anything fails before
        # the store commits, the commit itself included (a full disk refuses it): an index
        # entry and its copies commit together, or neither stays. Objects retained by a
        # snapshot that did not commit are named by nothing: `gc` frees them.
        with gc_paused():
            seen = store.last_operation()
            rows = store.identity_rows()
            data, scans = capture(ws, store.recorded_versions(), hashes, warnings.append)
            scanned = True
            code = resource_states(ws)
            digest = hash_of_rows(ws, rows, data, code)
            infos = list_snapshots(ws)
            _check_tag(infos, tag, digest)
            copied = RetentionReport(versions=len(scans))
            if not any(info.hash == digest for info in infos):
                _retain(ws, objects, scans, hashes, copied, record=False)
        with store.locked(), gc_paused():
            if store.last_operation() != seen:
                warnings.clear()
                rows = store.identity_rows()
                data, scans = capture(ws, store.recorded_versions(), hashes, warnings.append)
                code = resource_states(ws)
                digest = hash_of_rows(ws, rows, data, code)
            infos = list_snapshots(ws)
            _check_tag(infos, tag, digest)
            existing = next((i for i in infos if i.hash == digest), None)
            if existing is not None:
                if tag is None or tag in existing.tags:
                    return SnapshotOutcome(existing, created=False)
                existing.tags.append(tag)
                _add_tag(ws, existing.hash, tag)
                return SnapshotOutcome(existing, created=False, tag_added=True)

            info = SnapshotInfo(
                hash=digest,
                tags=[tag] if tag else [],
                message=redact_text(message or ""),
                created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                resources=code,
            )
            outcome = SnapshotOutcome(
                info,
                created=True,
                warnings=warnings,
                drift=[row.ref for row in data if row.kind == DRIFT],
            )
            outcome.retention = _retain(ws, objects, scans, hashes, copied, record=True)
            # Only the results refs' records are read: the rest is references to records.
            results_refs = _results_refs(
                ws, [ref for ref, _status, identity in rows if identity is not None]
            )
            states = store.states_in(None, results_refs)
            info.metrics = snapshot_metrics(
                ws,
                results_refs,
                {ref: states[ref].record for ref in results_refs},
                outcome.warnings,
            )
            placed = _archive_results(
                ws, info, states, results_refs, outcome, _folder_name(info, infos)
            )
            # In the transaction `store.locked()` holds: the manifest and the index entry
            # commit together when the block ends, or not at all.
            store.save_snapshot(digest)
            snapshot_data.save_rows(ws, digest, data)
            _add_snapshot(ws, info)
        return outcome
    except BaseException:
        for folder in placed:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        hashes.save(prune=scanned)  # once every ref was scanned, what was not is gone


def _check_tag(infos: list[SnapshotInfo], tag: str | None, digest: str) -> None:
    owner = next((i for i in infos if tag is not None and tag in i.tags), None)
    if owner is not None and owner.hash != digest:
        raise SnapshotError(
            f"tag {tag!r} already names snapshot {owner.hash[:12]}; "
            "choose another tag, or delete that snapshot first"
        )


def _retain(
    ws: Workspace,
    objects: ObjectStore,
    scans: dict[str, DataScan],
    hashes: FileHashCache,
    report: RetentionReport,
    *,
    record: bool,
) -> RetentionReport:
    """Retain every scanned version no earlier snapshot retained already: its files into the
    object store (counted in `report`; a file there already costs one `stat`) and, when
    `record` (under the store's lock), its manifest into the store."""
    report.versions = len(scans)
    wanted = {(ref, found.version) for ref, found in scans.items() if found.version is not None}
    # Most of a snapshot is what the previous one held: only the rest is looked up.
    have = wanted & snapshot_data.latest_rows(ws)
    have |= snapshot_data.retained(ws, wanted - have)
    manifests = []
    for ref, found in scans.items():
        if found.version is None or (ref, found.version) in have:
            continue
        manifests.append((ref, found.version, found.link, retain(objects, found, hashes, report)))
    if record:
        report.new_versions = len(manifests)
        snapshot_data.save_manifests(ws, manifests)
    return report


def _folder_name(info: SnapshotInfo, infos: list[SnapshotInfo]) -> str:
    """The name of a new snapshot's results folder: its tag, unless an older snapshot's results
    still use that name (a tag removed from a snapshot with other tags keeps its folder), then
    its short hash."""
    taken = {entry["folder"] for other in infos for entry in other.results}
    return info.name if f"{RESULTS_SNAPSHOT_DIR}/{info.name}" not in taken else info.hash[:12]


def _archive_results(
    ws: Workspace,
    info: SnapshotInfo,
    states: dict[str, RefState],
    results_refs: list[str],
    outcome: SnapshotOutcome,
    name: str,
) -> list[Path]:
    """Copy each results ref with its lineage.json into `<resource>/snapshots/<name>/`. The
    snapshot is the current lineage (the caller holds the store's lock), so the lineage of
    each results ref is read from the store itself."""
    view = ws.store
    staged: dict[str, Path] = {}
    placed: list[Path] = []
    known = prefetch_upstream(view, results_refs)
    try:
        for ref in results_refs:
            parsed = as_ref(ref)
            resource = ws.resource(parsed.name)
            if not resource.is_local:
                outcome.warnings.append(f"results ref {ref} is remote; not archived")
                continue
            source = ws.local_path(parsed)
            if not source.exists():
                outcome.warnings.append(f"results ref {ref} has no data at {source}; not archived")
                continue
            if states[ref].unknown or ws.version_of(parsed) != states[ref].version:
                outcome.warnings.append(
                    f"results ref {ref}: its data is not the version its lineage records "
                    f"({short(states[ref].version)}); not archived — re-run its step"
                )
                continue
            root = ws.resource_root(resource)
            final = root / RESULTS_SNAPSHOT_DIR / name
            if final.exists():
                raise SnapshotError(f"{final} already exists; move it away or choose another tag")
            stage = staged.get(parsed.name)
            if stage is None:
                stage = staging_path(final)
                stage.mkdir(parents=True)
                staged[parsed.name] = stage
            target = stage / parsed.subpath if parsed.subpath else stage
            lineage = {
                "format": INDEX_FORMAT,
                "snapshot": info.hash,
                "ref": ref,
                "version": states[ref].version,
                "records": upstream_records(view, ref, known),
            }
            # Named by where the copy goes, not by the staging folder the user never sees.
            with writing(final, action="copy results into"):
                if source.is_dir():
                    _copy_results_dir(source, target)
                    (target / "lineage.json").write_bytes(pretty_json(lineage))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, target)
                    target.with_name(target.name + ".lineage.json").write_bytes(
                        pretty_json(lineage)
                    )
            info.results.append({"ref": ref, "folder": f"{RESULTS_SNAPSHOT_DIR}/{name}"})
        for resource_name, stage in staged.items():
            final = ws.resource_root(resource_name) / RESULTS_SNAPSHOT_DIR / name
            os.replace(stage, final)
            placed.append(final)
    except BaseException:
        for stage in staged.values():
            shutil.rmtree(stage, ignore_errors=True)
        for folder in placed:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return placed


def _copy_results_dir(source: Path, target: Path) -> None:
    """Copy what the results' version covers: pipes, sockets and devices are not data (a
    pipe would block the copy), the snapshot archives are not part of a snapshot."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory) == source
        skipped = special_names(directory)
        skipped.update(
            n for n in names if is_ignored_name(n) or (top and n == RESULTS_SNAPSHOT_DIR)
        )
        return skipped

    shutil.copytree(source, target, ignore=ignore, dirs_exist_ok=True)


# -------------------------------------------------------------------------- restore


def restore_snapshot(
    ws: Workspace,
    name: str,
    progress: Callable[[str], None] | None = None,
    *,
    partial: bool = False,
    code: bool = False,
    remote: RemoteData | None = None,
) -> RestoreReport:
    """Make a snapshot's lineage and data current again: see `restore.restore_snapshot`
    (imported when called: restoring builds on this module)."""
    from dws_dagster.workspace.snapshots.restore import restore_snapshot as restore

    return restore(ws, name, progress, partial=partial, code=code, remote=remote)


# ----------------------------------------------------------------------------- diff


def diff_lineage(ws: Workspace, before: str, after: str) -> list[RefChange]:
    """What changed between two snapshots (or `current`): the database finds the refs whose
    records differ, and only their records are read."""
    infos = list_snapshots(ws)
    a = None if before == CURRENT else _resolve(infos, before)
    b = None if after == CURRENT else _resolve(infos, after)
    store = ws.store
    with store.reading():
        hash_a = a.hash if a is not None else None
        hash_b = b.hash if b is not None else None
        refs = store.differing_refs(hash_a, hash_b)
        changes = diff_states(store.states_in(hash_a, refs), store.states_in(hash_b, refs))
    data_a, code_a, files_a = _data_side(ws, a)
    data_b, code_b, files_b = _data_side(ws, b)
    if data_a is None or data_b is None:  # a snapshot from before data was captured
        return changes
    return _merge(
        changes, diff_data(data_a, data_b, files_a, files_b) + diff_code(code_a or {}, code_b or {})
    )


FileLister = Callable[[str, str], "dict[str, str] | None"]


def _data_side(
    ws: Workspace, info: SnapshotInfo | None
) -> tuple[dict[str, DataRow] | None, dict[str, dict[str, Any]] | None, FileLister]:
    """A side's data rows by ref, code state, and a way to list a captured resource's files:
    a snapshot's as recorded (and retained), or the workspace's now (versioned from the
    stat-keyed hash cache, so only changed files are read)."""
    if info is not None:

        def retained_files(ref: str, version: str) -> dict[str, str] | None:
            found = snapshot_data.manifest(ws, ref, version)
            return None if found is None else {f.relpath: f.digest for f in found[1]}

        if info.resources is None:
            return None, None, retained_files
        return (
            {row.ref: row for row in snapshot_data.rows_of(ws, info.hash)},
            info.resources,
            retained_files,
        )
    hashes = FileHashCache.of_workspace(ws.meta_dir)
    try:
        rows, scans = capture(ws, ws.store.recorded_versions(), hashes)
    finally:
        hashes.save()

    def scanned_files(ref: str, version: str) -> dict[str, str] | None:
        found = scans.get(ref)
        if found is None or found.version != version:
            return None
        return {f.relpath: f.digest for f in found.files}

    return {row.ref: row for row in rows}, resource_states(ws), scanned_files


def current_data(ws: Workspace) -> tuple[list[DataRow], dict[str, dict[str, Any]]]:
    """What a snapshot taken now would record of the data and the code: the data rows (see
    `retention.capture`) and the code resources' git state."""
    hashes = FileHashCache.of_workspace(ws.meta_dir)
    try:
        rows, _ = capture(ws, ws.store.recorded_versions(), hashes)
    finally:
        hashes.save()
    return rows, resource_states(ws)


def diff_data(
    before: dict[str, DataRow],
    after: dict[str, DataRow],
    files_before: FileLister | None = None,
    files_after: FileLister | None = None,
) -> list[RefChange]:
    """Data that differs beyond what the lineage says: drift, missing data, source-data and
    code resources (a ref whose data is its record's version on both sides is the lineage
    diff's). A resource captured whole names the files that differ, where both sides' file
    lists are known."""
    changes = []
    for ref in sorted(set(before) | set(after)):
        a, b = before.get(ref), after.get(ref)
        if a is not None and b is not None and a == b:
            continue
        if (a is None or a.kind == LINEAGE) and (b is None or b.kind == LINEAGE):
            continue
        if a is None or b is None:
            row = b or a
            assert row is not None
            if row.kind in (RESOURCE, CODE):
                was, now = (None, row.version) if a is None else (row.version, None)
                changes.append(
                    _change(
                        ref,
                        "added" if a is None else "removed",
                        [
                            ChangeDetail(
                                f"{_KIND_WORDS[row.kind]} {short(row.version)}",
                                "data",
                                _KIND_WORDS[row.kind],
                                was,
                                now,
                            )
                        ],
                    )
                )
            continue
        found = []
        if b.kind in (DRIFT, MISSING) or a.kind in (DRIFT, MISSING):
            found.append(
                ChangeDetail(
                    f"{_KIND_WORDS[b.kind]}: data {short(a.version)} -> {short(b.version)}",
                    "data",
                    _KIND_WORDS[b.kind],
                    a.version,
                    b.version,
                )
            )
        elif a.version != b.version:
            found.append(
                ChangeDetail(
                    f"{_KIND_WORDS[b.kind]} {short(a.version)} -> {short(b.version)}",
                    "data",
                    _KIND_WORDS[b.kind],
                    a.version,
                    b.version,
                )
            )
            if (
                files_before is not None
                and files_after is not None
                and a.version is not None
                and b.version is not None
            ):
                found += _file_changes(files_before(ref, a.version), files_after(ref, b.version))
        if found:
            changes.append(_change(ref, "changed", found))
    return changes


def _file_changes(a: dict[str, str] | None, b: dict[str, str] | None) -> list[ChangeDetail]:
    """'files changed: x, y; added: z' between two file lists (path -> hash)."""
    if a is None or b is None:
        return []
    parts = []
    for word, names in (
        ("changed", [n for n in sorted(a) if n in b and a[n] != b[n]]),
        ("added", [n for n in sorted(b) if n not in a]),
        ("removed", [n for n in sorted(a) if n not in b]),
    ):
        if names:
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            parts.append(
                ChangeDetail(
                    f"files {word}: {', '.join(names[:5])}{more}", "files", word, None, names
                )
            )
    return parts


_KIND_WORDS = {
    LINEAGE: "data as its lineage says",
    DRIFT: "changed outside any step (drift)",
    MISSING: "data missing",
    RESOURCE: "source data",
    CODE: "code",
    REMOTE: "remote data",
}


def diff_code(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> list[RefChange]:
    """Code resources whose git commit or cleanliness differ."""
    changes = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name) or {}, after.get(name) or {}
        found = []
        if a.get("git_commit") != b.get("git_commit"):
            found.append(
                ChangeDetail(
                    f"git commit {str(a.get('git_commit'))[:12]} -> "
                    f"{str(b.get('git_commit'))[:12]}",
                    "git_commit",
                    None,
                    a.get("git_commit"),
                    b.get("git_commit"),
                )
            )
        if a.get("dirty") != b.get("dirty"):
            found.append(
                ChangeDetail(
                    "uncommitted changes " + ("appeared" if b.get("dirty") else "gone"),
                    "dirty",
                    None,
                    a.get("dirty"),
                    b.get("dirty"),
                )
            )
        if found:
            changes.append(_change(name, "changed", found))
    return changes


def _merge(changes: list[RefChange], more: list[RefChange]) -> list[RefChange]:
    by_ref = {change.ref: change for change in changes}
    for change in more:
        found = by_ref.get(change.ref)
        if found is None:
            by_ref[change.ref] = change
        else:
            lines = found.lines() + change.lines()
            found.changes[:] = [line.text for line in lines]
            found.details[:] = lines
    return [by_ref[ref] for ref in sorted(by_ref)]


def lineage_state(ws: Workspace, name: str) -> dict[str, RefState]:
    """Lineage of a snapshot by name, or the current lineage for `current`."""
    if name == CURRENT:
        return ws.store.state()
    info = resolve_snapshot(ws, name)
    return dict(ws.store.snapshot_items(info.hash))


def diff_states(before: dict[str, RefState], after: dict[str, RefState]) -> list[RefChange]:
    """Refs added, removed, or whose version, status, step, parameters, code or inputs
    changed."""
    changes = []
    for ref in sorted(set(before) | set(after)):
        a, b = before.get(ref), after.get(ref)
        if a is None:
            changes.append(
                _change(
                    ref,
                    "added",
                    [
                        ChangeDetail(
                            f"version {short(b.version)}" if b else "",
                            "version",
                            None,
                            None,
                            b.version if b else None,
                        )
                    ],
                )
            )
            continue
        if b is None:
            changes.append(
                _change(
                    ref,
                    "removed",
                    [ChangeDetail(f"version {short(a.version)}", "version", None, a.version, None)],
                )
            )
            continue
        if a.record == b.record and a.status == b.status:
            continue  # most refs of two snapshots: nothing below could differ
        found = _record_changes(a, b)
        if found:
            changes.append(_change(ref, "changed", found))
    return changes


def _record_changes(a: RefState, b: RefState) -> list[ChangeDetail]:
    found = []
    if a.version != b.version:
        found.append(
            ChangeDetail(
                f"version {short(a.version)} -> {short(b.version)}",
                "version",
                None,
                a.version,
                b.version,
            )
        )
    if a.status != b.status:
        found.append(
            ChangeDetail(f"status {a.status} -> {b.status}", "status", None, a.status, b.status)
        )
    ra, rb = a.record or {}, b.record or {}
    sa, sb = ra.get("step") or {}, rb.get("step") or {}
    if sa.get("name") != sb.get("name"):
        found.append(
            ChangeDetail(
                f"step {sa.get('name')} -> {sb.get('name')}",
                "step",
                None,
                sa.get("name"),
                sb.get("name"),
            )
        )
    pa, pb = ra.get("parameters") or {}, rb.get("parameters") or {}
    for key in sorted(set(pa) | set(pb)):
        if pa.get(key) != pb.get(key):
            found.append(
                ChangeDetail(
                    f"parameter {key}: {_show(pa.get(key))} -> {_show(pb.get(key))}",
                    "parameter",
                    key,
                    pa.get(key),
                    pb.get(key),
                )
            )
    for key in ("code_version", "git_commit"):
        if sa.get(key) != sb.get(key):
            found.append(
                ChangeDetail(
                    f"{key.replace('_', ' ')} {sa.get(key)} -> {sb.get(key)}",
                    key,
                    None,
                    sa.get(key),
                    sb.get(key),
                )
            )
    ca = {c["ref"]: c["version"] for c in sa.get("code", ())}
    cb = {c["ref"]: c["version"] for c in sb.get("code", ())}
    for ref in sorted(set(ca) | set(cb)):
        if ca.get(ref) != cb.get(ref):
            found.append(
                ChangeDetail(
                    f"code {ref} {short(ca.get(ref))} -> {short(cb.get(ref))}",
                    "code",
                    ref,
                    ca.get(ref),
                    cb.get(ref),
                )
            )
    ia = {i["ref"]: i["version"] for i in ra.get("inputs", ())}
    ib = {i["ref"]: i["version"] for i in rb.get("inputs", ())}
    for ref in sorted(set(ia) | set(ib)):
        if ia.get(ref) != ib.get(ref):
            found.append(
                ChangeDetail(
                    f"input {ref} {short(ia.get(ref))} -> {short(ib.get(ref))}",
                    "input",
                    ref,
                    ia.get(ref),
                    ib.get(ref),
                )
            )
    if ra.get("metrics") != rb.get("metrics"):
        found.append(
            ChangeDetail("metrics changed", "metrics", None, ra.get("metrics"), rb.get("metrics"))
        )
    return found


def _show(value: Any) -> str:
    try:
        text = canonical_json(value).decode() if value is not None else "(unset)"
    except orjson.JSONEncodeError:
        return "(nested too deeply to show)"
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------- delete


@dataclass
class SnapshotDeletion:
    """What `delete_snapshot` did: removed one tag of a snapshot that keeps others
    (`removed_tag`), or deleted the snapshot (`removed_tag` None)."""

    info: SnapshotInfo
    removed_tag: str | None = None
    removed_results: list[Path] = field(default_factory=list)

    @property
    def deleted(self) -> bool:
        return self.removed_tag is None

    @property
    def hash(self) -> str:
        return self.info.hash

    @property
    def name(self) -> str:
        return self.info.name


def delete_snapshot(ws: Workspace, name: str, *, remove_results: bool = False) -> SnapshotDeletion:
    """Delete a tag, or a snapshot. A tag of a snapshot that has others goes alone; the
    snapshot (manifest, index entry, and its results copies if asked) goes with its last tag,
    or when named by its hash.

    Every results folder the index names is checked to lie inside its results resource before
    anything changes: the index is a file anyone can edit.
    """
    store = ws.store
    with store.locked():
        infos = list_snapshots(ws)
        info = _resolve(infos, name)
        if name in info.tags and len(info.tags) > 1:
            info.tags.remove(name)
            _remove_tag(ws, name)
            return SnapshotDeletion(info, removed_tag=name)
        folders = (
            [
                folder
                for number in range(len(info.results))
                if (folder := _results_folder(ws, info, number)) is not None
            ]
            if remove_results
            else []
        )
        _remove_snapshot(ws, info.hash)
    # Folders go once the snapshot is gone from the store (committed): a crash between leaves
    # a results copy nobody names, never an index entry whose copy is missing.
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return SnapshotDeletion(info, removed_results=folders)


def _results_folder(ws: Workspace, info: SnapshotInfo, number: int) -> Path | None:
    """The results copy `info.results[number]` names, checked to lie inside its results
    resource; None when that resource is gone or remote (nothing to read or delete here)."""
    entry = info.results[number]
    path = _index_where(ws)
    field_name = f"snapshot {info.hash[:12]}: results[{number}]"
    parsed = as_ref(entry["ref"])  # the format checked it is a ref
    resource = ws.resources.get(parsed.name)
    if resource is None or not resource.is_local:
        return None
    if resource.role != "results":
        raise WorkspaceConfigError(
            f"{path} is corrupt: {field_name}.ref: {entry['ref']!r} is not in a "
            f"results resource ('{parsed.name}' holds {resource.role}); restore the store from "
            "a backup"
        )
    root = ws.resource_root(resource)
    folder = root / entry["folder"]  # the format checked it is `snapshots/<name>`
    real_root = os.path.realpath(root)
    real = os.path.realpath(folder)
    if not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise WorkspaceConfigError(
            f"{path}: {field_name}.folder: {folder} leads to {real}, outside "
            f"results resource '{resource.name}' ({real_root}); nothing was changed. Replace "
            f"the symlink on the way with a folder, or restore the store from a backup"
        )
    return folder
