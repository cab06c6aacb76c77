"""The schemas of every file dws_dagster reads from `.dataworkspace/` (and of the version marker
written beside Spark data), checked in one place.

A workspace can be cloned from someone else's repository or edited by hand, so these files are
untrusted input: a file of the wrong shape must be refused with a `WorkspaceConfigError` naming
the file and the field, before any of its content is used, and never surface as a `KeyError`,
`TypeError` or traceback deep inside a command. Names read from them that become file names
(snapshot hashes, tags, results folders, refs, versions) are constrained here too, so no value
read from a file can point a read, write or delete outside the workspace or its resource.

The schemas are TypedDicts validated by pydantic-core (Rust) in one call per file or per
journal tail, returning the plain dicts the rest of the code works with: the store loads
100,000 records this way, and building model objects per record would cost more than parsing.
Unknown keys are kept (`extra="allow"`), so a newer writer's additions survive a rewrite.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypeVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    InstanceOf,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    with_config,
)
from typing_extensions import TypedDict

from ..errors import WorkspaceConfigError

FORMAT = 1
_CONFIG = ConfigDict(extra="allow", strict=True)

#: A snapshot hash: xxh3-128 as lowercase hex. Manifest files are named after it.
SNAPSHOT_HASH_PATTERN = r"^[0-9a-f]{32}$"
SNAPSHOT_HASH = re.compile(SNAPSHOT_HASH_PATTERN)
#: A data version as dws_dagster computes it: content and Spark versions are xxh3-128 hex,
#: listing versions add `ls-`. Kept copies of data are named after it.
DATA_VERSION = re.compile(r"^(?:ls-)?[0-9a-f]{32}$")
#: A stored ref (normalised): a resource name, then components that are neither `.` nor `..`,
#: without backslashes or control characters. The same rules as `ResourceRef`, in a form the
#: validator checks in Rust (no look-ahead): a component starts with a character other than a
#: dot, or with one dot and another character, or with two dots and at least one more.
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_CHAR = r"[^/\\\x00-\x1f\x7f-\x9f]"
_NODOT = r"[^./\\\x00-\x1f\x7f-\x9f]"
_PART = rf"(?:{_NODOT}{_CHAR}*|\.{_NODOT}{_CHAR}*|\.\.{_CHAR}+)"
REF_PATTERN = rf"^{_NAME}(?:/{_PART})*$"

Ref = Annotated[str, StringConstraints(pattern=REF_PATTERN, max_length=4096 + 129)]
#: A version stored in a record names a kept copy (`@<version>`): one path component at most.
VERSION_PATTERN = r"^[^/\\\x00-\x1f\x7f-\x9f]{1,254}$"
Version = Annotated[str, StringConstraints(pattern=VERSION_PATTERN)]
SnapshotHash = Annotated[str, StringConstraints(pattern=SNAPSHOT_HASH_PATTERN)]
NonNegative = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
JsonObject = InstanceOf[dict]  # not copied: parsed JSON holds only str keys


# ----------------------------------------------------------------------- config files


@with_config(_CONFIG)
class ConfigFile(TypedDict):
    """`config.json`."""

    format: Literal[1]
    name: NotRequired[str | None]


@with_config(_CONFIG)
class ResourceJson(TypedDict):
    """One resource of `resources.json` (and of a snapshot manifest); its values are checked
    further by `config.make_resource`."""

    name: str
    role: str
    path: NotRequired[str | None]
    uri: NotRequired[str | None]
    versioning: NotRequired[str]
    description: NotRequired[str]


@with_config(_CONFIG)
class ResourcesFile(TypedDict):
    """`resources.json`."""

    format: Literal[1]
    resources: list[ResourceJson]


# ---------------------------------------------------------------------- lineage records


@with_config(_CONFIG)
class RefVersion(TypedDict):
    ref: Ref
    version: str


@with_config(_CONFIG)
class StepJson(TypedDict):
    name: str
    kind: NotRequired[Literal["script", "dagster-asset", "observation"]]
    run_id: NotRequired[str | None]
    partition: NotRequired[str | None]
    code_version: NotRequired[str | None]
    git_commit: NotRequired[str | None]
    code: NotRequired[list[RefVersion]]
    command_line: NotRequired[list[str]]


@with_config(_CONFIG)
class RecordJson(TypedDict):
    """A lineage record `R` (`records.LineageRecord.to_json`)."""

    format: NotRequired[Literal[1]]
    ref: Ref
    version: Version | None
    status: NotRequired[Literal["ok", "failed"]]
    step: NotRequired[StepJson | None]
    parameters: NotRequired[JsonObject]
    inputs: NotRequired[list[RefVersion]]
    provenance: NotRequired[dict[Ref, str]]
    start_time: NotRequired[str | None]
    end_time: NotRequired[str | None]
    metrics: NotRequired[JsonObject | None]
    error: NotRequired[str | None]
    extra: NotRequired[JsonObject]


@with_config(_CONFIG)
class RefStateJson(TypedDict):
    """The lineage state of one ref in `current.json` and in snapshot manifests."""

    owner: NotRequired[str | None]
    record: NotRequired[RecordJson | None]
    attempt: NotRequired[RecordJson | None]
    unknown: NotRequired[bool]


@with_config(_CONFIG)
class Position(TypedDict):
    segment: Positive
    offset: NonNegative


@with_config(_CONFIG)
class CurrentFile(TypedDict):
    """`lineage/current.json`."""

    format: Literal[1]
    position: Position
    refs: dict[Ref, RefStateJson]


# ----------------------------------------------------------------- journal operations


@with_config(_CONFIG)
class RecordOp(TypedDict):
    op: Literal["record"]
    record: RecordJson


@with_config(_CONFIG)
class FailOp(TypedDict):
    op: Literal["fail"]
    record: RecordJson
    unknown: NotRequired[bool]


@with_config(_CONFIG)
class ClaimOp(TypedDict):
    op: Literal["claim"]
    ref: Ref
    step: str


@with_config(_CONFIG)
class ForgetOp(TypedDict):
    op: Literal["forget"]
    ref: Ref


@with_config(_CONFIG)
class ResetOp(TypedDict):
    op: Literal["reset"]
    snapshot: SnapshotHash
    unknown: NotRequired[list[Ref]]


JournalOp = Annotated[RecordOp | FailOp | ClaimOp | ForgetOp | ResetOp, Field(discriminator="op")]


# -------------------------------------------------------------------------- snapshots


def _tag(value: str) -> str:
    from .snapshots import SnapshotError, validate_tag  # snapshots imports this module

    try:
        return validate_tag(value)
    except SnapshotError as exc:
        raise ValueError(str(exc)) from None


Tag = Annotated[str, AfterValidator(_tag)]
#: A snapshot's name as a folder: its first tag when it was taken, else its short hash.
_SHORT_HASH = re.compile(r"^[0-9a-f]{12}$")


def _results_folder(value: str) -> str:
    head, slash, name = value.partition("/")
    if head != "snapshots" or not slash or not (_SHORT_HASH.match(name) or _is_tag(name)):
        raise ValueError(f"{value!r} is not 'snapshots/<tag or short hash>'")
    return value


def _is_tag(name: str) -> bool:
    try:
        _tag(name)
    except ValueError:
        return False
    return True


@with_config(_CONFIG)
class ResultsEntry(TypedDict):
    ref: Ref
    folder: Annotated[str, AfterValidator(_results_folder)]


@with_config(_CONFIG)
class SnapshotEntry(TypedDict):
    hash: SnapshotHash
    tags: NotRequired[list[Tag]]
    message: NotRequired[str]
    created: NotRequired[str]
    metrics: NotRequired[JsonObject | None]
    results: NotRequired[list[ResultsEntry]]


@with_config(_CONFIG)
class IndexFile(TypedDict):
    """`snapshots/index.json`."""

    format: Literal[1]
    snapshots: list[SnapshotEntry]


@with_config(_CONFIG)
class ManifestFile(TypedDict):
    """`snapshots/<hash>.json`."""

    format: Literal[1]
    hash: SnapshotHash
    resources: NotRequired[list[ResourceJson]]
    refs: dict[Ref, RefStateJson]


# ------------------------------------------------------------- beside data and outbox


@with_config(_CONFIG)
class MarkerFile(TypedDict):
    """`_dws_version.json`, written beside Spark data. `version` names kept copies, so it must
    be one file name."""

    format: NotRequired[int]
    scheme: str
    version: Version
    rows: NotRequired[int | None]
    content: NotRequired[str | None]
    file_format: NotRequired[str | None]
    versioning: NotRequired[str | None]
    columns: NotRequired[list[tuple[str, str]] | None]
    lineage: NotRequired[JsonObject | None]


@with_config(_CONFIG)
class OutboxState(TypedDict):
    """`openlineage/outbox/state.json`."""

    format: Literal[1]
    position: Position
    delivered: NotRequired[NonNegative]
    attempts: NotRequired[NonNegative]
    next_attempt_at: NotRequired[str | None]
    last_error: NotRequired[str | None]
    last_error_at: NotRequired[str | None]
    last_delivery_at: NotRequired[str | None]


@with_config(_CONFIG)
class OutboxKeys(TypedDict):
    """`openlineage/outbox/journal/NNNNNNNN.keys.json`."""

    format: Literal[1]
    bytes: NonNegative
    keys: list[tuple[str, str]]


# --------------------------------------------------------------------------- checking

T = TypeVar("T")

CONFIG = TypeAdapter(ConfigFile)
RESOURCES = TypeAdapter(ResourcesFile)
CURRENT = TypeAdapter(CurrentFile)
JOURNAL = TypeAdapter(list[JournalOp])
RECORD = TypeAdapter(RecordJson)
INDEX = TypeAdapter(IndexFile)
MANIFEST = TypeAdapter(ManifestFile)
MARKER = TypeAdapter(MarkerFile)
OUTBOX_STATE = TypeAdapter(OutboxState)
OUTBOX_KEYS = TypeAdapter(OutboxKeys)

RESTORE = "restore it from git or a backup, or fix that field"
_PATTERN_NAMES = {
    REF_PATTERN: "a ref (RESOURCE/SUBPATH without '..', '.', empty parts, backslashes or "
                 "control characters)",
    SNAPSHOT_HASH_PATTERN: "a snapshot hash (32 lowercase hex digits)",
    VERSION_PATTERN: "a version (one file name: no '/', backslash or control character)",
    DATA_VERSION.pattern: "a data version (32 lowercase hex digits, or 'ls-' and 32)",
}


def check(adapter: TypeAdapter[T], data: Any, path: Path | str, *, advice: str = RESTORE,
          where: Any = None, prefix: str = "", what: str = "") -> T:
    """`data` (parsed from `path`) checked against a schema; a mismatch is a
    `WorkspaceConfigError` naming the file, the field and what to do.

    `where(location)` may describe the first part of an error's location (a journal's line
    number instead of its index in the parsed tail).
    """
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise WorkspaceConfigError(describe(exc, path, advice=advice, where=where,
                                            prefix=prefix, what=what)) from None
    except RecursionError:
        raise WorkspaceConfigError(
            f"{what + ' ' if what else ''}{path}: nested too deeply to be a dws_dagster file; "
            f"{advice}") from None


def describe(exc: ValidationError, path: Path | str, *, advice: str = RESTORE,
             where: Any = None, prefix: str = "", what: str = "") -> str:
    """One line: the file, the first bad field (`snapshots[2].hash`), what is wrong, what to do."""
    errors = exc.errors(include_url=False, include_context=True, include_input=True)
    first = errors[0]
    location = list(first["loc"])
    line = ""
    if where is not None and location and isinstance(location[0], int):
        line = where(location.pop(0))
        # A discriminated union adds the tag it chose ('record') as a location step: drop it.
        if location and location[0] in ("record", "fail", "claim", "forget", "reset"):
            location.pop(0)
    field = field_path([*([prefix] if prefix else []), *location])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "string_pattern_mismatch":
        expected = _PATTERN_NAMES.get((first.get("ctx") or {}).get("pattern", ""), "")
        shown = repr(first.get("input"))
        message = f"{shown[:80]}{'...' if len(shown) > 80 else ''} is not {expected}"
    if first["type"] == "union_tag_invalid":
        message = ("an operation this version of dws_dagster does not know (upgrade "
                   "dws_dagster if a newer one wrote it)")
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    parts = [f"{what + ' ' if what else ''}{path} is corrupt"]
    if line:
        parts.append(line)
    if field:
        parts.append(field)
    return f"{': '.join(parts)}: {message}{more}; {advice}"


def field_path(location: list[Any]) -> str:
    """`['snapshots', 2, 'hash']` -> `snapshots[2].hash`."""
    text = ""
    for step in location:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            step = str(step)
            if step.startswith(("function-", "[key]")) or step in ("str", "int", "dict", "list"):
                continue  # pydantic names some steps after a type or validator
            if not step.isidentifier():
                text += f"[{step!r}]"
            else:
                text += f".{step}" if text else step
    return text


def is_snapshot_hash(value: Any) -> bool:
    return isinstance(value, str) and SNAPSHOT_HASH.match(value) is not None


def is_data_version(value: Any) -> bool:
    return isinstance(value, str) and DATA_VERSION.match(value) is not None


# ------------------------------------------------------------- the store's fast path
#
# The store loads every ref's state and replays journal tails of thousands of records; pydantic
# rebuilds each dict it validates, which doubled the time to open a store of 10,000 refs. So
# the two bulk shapes (ref states, journal operations) are first checked by the plain loops
# below, which build nothing. They accept a subset of what the schemas accept (each check is at
# least as strict), and anything they refuse goes to the schema, which names the field at
# fault (or, if it accepts after all, supplies the value) — so the schemas above stay the one
# definition of the formats. `tests/test_metadata_fuzz.py` checks the two agree.

_REF_RE = re.compile(REF_PATTERN)
_VERSION_RE = re.compile(VERSION_PATTERN)
_STEP_KINDS = ("script", "dagster-asset", "observation")
_STEP_TEXTS = ("run_id", "partition", "code_version", "git_commit")
_RECORD_TEXTS = ("start_time", "end_time", "error")


#: Refs found valid, so each is matched once however many records name it (a store repeats
#: every ref in the provenance of each record downstream of it). Bounded: cleared when full.
_GOOD_REFS: set[str] = set()
_GOOD_REFS_MAX = 1 << 20


def _ref_ok(value: Any) -> bool:
    if type(value) is not str:
        return False
    if value in _GOOD_REFS:
        return True
    if len(value) > 4225 or _REF_RE.fullmatch(value) is None:
        return False
    if len(_GOOD_REFS) >= _GOOD_REFS_MAX:
        _GOOD_REFS.clear()
    _GOOD_REFS.add(value)
    return True


def _version_ok(value: str) -> bool:
    # The same as VERSION_PATTERN or stricter (isprintable also refuses some other spaces).
    return 0 < len(value) <= 254 and value.isprintable() and "/" not in value \
        and "\\" not in value


def _pairs_ok(items: Any) -> bool:
    if type(items) is not list:
        return False
    for item in items:
        if type(item) is not dict or type(item.get("version")) is not str:
            return False
        if not _ref_ok(item.get("ref")):
            return False
    return True


def _step_ok(step: Any) -> bool:
    if type(step) is not dict:
        return False
    get = step.get
    if type(get("name")) is not str or get("kind", "script") not in _STEP_KINDS:
        return False
    for value in (get("run_id"), get("partition"), get("code_version"), get("git_commit")):
        if value is not None and type(value) is not str:
            return False
    if "code" in step and not _pairs_ok(step["code"]):
        return False
    if "command_line" in step:
        line = step["command_line"]
        if type(line) is not list or not set(map(type, line)) <= _STR_ONLY:
            return False
    return True


def record_ok(record: Any) -> bool:
    """Whether `record` surely matches `RecordJson` (False: ask the schema)."""
    if type(record) is not dict or "version" not in record:
        return False
    get = record.get
    if not _ref_ok(get("ref")):
        return False
    version = record["version"]
    if version is not None and (type(version) is not str or not 0 < len(version) <= 254
                                or not version.isprintable() or "/" in version
                                or "\\" in version):
        return False  # stricter than VERSION_PATTERN: isprintable refuses some other spaces
    fmt = get("format", 1)
    if type(fmt) is not int or fmt != 1 or get("status", "ok") not in _STATUSES:
        return False
    step = get("step")
    if step is not None and not _step_ok(step):
        return False
    for value in (get("start_time"), get("end_time"), get("error")):
        if value is not None and type(value) is not str:
            return False
    for value in (get("parameters", _EMPTY), get("extra", _EMPTY)):
        if type(value) is not dict:
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
        (_GOOD_REFS.issuperset(provenance) or all(map(_ref_ok, provenance)))
        and set(map(type, provenance.values())) <= _STR_ONLY)


_EMPTY: dict[str, Any] = {}
_STATUSES = ("ok", "failed")
_STR_ONLY = frozenset({str})


def states_ok(refs: Any) -> bool:
    """Whether a `{ref: state}` mapping surely matches `dict[Ref, RefStateJson]`."""
    if type(refs) is not dict:
        return False
    for ref, state in refs.items():
        if type(state) is not dict or not _ref_ok(ref):
            return False
        owner = state.get("owner")
        unknown = state.get("unknown", False)
        if (owner is not None and type(owner) is not str) or type(unknown) is not bool:
            return False
        record = state.get("record")
        if record is not None and not record_ok(record):
            return False
        attempt = state.get("attempt")
        if attempt is not None and not record_ok(attempt):
            return False
    return True


def ops_ok(ops: list[Any]) -> bool:
    """Whether parsed journal lines surely match `list[JournalOp]`."""
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
            if not _ref_ok(op.get("ref")) or type(op.get("step")) is not str:
                return False
        elif kind == "forget":
            if not _ref_ok(op.get("ref")):
                return False
        elif kind == "reset":
            unknown = op.get("unknown", [])
            if not is_snapshot_hash(op.get("snapshot")) or type(unknown) is not list \
                    or not all(_ref_ok(ref) for ref in unknown):
                return False
        else:
            return False
    return True


def check_states(refs: Any, path: Path | str, *, what: str = "", advice: str = RESTORE
                 ) -> dict[str, Any]:
    """The `{ref: state}` part of `current.json` or a manifest, checked."""
    if states_ok(refs):
        return refs  # type: ignore[no-any-return]
    return check(_STATES, refs, path, prefix="refs", what=what, advice=advice)


def check_ops(ops: list[Any], path: Path | str, where: Any) -> list[dict[str, Any]]:
    """Journal operations parsed from `path`, checked; `where(index)` names a line."""
    if ops_ok(ops):
        return ops
    return check(JOURNAL, ops, path, where=where, what="lineage journal",
                 advice="restore the lineage folder from git or a backup (or move that line "
                        "out of the file)")


_STATES = TypeAdapter(dict[Ref, RefStateJson])


@with_config(_CONFIG)
class _CurrentShell(TypedDict):
    """`CurrentFile` without looking into `refs` (checked by `check_states`)."""

    format: Literal[1]
    position: Position
    refs: InstanceOf[dict]


@with_config(_CONFIG)
class _ManifestShell(TypedDict):
    """`ManifestFile` without looking into `refs` (checked by `check_states`)."""

    format: Literal[1]
    hash: SnapshotHash
    resources: NotRequired[list[ResourceJson]]
    refs: InstanceOf[dict]


CURRENT_SHELL = TypeAdapter(_CurrentShell)
MANIFEST_SHELL = TypeAdapter(_ManifestShell)
