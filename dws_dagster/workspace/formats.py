"""The schemas of every file dws_dagster reads from `.dataworkspace/` (and of the version marker
written beside Spark data), checked in one place.

A workspace can be cloned from someone else's repository or edited by hand, so these files are
untrusted input: a file of the wrong shape must be refused with a `WorkspaceConfigError` naming
the file and the field, before any of its content is used, and never surface as a `KeyError`,
`TypeError` or traceback deep inside a command. Names read from them that become file names
(snapshot hashes, tags, results folders, refs, versions) are constrained here too, so no value
read from a file can point a read, write or delete outside the workspace or its resource.

The schemas are TypedDicts over plain dicts (what the rest of the code works with), validated
by pydantic-core; unknown keys are allowed (`extra="allow"`), so a newer writer's additions
survive a rewrite. Callers go through `shapes.checked`: plain-Python checks at least as strict
as these schemas accept a good file without importing pydantic (costly for a new process) or
rebuilding its dicts; a file they refuse comes here, to be named field by field.
"""

from __future__ import annotations

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

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace.refs import MAX_COMPONENT_BYTES, MAX_SUBPATH_BYTES
from dws_dagster.workspace.shapes import (
    DATA_VERSION,
    REF_PATTERN,
    RESTORE,
    SNAPSHOT_HASH_PATTERN,
    VERSION_PATTERN,
    WORKING_FOLDER_PATTERN,
    ref_sizes_ok,
    results_folder_ok,
)

FORMAT = 1
_CONFIG = ConfigDict(extra="allow", strict=True)


def _ref_sizes(value: str) -> str:
    if not ref_sizes_ok(value):
        raise ValueError(
            f"subpath over {MAX_SUBPATH_BYTES} bytes, or a part over {MAX_COMPONENT_BYTES} bytes"
        )
    return value


Ref = Annotated[
    str, StringConstraints(pattern=REF_PATTERN, max_length=4096 + 129), AfterValidator(_ref_sizes)
]
Version = Annotated[str, StringConstraints(pattern=VERSION_PATTERN)]
WorkingFolder = Annotated[str, StringConstraints(pattern=WORKING_FOLDER_PATTERN, max_length=4096)]
SnapshotHash = Annotated[str, StringConstraints(pattern=SNAPSHOT_HASH_PATTERN)]
NonNegative = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
#: `[a, b]`: JSON has no tuples (and a strict tuple refuses a list).
Pair = Annotated[list[str], Field(min_length=2, max_length=2)]
JsonObject = InstanceOf[dict]  # not copied: parsed JSON holds only str keys


# ----------------------------------------------------------------------- config files


@with_config(_CONFIG)
class ReplayOf(TypedDict):
    """A replay's scratch workspace names the snapshot it replays and the workspace's root."""

    snapshot: SnapshotHash
    root: str
    #: The clone of the repository the scratch workspace is in, when the workspace is in git.
    clone: NotRequired[str]


@with_config(_CONFIG)
class ConfigFile(TypedDict):
    """`config.json`."""

    format: Literal[1]
    name: NotRequired[str | None]
    #: Checked by `db.settings.resolve`, which says what is wrong in its own terms.
    store: NotRequired[Any]
    replay_of: NotRequired[ReplayOf]


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
    working_folder: NotRequired[WorkingFolder | None]


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
    from dws_dagster.workspace.snapshots.history import (  # snapshots imports this module
        SnapshotError,
        validate_tag,
    )

    try:
        return validate_tag(value)
    except SnapshotError as exc:
        raise ValueError(str(exc)) from None


def _results_folder(value: str) -> str:
    if not results_folder_ok(value):
        raise ValueError(f"{value!r} is not 'snapshots/<tag or short hash>'")
    return value


Tag = Annotated[str, AfterValidator(_tag)]


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
    columns: NotRequired[list[Pair] | None]
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
    keys: list[Pair]


@with_config(_CONFIG)
class ReplayVerdictJson(TypedDict):
    """One ref of a replay record: the recorded version beside the reproduced one."""

    ref: Ref
    step: str
    verdict: Literal["reproduced", "differs", "non-deterministic", "not replayable", "failed"]
    recorded: Version | None
    reproduced: Version | None
    detail: str | None
    columns: NotRequired[list[str] | None]


@with_config(_CONFIG)
class ReplayFile(TypedDict):
    """`replays/<snapshot>-<time>.json`: what one replay of a snapshot found."""

    format: Literal[1]
    snapshot: SnapshotHash
    snapshot_name: str
    tags: NotRequired[list[str]]
    replayed_at: str
    into: str
    in_place: NotRequired[bool]
    reproduced: bool
    refs: list[ReplayVerdictJson]


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
REPLAY = TypeAdapter(ReplayFile)

_PATTERN_NAMES = {
    REF_PATTERN: "a ref (RESOURCE/SUBPATH without '..', '.', empty parts, backslashes or "
    "control characters)",
    SNAPSHOT_HASH_PATTERN: "a snapshot hash (32 lowercase hex digits)",
    VERSION_PATTERN: "a version (one file name: no '/', backslash or control character)",
    DATA_VERSION.pattern: "a data version (32 lowercase hex digits, or 'ls-' and 32)",
    WORKING_FOLDER_PATTERN: "a folder inside the workspace ('.', or a relative path without "
    "'..', '.', empty parts, backslashes or control characters)",
}


def check(
    adapter: TypeAdapter[T],
    data: Any,
    path: Path | str,
    *,
    advice: str = RESTORE,
    where: Any = None,
    prefix: str = "",
    what: str = "",
) -> T:
    """`data` (parsed from `path`) checked against a schema; a mismatch is a
    `WorkspaceConfigError` naming the file, the field and what to do.

    `where(location)` may describe the first part of an error's location (a journal's line
    number instead of its index in the parsed tail).
    """
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise WorkspaceConfigError(
            describe(exc, path, advice=advice, where=where, prefix=prefix, what=what)
        ) from None
    except RecursionError:
        raise WorkspaceConfigError(
            f"{what + ' ' if what else ''}{path}: nested too deeply to be a dws_dagster file; "
            f"{advice}"
        ) from None


def describe(
    exc: ValidationError,
    path: Path | str,
    *,
    advice: str = RESTORE,
    where: Any = None,
    prefix: str = "",
    what: str = "",
) -> str:
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
        pattern = (first.get("ctx") or {}).get("pattern", "")
        # A pattern without a name here is still said: the reason is never lost.
        expected = _PATTERN_NAMES.get(pattern) or f"text matching {pattern!r}"
        shown = repr(first.get("input"))
        message = f"{shown[:80]}{'...' if len(shown) > 80 else ''} is not {expected}"
    if first["type"] == "union_tag_invalid":
        message = (
            "an operation this version of dws_dagster does not know (upgrade "
            "dws_dagster if a newer one wrote it)"
        )
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


# The bulk parts, checked separately so that the shells stay cheap (see `shapes`).
STATES = TypeAdapter(dict[Ref, RefStateJson])


@with_config(_CONFIG)
class _CurrentShell(TypedDict):
    """`CurrentFile` without looking into `refs` (checked as `STATES`)."""

    format: Literal[1]
    position: Position
    refs: InstanceOf[dict]


@with_config(_CONFIG)
class _ManifestShell(TypedDict):
    """`ManifestFile` without looking into `refs` (checked as `STATES`)."""

    format: Literal[1]
    hash: SnapshotHash
    resources: NotRequired[list[ResourceJson]]
    refs: InstanceOf[dict]


CURRENT_SHELL = TypeAdapter(_CurrentShell)
MANIFEST_SHELL = TypeAdapter(_ManifestShell)
