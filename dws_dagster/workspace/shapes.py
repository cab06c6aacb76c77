"""Quick checks that a file read from `.dataworkspace/` has the shape `formats` defines, in
plain Python, and the one entry point (`checked`) that callers use.

`formats` holds the schemas (pydantic) and turns a mismatch into a `WorkspaceConfigError`
naming the file and the field. Importing pydantic and building those schemas costs a new
process more than a whole `dws-dagster lineage` query, and pydantic rebuilds every dict it
validates, which would dominate opening a large store. So each file is first checked here by
loops that build nothing; only a file they refuse goes to `formats`, which names what is wrong
(or, if it accepts the file after all, returns it). Every check here is at least as strict as
its schema: `tests/test_metadata_fuzz.py` checks that what these accept the schemas accept too.

The patterns of names that become file names (refs, versions, snapshot hashes, results
folders) are defined here, so `formats` and the code building paths share them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dws_dagster.workspace.refs import MAX_COMPONENT_BYTES, MAX_SUBPATH_BYTES

#: A snapshot hash: xxh3-128 as lowercase hex. Manifest files are named after it.
SNAPSHOT_HASH_PATTERN = r"^[0-9a-f]{32}$"
SNAPSHOT_HASH = re.compile(SNAPSHOT_HASH_PATTERN)
#: A data version as dws_dagster computes it: content and Spark versions are xxh3-128 hex,
#: listing versions add `ls-`.
DATA_VERSION = re.compile(r"^(?:ls-)?[0-9a-f]{32}$")
#: A stored ref (normalised): a resource name, then components that are neither `.` nor `..`,
#: without backslashes or control characters. The same rules as `ResourceRef`, in a form the
#: schemas check in Rust (no look-ahead): a component starts with a character other than a
#: dot, or with one dot and another character, or with two dots and at least one more.
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_CHAR = r"[^/\\\x00-\x1f\x7f-\x9f]"
_NODOT = r"[^./\\\x00-\x1f\x7f-\x9f]"
_PART = rf"(?:{_NODOT}{_CHAR}*|\.{_NODOT}{_CHAR}*|\.\.{_CHAR}+)"
REF_PATTERN = rf"^{_NAME}(?:/{_PART})*$"
#: A folder inside the workspace, relative to its root: "." or components as a ref's.
WORKING_FOLDER_PATTERN = rf"^(?:\.|{_PART}(?:/{_PART})*)$"
#: A version stored in a record names a kept copy (`@<version>`): one file name at most.
VERSION_PATTERN = r"^[^/\\\x00-\x1f\x7f-\x9f]{1,254}$"
#: A snapshot's results folder name when it has no tag: its short hash.
SHORT_HASH = re.compile(r"^[0-9a-f]{12}$")

RESTORE = "restore it from git or a backup, or fix that field"

_REF_RE = re.compile(REF_PATTERN)
_WORKING_FOLDER_RE = re.compile(WORKING_FOLDER_PATTERN)
_STEP_KINDS = ("script", "dagster-asset", "observation")
_STATUSES = ("ok", "failed")
_STR_ONLY = frozenset({str})
_EMPTY: dict[str, Any] = {}
#: Refs found valid, so each is matched once however many records name it (a store repeats
#: every ref in the provenance of each record downstream of it). Bounded: cleared when full.
_GOOD_REFS: set[str] = set()
_GOOD_REFS_MAX = 1 << 20


def is_snapshot_hash(value: Any) -> bool:
    return type(value) is str and SNAPSHOT_HASH.fullmatch(value) is not None


def is_data_version(value: Any) -> bool:
    return type(value) is str and DATA_VERSION.fullmatch(value) is not None


def is_tag(value: Any) -> bool:
    from dws_dagster.workspace.snapshots.history import (  # snapshots imports this module
        SnapshotError,
        validate_tag,
    )

    try:
        validate_tag(value)
    except SnapshotError:
        return False
    return True


def results_folder_ok(value: Any) -> bool:
    """`snapshots/<name>`, where name is a tag or a short hash: the only folder a snapshot's
    results copy may have inside its results resource."""
    if type(value) is not str:
        return False
    head, slash, name = value.partition("/")
    return (
        head == "snapshots"
        and bool(slash)
        and (SHORT_HASH.fullmatch(name) is not None or is_tag(name))
    )


# ----------------------------------------------------------------- lineage records


def ref_ok(value: Any) -> bool:
    """Whether `value` surely is a ref (`ResourceRef`'s rules), remembering refs seen."""
    if type(value) is not str:
        return False
    if value in _GOOD_REFS:
        return True
    if len(value) > 4225 or _REF_RE.fullmatch(value) is None or not ref_sizes_ok(value):
        return False
    if len(_GOOD_REFS) >= _GOOD_REFS_MAX:
        _GOOD_REFS.clear()
    _GOOD_REFS.add(value)
    return True


def ref_sizes_ok(value: str) -> bool:
    """The byte limits `ResourceRef` puts on a subpath and its components (file names hold
    255 bytes), which a pattern cannot count: a stored ref beyond them is a damaged file, not a
    ref to refuse later."""
    _, _, subpath = value.partition("/")
    encoded = subpath.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_COMPONENT_BYTES:
        return True
    return len(encoded) <= MAX_SUBPATH_BYTES and all(
        len(part) <= MAX_COMPONENT_BYTES for part in encoded.split(b"/")
    )


def _text(value: Any) -> bool:
    return value is None or type(value) is str


def _pairs_ok(items: Any) -> bool:
    if type(items) is not list:
        return False
    for item in items:
        if (
            type(item) is not dict
            or type(item.get("version")) is not str
            or not ref_ok(item.get("ref"))
        ):
            return False
    return True


def _working_folder_ok(value: Any) -> bool:
    """None, "." (the workspace root) or a relative path that stays inside the workspace."""
    return value is None or (
        type(value) is str
        and len(value) <= 4096
        and _WORKING_FOLDER_RE.fullmatch(value) is not None
    )


def _step_ok(step: Any) -> bool:
    if type(step) is not dict:
        return False
    get = step.get
    if type(get("name")) is not str or get("kind", "script") not in _STEP_KINDS:
        return False
    if not (
        _text(get("run_id"))
        and _text(get("partition"))
        and _text(get("code_version"))
        and _text(get("git_commit"))
        and _working_folder_ok(get("working_folder"))
    ):
        return False
    if "code" in step and not _pairs_ok(step["code"]):
        return False
    if "command_line" in step:
        line = step["command_line"]
        if type(line) is not list or not set(map(type, line)) <= _STR_ONLY:
            return False
    return True


def record_ok(record: Any) -> bool:
    """Whether `record` surely matches `formats.RecordJson` (False: ask the schema)."""
    if type(record) is not dict or "version" not in record:
        return False
    get = record.get
    if not ref_ok(get("ref")):
        return False
    version = record["version"]
    if version is not None and (
        type(version) is not str
        or not 0 < len(version) <= 254
        or not version.isprintable()
        or "/" in version
        or "\\" in version
    ):
        return False  # stricter than VERSION_PATTERN: isprintable refuses some other spaces
    fmt = get("format", 1)
    if type(fmt) is not int or fmt != 1 or get("status", "ok") not in _STATUSES:
        return False
    step = get("step")
    if step is not None and not _step_ok(step):
        return False
    if not (_text(get("start_time")) and _text(get("end_time")) and _text(get("error"))):
        return False
    if type(get("parameters", _EMPTY)) is not dict or type(get("extra", _EMPTY)) is not dict:
        return False
    metrics = get("metrics")
    if metrics is not None and type(metrics) is not dict:
        return False
    if "inputs" in record and not _pairs_ok(record["inputs"]):
        return False
    provenance = get("provenance", _EMPTY)
    if type(provenance) is not dict:
        return False
    return not provenance or (
        (_GOOD_REFS.issuperset(provenance) or all(map(ref_ok, provenance)))
        and set(map(type, provenance.values())) <= _STR_ONLY
    )


def states_ok(refs: Any) -> bool:
    """Whether a `{ref: state}` mapping surely matches `dict[Ref, formats.RefStateJson]`."""
    if type(refs) is not dict:
        return False
    for ref, state in refs.items():
        if type(state) is not dict or not ref_ok(ref):
            return False
        owner = state.get("owner")
        if (owner is not None and type(owner) is not str) or type(
            state.get("unknown", False)
        ) is not bool:
            return False
        record = state.get("record")
        if record is not None and not record_ok(record):
            return False
        attempt = state.get("attempt")
        if attempt is not None and not record_ok(attempt):
            return False
    return True


def ops_ok(ops: list[Any]) -> bool:
    """Whether parsed journal lines surely match `list[formats.JournalOp]`."""
    for op in ops:
        if type(op) is not dict:
            return False
        kind = op.get("op")
        if kind == "record":
            if not record_ok(op.get("record")):
                return False
        elif kind == "fail":
            if not record_ok(op.get("record")) or type(op.get("unknown", False)) is not bool:
                return False
        elif kind == "claim":
            if not ref_ok(op.get("ref")) or type(op.get("step")) is not str:
                return False
        elif kind == "forget":
            if not ref_ok(op.get("ref")):
                return False
        elif kind == "reset":
            unknown = op.get("unknown", [])
            if (
                not is_snapshot_hash(op.get("snapshot"))
                or type(unknown) is not list
                or not all(map(ref_ok, unknown))
            ):
                return False
        else:
            return False
    return True


# --------------------------------------------------------------------- whole files


def _int(value: Any, least: int) -> bool:
    return type(value) is int and value >= least


def _format_ok(data: Any) -> bool:
    return type(data) is dict and type(data.get("format")) is int and data["format"] == 1


def _position_ok(position: Any) -> bool:
    return (
        type(position) is dict
        and _int(position.get("segment"), 1)
        and _int(position.get("offset"), 0)
    )


def config_ok(data: Any) -> bool:
    if not (_format_ok(data) and _text(data.get("name"))):
        return False
    replay = data.get("replay_of")
    return "replay_of" not in data or (
        type(replay) is dict
        and type(replay.get("root")) is str
        and type(replay.get("snapshot")) is str
        and type(replay.get("clone", "")) is str
        and SNAPSHOT_HASH.fullmatch(replay["snapshot"]) is not None
    )


def _resource_ok(item: Any) -> bool:
    if (
        type(item) is not dict
        or type(item.get("name")) is not str
        or type(item.get("role")) is not str
    ):
        return False
    return (
        _text(item.get("path"))
        and _text(item.get("uri"))
        and type(item.get("versioning", "")) is str
        and type(item.get("description", "")) is str
    )


def resources_ok(data: Any) -> bool:
    items = data.get("resources") if _format_ok(data) else None
    return type(items) is list and all(map(_resource_ok, items))


def current_shell_ok(data: Any) -> bool:
    return (
        _format_ok(data) and _position_ok(data.get("position")) and type(data.get("refs")) is dict
    )


def manifest_shell_ok(data: Any) -> bool:
    resources = data.get("resources", []) if _format_ok(data) else None
    return (
        type(resources) is list
        and all(map(_resource_ok, resources))
        and is_snapshot_hash(data.get("hash"))
        and type(data.get("refs")) is dict
    )


def _entry_ok(entry: Any) -> bool:
    if type(entry) is not dict or not is_snapshot_hash(entry.get("hash")):
        return False
    tags, results = entry.get("tags", []), entry.get("results", [])
    metrics = entry.get("metrics")
    if (
        type(tags) is not list
        or not all(map(is_tag, tags))
        or type(results) is not list
        or type(entry.get("message", "")) is not str
        or type(entry.get("created", "")) is not str
        or (metrics is not None and type(metrics) is not dict)
    ):
        return False
    return all(
        type(item) is dict and ref_ok(item.get("ref")) and results_folder_ok(item.get("folder"))
        for item in results
    )


def index_ok(data: Any) -> bool:
    snapshots = data.get("snapshots") if _format_ok(data) else None
    return type(snapshots) is list and all(map(_entry_ok, snapshots))


def _pair_ok(pair: Any) -> bool:
    return type(pair) is list and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str


def marker_ok(data: Any) -> bool:
    if (
        type(data) is not dict
        or type(data.get("scheme")) is not str
        or type(data.get("format", 1)) is not int
    ):
        return False
    version, columns, rows = data.get("version"), data.get("columns"), data.get("rows")
    lineage = data.get("lineage")
    return (
        type(version) is str
        and re.fullmatch(VERSION_PATTERN, version) is not None
        and (rows is None or type(rows) is int)
        and _text(data.get("content"))
        and _text(data.get("file_format"))
        and _text(data.get("versioning"))
        and (columns is None or (type(columns) is list and all(map(_pair_ok, columns))))
        and (lineage is None or type(lineage) is dict)
    )


def outbox_state_ok(data: Any) -> bool:
    return (
        _format_ok(data)
        and _position_ok(data.get("position"))
        and _int(data.get("delivered", 0), 0)
        and _int(data.get("attempts", 0), 0)
        and _text(data.get("next_attempt_at"))
        and _text(data.get("last_error"))
        and _text(data.get("last_error_at"))
        and _text(data.get("last_delivery_at"))
    )


def outbox_keys_ok(data: Any) -> bool:
    keys = data.get("keys") if _format_ok(data) else None
    return (
        _int(data.get("bytes") if type(data) is dict else None, 0)
        and type(keys) is list
        and all(map(_pair_ok, keys))
    )


#: kind -> (quick check, name of the schema's TypeAdapter in `formats`).
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "config": (config_ok, "CONFIG"),
    "resources": (resources_ok, "RESOURCES"),
    "current": (current_shell_ok, "CURRENT_SHELL"),
    "manifest": (manifest_shell_ok, "MANIFEST_SHELL"),
    "states": (states_ok, "STATES"),
    "record": (record_ok, "RECORD"),
    "index": (index_ok, "INDEX"),
    "marker": (marker_ok, "MARKER"),
    "outbox state": (outbox_state_ok, "OUTBOX_STATE"),
    "outbox keys": (outbox_keys_ok, "OUTBOX_KEYS"),
}


def checked(
    kind: str,
    data: Any,
    path: Path | str,
    *,
    what: str = "",
    advice: str = RESTORE,
    prefix: str = "",
) -> Any:
    """`data` (parsed from `path`) if it has the shape of a `kind` file, else
    `WorkspaceConfigError` naming the file, the field and what to do (from `formats`)."""
    quick, schema = _KINDS[kind]
    if quick(data):
        return data
    from dws_dagster.workspace import formats

    return formats.check(
        getattr(formats, schema), data, path, what=what, advice=advice, prefix=prefix
    )


def check_states(
    refs: Any, path: Path | str, *, what: str = "", advice: str = RESTORE
) -> dict[str, Any]:
    """The `{ref: state}` part of `current.json` or a manifest, checked."""
    return checked(
        "states",
        refs,
        path,
        what=what,
        advice=advice,
        prefix="refs",
    )


def check_ops(
    ops: list[Any], path: Path | str, where: Callable[[int], str]
) -> list[dict[str, Any]]:
    """Journal operations parsed from `path`, checked; `where(index)` names a line."""
    if ops_ok(ops):
        return ops
    from dws_dagster.workspace import formats

    return formats.check(
        formats.JOURNAL,  # type: ignore[arg-type]  # checked models, read as their dicts
        ops,
        path,
        where=where,
        what="lineage journal",
        advice="restore the lineage folder from git or a backup (or move "
        "that line out of the file)",
    )
