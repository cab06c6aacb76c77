"""The formats of everything dws_dagster reads back from `.dataworkspace/` and from the store's
rows (and of the version marker written beside Spark data), each declared once, here.

A workspace can be cloned from someone else's repository or edited by hand, and a database
restored from elsewhere, so all of it is untrusted input: a value of the wrong shape must be
refused with a `WorkspaceConfigError` naming the file (or the store) and the field, before any
of it is used, and never surface as a `KeyError`, `TypeError` or traceback deep inside a
command. Names read from them that become file names (snapshot hashes, tags, results folders,
refs, versions) are constrained here too, by the rules of `shapes`, so no value read back can
point a read, write or delete outside the workspace or its resource.

Each format is a TypedDict over the plain dicts the rest of the code works with; unknown keys
are allowed, so a newer writer's additions survive a rewrite. `typed_checks` compiles each
declaration once, on first use, into the check callers use: `FORMAT.ok(data)` where only the
verdict matters, `check(FORMAT, data, path)` where a refusal must say what is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from dws_dagster.errors import SnapshotError, WorkspaceConfigError
from dws_dagster.workspace.refs import MAX_COMPONENT_BYTES, MAX_SUBPATH_BYTES
from dws_dagster.workspace.shapes import (
    GOOD_REFS,
    REF_PATTERN,
    SNAPSHOT_HASH,
    WORKING_FOLDER_PATTERN,
    is_tag,
    ref_ok,
    results_folder_ok,
    validate_tag,
    version_ok,
)
from dws_dagster.workspace.typed_checks import (
    CheckFunction,
    Items,
    Location,
    Problem,
    Rule,
    compile_check,
)

#: What to do about a damaged file, unless its reader says better.
RESTORE = "restore it from git or a backup, or fix that field"

_REF_RE = re.compile(REF_PATTERN)
_WORKING_FOLDER_RE = re.compile(WORKING_FOLDER_PATTERN)


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text[:80]}{'...' if len(text) > 80 else ''}"


def _not_a_ref(value: str) -> str:
    if _REF_RE.fullmatch(value) is not None:  # the right form, too long for file names
        return f"subpath over {MAX_SUBPATH_BYTES} bytes, or a part over {MAX_COMPONENT_BYTES} bytes"
    return (
        f"{_shown(value)} is not a ref (RESOURCE/SUBPATH without '..', '.', empty parts, "
        "backslashes or control characters)"
    )


def _not_a_tag(value: str) -> str:
    try:
        validate_tag(value)
    except SnapshotError as exc:
        return str(exc)
    return f"{_shown(value)} is not a tag"


Ref = Annotated[str, Rule(ref_ok, _not_a_ref, known=GOOD_REFS)]
Version = Annotated[
    str,
    Rule(
        version_ok,
        lambda v: (
            f"{_shown(v)} is not a version (one file name of 1 to 254 characters: no '/', "
            "backslash or control character)"
        ),
    ),
]
WorkingFolder = Annotated[
    str,
    Rule(
        lambda v: len(v) <= 4096 and _WORKING_FOLDER_RE.fullmatch(v),
        lambda v: (
            f"{_shown(v)} is not a folder inside the workspace ('.', or a relative path "
            "without '..', '.', empty parts, backslashes or control characters)"
        ),
    ),
]
SnapshotHash = Annotated[
    str,
    Rule(
        SNAPSHOT_HASH.fullmatch,
        lambda v: f"{_shown(v)} is not a snapshot hash (32 lowercase hex digits)",
    ),
]
Tag = Annotated[str, Rule(is_tag, _not_a_tag)]
ResultsFolder = Annotated[
    str,
    Rule(results_folder_ok, lambda v: f"{_shown(v)} is not 'snapshots/<tag or short hash>'"),
]
#: `[a, b]`: JSON has no tuples.
Pair = Annotated[list[str], Items(2)]
#: Any JSON object (checked as one, its content not looked into).
JsonObject = dict[str, Any]


# ----------------------------------------------------------------------- config files


class ReplayOf(TypedDict):
    """A replay's scratch workspace names the snapshot it replays and the workspace's root."""

    snapshot: SnapshotHash
    root: str
    #: The clone of the repository the scratch workspace is in, when the workspace is in git.
    clone: NotRequired[str]


class ConfigFile(TypedDict):
    """`config.json`."""

    format: Literal[1]
    name: NotRequired[str | None]
    #: Checked by `db.settings.resolve`, which says what is wrong in its own terms.
    store: NotRequired[Any]
    replay_of: NotRequired[ReplayOf]


class ResourceJson(TypedDict):
    """One resource of `resources.json`; its values are checked further by
    `config.make_resource`."""

    name: str
    role: str
    path: NotRequired[str | None]
    uri: NotRequired[str | None]
    versioning: NotRequired[str]
    description: NotRequired[str]


class ResourcesFile(TypedDict):
    """`resources.json`."""

    format: Literal[1]
    resources: list[ResourceJson]


# ---------------------------------------------------------------------- lineage records


class RefVersion(TypedDict):
    ref: Ref
    version: str


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


class RecordJson(TypedDict):
    """A lineage record (`records.LineageRecord.to_json`), as the store keeps its body."""

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


# -------------------------------------------------------------------------- snapshots


class ResultsEntry(TypedDict):
    ref: Ref
    folder: ResultsFolder


class CodeState(TypedDict):
    """A code resource's git state when a snapshot was taken."""

    git_commit: str
    dirty: bool


class SnapshotRow(TypedDict):
    """A row of the snapshot index (`dws_snapshots`) with its tags (`dws_snapshot_tags`),
    its JSON columns parsed."""

    hash: SnapshotHash
    tags: list[Tag]
    message: str
    created: str
    metrics: JsonObject | None
    results: list[ResultsEntry]
    #: None: a snapshot taken before snapshots captured data (it holds lineage only).
    resources: dict[str, CodeState] | None


# ------------------------------------------------------------- beside data, replays


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


class ReplayVerdictJson(TypedDict):
    """One ref of a replay record: the recorded version beside the reproduced one."""

    ref: Ref
    step: str
    verdict: Literal["reproduced", "differs", "non-deterministic", "not replayable", "failed"]
    recorded: Version | None
    reproduced: Version | None
    detail: str | None
    columns: NotRequired[list[str] | None]


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


class Format:
    """A declaration and its check (see `typed_checks`), compiled when first used: a command
    pays only for the formats it reads. What it accepts is handed on as parsed (`Any`, as JSON
    is), not as the TypedDict: readers take what they need."""

    def __init__(self, declaration: Any) -> None:
        self.declaration = declaration
        #: None for a good value, else where its first problem is and what it is.
        self.problem: CheckFunction = self._compiled_on_first_use

    def _compiled_on_first_use(self, data: Any) -> Problem | None:
        self.problem = compile_check(self.declaration)  # from now on, called directly
        return self.problem(data)

    def ok(self, data: Any) -> bool:
        return self.problem(data) is None

    def __repr__(self) -> str:
        return f"Format({getattr(self.declaration, '__name__', self.declaration)!r})"


CONFIG = Format(ConfigFile)
RESOURCES = Format(ResourcesFile)
RECORD = Format(RecordJson)
REF = Format(Ref)
SNAPSHOT_ROW = Format(SnapshotRow)
MARKER = Format(MarkerFile)
REPLAY = Format(ReplayFile)


def check(
    fmt: Format,
    data: Any,
    path: Path | str,
    *,
    advice: str = RESTORE,
    what: str = "",
    at: Location = (),
) -> Any:
    """`data` (read from `path`) if it has the format `fmt`, else a `WorkspaceConfigError`
    naming the file, the field (`at`: where `data` lies in it) and what to do."""
    problem = fmt.problem(data)
    if problem is None:
        return data
    raise WorkspaceConfigError(describe(problem, path, advice=advice, what=what, at=at))


def describe(
    problem: Problem, path: Path | str, *, advice: str = RESTORE, what: str = "", at: Location = ()
) -> str:
    """One line: the file, the bad field (`snapshots[2].hash`), what is wrong, what to do."""
    location, message = problem
    field = field_path([*at, *location])
    parts = [f"{what + ' ' if what else ''}{path} is corrupt"]
    if field:
        parts.append(field)
    return f"{': '.join(parts)}: {message}; {advice}"


def field_path(location: list[Any]) -> str:
    """`['snapshots', 2, 'hash']` -> `snapshots[2].hash`."""
    text = ""
    for step in location:
        if isinstance(step, int):
            text += f"[{step}]"
        elif not isinstance(step, str) or not step.isidentifier():
            text += f"[{_shown(step)}]"
        else:
            text += f".{step}" if text else step
    return text
