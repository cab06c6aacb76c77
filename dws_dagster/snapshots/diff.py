"""What changed between two snapshots, or between a snapshot and the workspace now.

A diff answers "why is this result different": which refs' versions, steps, parameters, code
or inputs differ (the lineage), and what changed beyond what the lineage says (drift, missing
data, source data and code resources). Each change is kept as data (`ChangeDetail`) as well
as text, so readers (`dws-dagster diff`, the lineage page) can group and show it their way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from dws_dagster.snapshots import snapshot_data
from dws_dagster.snapshots.file_hashes import FileHashCache
from dws_dagster.snapshots.index import (
    SnapshotInfo,
    list_snapshots,
    resolve_in,
    resolve_snapshot,
)
from dws_dagster.snapshots.retention import (
    CODE,
    DRIFT,
    LINEAGE,
    MISSING,
    REMOTE,
    RESOURCE,
    DataRow,
    capture,
    resource_states,
)
from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.files import canonical_json
from dws_dagster.workspace.shapes import CURRENT
from dws_dagster.workspace.versions import short


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


def diff_lineage(ws: Workspace, before: str, after: str) -> list[RefChange]:
    """What changed between two snapshots (or `current`): the database finds the refs whose
    records differ, and only their records are read."""
    infos = list_snapshots(ws)
    a = None if before == CURRENT else resolve_in(infos, before)
    b = None if after == CURRENT else resolve_in(infos, after)
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
    # Read, never written: a diff only looks (a snapshot keeps the cache up to date).
    hashes = FileHashCache.of_workspace(ws.meta_dir, read_only=True)
    rows, scans = capture(ws, ws.store.recorded_versions(), hashes)

    def scanned_files(ref: str, version: str) -> dict[str, str] | None:
        found = scans.get(ref)
        if found is None or found.version != version:
            return None
        return {f.relpath: f.digest for f in found.files}

    return {row.ref: row for row in rows}, resource_states(ws), scanned_files


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
