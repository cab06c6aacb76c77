"""The rows `status` reports, one a ref, and the data verification of `status --verify`: what
the command line prints for every ref and the dws asset checks compute for one asset's ref,
from one implementation.

A ref's data is verified against the version its lineage says: `matches`, `changed` (with the
version `found`), `missing`, or `unchecked` (remote data, or data that cannot be read here).
`--verify` re-reads every byte (`Workspace.version_of`); given the machine's stat-keyed file
hash cache (`snapshots/file_hashes.py`), the bytes of files unchanged since they were last hashed
are not read again: the version is the same (the cache holds a file's hash only while its
device, inode, size and change stamps are unchanged), at the cost of listing the files.
"""

from __future__ import annotations

from typing import Any

from dws_dagster.errors import DataNotFoundError, DwsError
from dws_dagster.snapshots.file_hashes import FileHashCache
from dws_dagster.store.messages import attention_note
from dws_dagster.store.ref_state import RefState
from dws_dagster.views.status.summary import source_rows
from dws_dagster.workspace.definition import RemoteDataError, Workspace

Row = dict[str, Any]

#: `data` of a verified row.
MATCHES, CHANGED, MISSING, UNCHECKED = "matches", "changed", "missing", "unchecked"


def status_rows(ws: Workspace) -> list[Row]:
    """A row for every ref the lineage names (written, observed, or only read), sorted by ref,
    not yet verified (`verify_row`)."""
    rows = []
    items = ws.store.summaries()
    for item in items:
        row: Row = {
            "ref": item.ref,
            "version": item.version,
            "status": item.status,
            "step": item.owner,
            "finished": item.finished,
        }
        _add_attention(row, item.ref, item.state)
        rows.append(row)
    rows += source_rows(ws.store.read_without_lineage(), [item.ref for item in items])
    rows.sort(key=lambda row: row["ref"])
    return rows


def ref_row(ref: str, state: RefState | None) -> Row:
    """The status row of one ref from its current lineage (None: the store has none)."""
    if state is None:
        return {"ref": ref, "version": None, "status": "none", "step": None, "finished": None}
    latest = state.latest or {}
    row: Row = {
        "ref": ref,
        "version": state.version,
        "status": state.status,
        "step": state.owner,
        "finished": latest.get("end_time"),
    }
    _add_attention(row, ref, state)
    return row


def _add_attention(row: Row, ref: str, state: RefState | None) -> None:
    if state is None:
        return
    if state.attempt is not None:
        row["error"] = state.attempt.get("error")
    row["attention"] = attention_note(ref, state)


def found_version(ws: Workspace, ref: str, *, hashes: FileHashCache | None = None) -> str | None:
    """The version of `ref`'s data now (None: no data there), by the bytes of every file, or
    with `hashes` those of the files changed since they were hashed. Raises `RemoteDataError`
    for remote data and a `DwsError` for data that cannot be read."""
    if hashes is None:
        try:
            return ws.version_of(ref)
        except DataNotFoundError:
            return None
    from dws_dagster.snapshots.retention import scan

    resolved = ws.check_ref(ref)
    if not ws.resource(resolved.name).is_local:
        return ws.version_of(resolved)  # raises RemoteDataError, naming the resource
    return scan(ws, resolved, hashes, on_skip=lambda message: None).version


def verify_row(ws: Workspace, row: Row, *, hashes: FileHashCache | None = None) -> None:
    """Set `data`: whether the data of the row's ref is the version its lineage says
    (`matches`), another one (`changed`, with the version `found`), gone (`missing`), or could
    not be read (`unchecked`). Readers of observed source data that changed are looked up
    (`read_by`), to say what to re-run."""
    try:
        actual: str | None = found_version(ws, row["ref"], hashes=hashes)
        data = MISSING if actual is None else MATCHES if actual == row["version"] else CHANGED
    except (RemoteDataError, DwsError):
        actual, data = None, UNCHECKED
    row["data"] = data
    if data == CHANGED:
        row["found"] = actual
        if row["step"] is None and "read_by" not in row:  # observed source data
            row["read_by"] = [
                {"ref": reader, "step": state.owner}
                for reader, state, _ in ws.store.readers(row["ref"])
            ]
