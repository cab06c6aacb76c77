"""Lineage records: one per materialization (or failed attempt) of a ref, free of secrets."""

from __future__ import annotations

import argparse
import datetime as dt
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

import xxhash

from dws_dagster.errors import InvalidParameterError
from dws_dagster.workspace.files import canonical_json
from dws_dagster.workspace.redaction import (
    REDACTED,
    is_secret_name,
    redact_command_line,
    redact_text,
)
from dws_dagster.workspace.refs import ResourceRef

RECORD_FORMAT = 1
#: The key of a lineage record's `extra` that holds its column lineage: `{"columns": {output
#: column: [{"ref", "column", "kind", "subtype"}, ...]}, "dataset": [...], "complete"}`, as the
#: Spark IO manager describes it (also its `dws/column_lineage` metadata).
COLUMN_LINEAGE_KEY = "column_lineage"
MAX_PARAMETER_BYTES = 64 * 1024
MAX_PARAMETERS_BYTES = 256 * 1024
#: How deep a parameter's value may nest (dicts and lists within each other): deeper values
#: are refused, so a pathological or cyclic value cannot exhaust the stack.
MAX_PARAMETER_DEPTH = 64
_INT_RANGE = range(-(2**63), 2**64)  # what JSON readers (orjson, most catalogs) take as numbers


def sanitize(value: Any, *, path: str) -> Any:
    """A JSON-ready copy of a parameter value with secrets redacted, or InvalidParameterError
    naming the parameter (and where inside it) for values that cannot be recorded: other
    types, cycles, nesting deeper than MAX_PARAMETER_DEPTH."""
    return _sanitize(value, path, 0, set(), "parameter")


def _sanitize(value: Any, path: str, depth: int, active: set[int], what: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if int(value) not in _INT_RANGE:
            raise InvalidParameterError(
                f"{what} '{_shown(path)}' is an integer beyond 64 bits, which JSON readers "
                "cannot take; pass it as a string (str(value))"
            )
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return redact_text(_text(value, path, what))
    if isinstance(value, enum.Enum):
        return _sanitize(value.value, path, depth, active, what)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, PurePath):
        return redact_text(_text(value.as_posix(), path, what))
    # A ResourceRef is a named tuple, but the list [name, subpath] would not read back as a
    # ref: refused as any other object is, so its string form is what gets recorded.
    if isinstance(value, ResourceRef) or not isinstance(
        value, Mapping | list | tuple | set | frozenset
    ):
        raise InvalidParameterError(
            f"{what} '{_shown(path)}' is a {type(value).__module__}."
            f"{type(value).__qualname__}, which cannot be recorded as JSON; pass a string, "
            "number, bool, list or dict (for example str(value))"
        )
    if id(value) in active:
        raise InvalidParameterError(
            f"{what} '{_shown(path)}' contains itself (a cycle); pass a value without cycles"
        )
    if depth >= MAX_PARAMETER_DEPTH:
        raise InvalidParameterError(
            f"{what} '{_shown(path)}' nests deeper than {MAX_PARAMETER_DEPTH} levels of "
            "dicts and lists; record a path, a ref or a hash of the value instead"
        )
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str | int | float | bool) or isinstance(key, enum.Enum):
                    raise InvalidParameterError(
                        f"{what} '{_shown(path)}' has a key of type {type(key).__name__}; "
                        "use string keys"
                    )
                name = _text(str(key), path, what)
                inner = f"{path}.{name}"
                out[redact_text(name)] = (
                    REDACTED
                    if is_secret_name(name)
                    else _sanitize(item, inner, depth + 1, active, what)
                )
            return out
        if isinstance(value, list | tuple):
            return [
                _sanitize(item, f"{path}[{i}]", depth + 1, active, what)
                for i, item in enumerate(value)
            ]
        items = [_sanitize(item, f"{path}[]", depth + 1, active, what) for item in value]
        return sorted(items, key=canonical_json)
    finally:
        active.discard(id(value))


def _text(value: str, path: str, what: str = "parameter") -> str:
    """`value` if it can be stored as UTF-8 (lone surrogates cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidParameterError(
            f"{what} '{_shown(path)}' holds text that is not valid Unicode (a lone "
            "surrogate); decode it properly or pass it escaped"
        ) from None
    return str(value)


def _shown(path: str) -> str:
    """A parameter path short enough for a message: its start names the parameter."""
    path = redact_text(path)
    return path if len(path) <= 160 else f"{path[:120]}...{path[-30:]}"


def as_parameters(parameters: Any, *, what: str = "parameter") -> Mapping[str, Any]:
    """The name -> value mapping of a step's parameters: a mapping, or an
    `argparse.Namespace` (its `vars()`, as Data Workspaces takes it); anything else is
    InvalidParameterError."""
    if isinstance(parameters, argparse.Namespace):
        return dict(vars(parameters))
    if not isinstance(parameters, Mapping):
        raise InvalidParameterError(
            f"{what}s must be a dict of name -> value or an argparse.Namespace, got "
            f"{type(parameters).__module__}.{type(parameters).__qualname__}: pass "
            f"{{'name': value, ...}}"
        )
    return parameters


def sanitize_parameters(
    parameters: Mapping[str, Any] | None, *, what: str = "parameter"
) -> dict[str, Any]:
    """Validate, redact and size-check a step's parameters (or metrics)."""
    if parameters is None:
        return {}
    parameters = as_parameters(parameters, what=what)
    clean: dict[str, Any] = {}
    for name, value in parameters.items():
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(
                f"{what} names must be non-empty strings, got {_safe_repr(name)}"
            )
        shown = _text(name, "", what)
        clean[redact_text(shown)] = (
            REDACTED if is_secret_name(name) else _sanitize(value, name, 0, set(), what)
        )
    total = 0
    for name, item in clean.items():
        size = len(canonical_json(item))
        total += size
        if size > MAX_PARAMETER_BYTES:
            raise InvalidParameterError(
                f"{what} '{_shown(name)}' is {size} bytes as JSON; the limit is "
                f"{MAX_PARAMETER_BYTES}: record a path, a ref or a hash of the value instead"
            )
    if total > MAX_PARAMETERS_BYTES:
        raise InvalidParameterError(
            f"{what}s take {total} bytes as JSON; the limit is {MAX_PARAMETERS_BYTES}: "
            "record paths, refs or hashes of the large values instead"
        )
    return clean


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"a {type(value).__name__}"
    text = redact_text(text)
    return text if len(text) <= 80 else text[:77] + "..."


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class StepInfo:
    """What produced a record: a script step, a Dagster asset step, or an observation."""

    name: str
    kind: str = "script"
    run_id: str | None = None
    partition: str | None = None
    code_version: str | None = None
    git_commit: str | None = None
    code: tuple[tuple[str, str], ...] = ()
    command_line: tuple[str, ...] = ()
    #: The folder a script step ran in, relative to the workspace root (posix; "." for the
    #: root), recorded with its command line so the step can be run again as it ran.
    working_folder: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "kind": self.kind}
        for key in ("run_id", "partition", "code_version", "git_commit", "working_folder"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.code:
            data["code"] = [{"ref": ref, "version": version} for ref, version in self.code]
        if self.command_line:
            data["command_line"] = redact_command_line(self.command_line)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepInfo:
        return cls(
            name=data["name"],
            kind=data.get("kind", "script"),
            run_id=data.get("run_id"),
            partition=data.get("partition"),
            code_version=data.get("code_version"),
            git_commit=data.get("git_commit"),
            code=tuple((c["ref"], c["version"]) for c in data.get("code", ())),
            command_line=tuple(data.get("command_line", ())),
            working_folder=data.get("working_folder"),
        )


@dataclass(frozen=True)
class LineageRecord:
    """One materialization, failed attempt or observation of one ref.

    `inputs` are the (ref, version) pairs the step read; `provenance` is the transitive closure
    ref -> version behind this version, so consistency checks need no recursive lookups.

    Examples:
        .. code-block:: python

            from dws_dagster import Workspace

            ws = Workspace.open()
            state = ws.store.get("intermediate-data/clean")  # None when the ref has no lineage
            record = state.lineage_record()  # its last good LineageRecord
            print(record.version, record.step_name, dict(record.parameters))
            for ref, version in record.inputs:  # what the step read
                print(f"read {ref}@{version}")
    """

    ref: str
    version: str | None
    status: str = "ok"
    step: StepInfo | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[tuple[str, str], ...] = ()
    provenance: Mapping[str, str] = field(default_factory=dict)
    start_time: str | None = None
    end_time: str | None = None
    metrics: Mapping[str, Any] | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def step_name(self) -> str | None:
        return self.step.name if self.step is not None else None

    @property
    def is_observation(self) -> bool:
        return self.step is None or self.step.kind == "observation"

    @property
    def duration_seconds(self) -> float | None:
        if not self.start_time or not self.end_time:
            return None
        delta = dt.datetime.fromisoformat(self.end_time) - dt.datetime.fromisoformat(
            self.start_time
        )
        return delta.total_seconds()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": RECORD_FORMAT,
            "ref": self.ref,
            "version": self.version,
            "status": self.status,
            "parameters": dict(self.parameters),
            "inputs": [{"ref": ref, "version": version} for ref, version in self.inputs],
            "provenance": dict(sorted(self.provenance.items())),
        }
        if self.step is not None:
            data["step"] = self.step.to_json()
        for key in ("start_time", "end_time"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.error is not None:
            data["error"] = redact_text(self.error)
        if self.metrics is not None:
            data["metrics"] = dict(self.metrics)
        if self.extra:
            data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LineageRecord:
        step = data.get("step")
        return cls(
            ref=data["ref"],
            version=data.get("version"),
            status=data.get("status", "ok"),
            step=StepInfo.from_json(step) if step else None,
            parameters=data.get("parameters", {}),
            inputs=tuple((i["ref"], i["version"]) for i in data.get("inputs", ())),
            provenance=data.get("provenance", {}),
            start_time=data.get("start_time"),
            end_time=data.get("end_time"),
            metrics=data.get("metrics"),
            error=data.get("error"),
            extra=data.get("extra", {}),
        )

    @property
    def record_id(self) -> str:
        """Content hash of the record: the same event recorded twice has the same id."""
        return xxhash.xxh3_128_hexdigest(canonical_json(self.to_json()))

    def identity(self) -> dict[str, Any]:
        """What a snapshot hash covers: versions and how they were made, not when or where."""
        step = self.step
        return {
            "version": self.version,
            "status": self.status,
            "step": None
            if step is None
            else {
                "name": step.name,
                "kind": step.kind,
                "partition": step.partition,
                "code_version": step.code_version,
                "git_commit": step.git_commit,
                "code": [list(c) for c in step.code],
            },
            "parameters": dict(self.parameters),
            "inputs": [list(i) for i in self.inputs],
            "metrics": None if self.metrics is None else dict(self.metrics),
        }

    def with_status(self, status: str, error: str | None = None) -> LineageRecord:
        return replace(self, status=status, error=error)


def record_identity(record: Mapping[str, Any]) -> dict[str, Any]:
    """`LineageRecord.from_json(record).identity()`, read straight from the JSON record: what
    makes two records the same materialization (never when, where or by whom)."""
    step = record.get("step")
    metrics = record.get("metrics")
    return {
        "version": record.get("version"),
        "status": record.get("status", "ok"),
        "step": {
            "name": step["name"],
            "kind": step.get("kind", "script"),
            "partition": step.get("partition"),
            "code_version": step.get("code_version"),
            "git_commit": step.get("git_commit"),
            "code": [[c["ref"], c["version"]] for c in step.get("code", ())],
        }
        if step
        else None,
        "parameters": dict(record.get("parameters", {})),
        "inputs": [[i["ref"], i["version"]] for i in record.get("inputs", ())],
        "metrics": None if metrics is None else dict(metrics),
    }


def identity_digest(record: Mapping[str, Any]) -> str:
    """A digest of `record_identity(record)`: the store keeps it beside each record, so a
    snapshot's hash is computed from digests without reading any record."""
    return xxhash.xxh3_128_hexdigest(canonical_json(record_identity(record)))
