"""Lineage records: one per materialization (or failed attempt) of a ref, free of secrets."""

from __future__ import annotations

import datetime as dt
import enum
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

import xxhash

from ..errors import InvalidParameterError
from .files import canonical_json

RECORD_FORMAT = 1
REDACTED = "***REDACTED***"
MAX_PARAMETER_BYTES = 64 * 1024
MAX_PARAMETERS_BYTES = 256 * 1024

#: Name words that mark a parameter as a credential (matched on whole words of the name).
_SECRET_WORDS = {
    "password", "passwd", "pass", "pwd", "passphrase", "secret", "secrets", "token",
    "credential", "credentials", "creds", "auth", "authorization", "cookie", "signature",
    "apikey", "privatekey", "secretkey", "accesskey", "sessionkey", "clientsecret", "authtoken",
}
_NAME_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_URI_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


def is_secret_name(name: str) -> bool:
    """True for names such as `password`, `db_token`, `apiKey`, `AWS_SECRET_ACCESS_KEY`."""
    words = [w.lower() for w in _NAME_WORDS.findall(str(name))]
    if any(word in _SECRET_WORDS for word in words):
        return True
    return any(a + b in _SECRET_WORDS for a, b in itertools.pairwise(words))


def strip_userinfo(text: str) -> str:
    """Remove `user:password@` from every URI inside `text`."""
    return _URI_USERINFO.sub(r"\g<scheme>", text)


def sanitize(value: Any, *, path: str) -> Any:
    """A JSON-ready copy of a parameter value with secrets redacted, or InvalidParameterError."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return strip_userinfo(value)
    if isinstance(value, enum.Enum):
        return sanitize(value.value, path=path)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool):
                raise InvalidParameterError(
                    f"parameter '{path}' has a key of type {type(key).__name__}; "
                    "use string keys"
                )
            name = str(key)
            out[name] = REDACTED if is_secret_name(name) else sanitize(item, path=f"{path}.{name}")
        return out
    if isinstance(value, list | tuple):
        return [sanitize(item, path=f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, set | frozenset):
        items = [sanitize(item, path=f"{path}[]") for item in value]
        return sorted(items, key=lambda item: canonical_json(item))
    raise InvalidParameterError(
        f"parameter '{path}' is a {type(value).__module__}.{type(value).__qualname__}, which "
        "cannot be recorded as JSON; pass a string, number, bool, list or dict "
        "(for example str(value))"
    )


def sanitize_parameters(parameters: Mapping[str, Any] | None, *,
                        what: str = "parameter") -> dict[str, Any]:
    """Validate, redact and size-check a step's parameters (or metrics)."""
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise InvalidParameterError(
            f"{what}s must be a dict of name -> value, got {type(parameters).__name__}"
        )
    clean: dict[str, Any] = {}
    for name, value in parameters.items():
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(f"{what} names must be non-empty strings, got {name!r}")
        clean[name] = REDACTED if is_secret_name(name) else sanitize(value, path=name)
    total = 0
    for name, item in clean.items():
        size = len(canonical_json(item))
        total += size
        if size > MAX_PARAMETER_BYTES:
            raise InvalidParameterError(
                f"{what} '{name}' is {size} bytes as JSON; the limit is {MAX_PARAMETER_BYTES}: "
                "record a path, a ref or a hash of the value instead"
            )
    if total > MAX_PARAMETERS_BYTES:
        raise InvalidParameterError(
            f"{what}s take {total} bytes as JSON; the limit is {MAX_PARAMETERS_BYTES}: "
            "record paths, refs or hashes of the large values instead"
        )
    return clean


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

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "kind": self.kind}
        for key in ("run_id", "partition", "code_version", "git_commit"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.code:
            data["code"] = [{"ref": ref, "version": version} for ref, version in self.code]
        if self.command_line:
            data["command_line"] = [strip_userinfo(arg) for arg in self.command_line]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepInfo:
        return cls(
            name=data["name"], kind=data.get("kind", "script"), run_id=data.get("run_id"),
            partition=data.get("partition"), code_version=data.get("code_version"),
            git_commit=data.get("git_commit"),
            code=tuple((c["ref"], c["version"]) for c in data.get("code", ())),
            command_line=tuple(data.get("command_line", ())),
        )


@dataclass(frozen=True)
class LineageRecord:
    """One materialization, failed attempt or observation of one ref.

    `inputs` are the (ref, version) pairs the step read; `provenance` is the transitive closure
    ref -> version behind this version, so consistency checks need no recursive lookups.
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
            self.start_time)
        return delta.total_seconds()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": RECORD_FORMAT, "ref": self.ref, "version": self.version,
            "status": self.status,
            "parameters": dict(self.parameters),
            "inputs": [{"ref": ref, "version": version} for ref, version in self.inputs],
            "provenance": dict(sorted(self.provenance.items())),
        }
        if self.step is not None:
            data["step"] = self.step.to_json()
        for key in ("start_time", "end_time", "error"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.metrics is not None:
            data["metrics"] = dict(self.metrics)
        if self.extra:
            data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LineageRecord:
        step = data.get("step")
        return cls(
            ref=data["ref"], version=data.get("version"), status=data.get("status", "ok"),
            step=StepInfo.from_json(step) if step else None,
            parameters=data.get("parameters", {}),
            inputs=tuple((i["ref"], i["version"]) for i in data.get("inputs", ())),
            provenance=data.get("provenance", {}),
            start_time=data.get("start_time"), end_time=data.get("end_time"),
            metrics=data.get("metrics"), error=data.get("error"), extra=data.get("extra", {}),
        )

    @property
    def record_id(self) -> str:
        """Content hash of the record: the same event recorded twice has the same id."""
        return xxhash.xxh3_128_hexdigest(canonical_json(self.to_json()))

    def identity(self) -> dict[str, Any]:
        """What a snapshot hash covers: versions and how they were made, not when or where."""
        step = self.step
        return {
            "version": self.version, "status": self.status,
            "step": None if step is None else {
                "name": step.name, "kind": step.kind, "partition": step.partition,
                "code_version": step.code_version, "git_commit": step.git_commit,
                "code": [list(c) for c in step.code],
            },
            "parameters": dict(self.parameters),
            "inputs": [list(i) for i in self.inputs],
            "metrics": None if self.metrics is None else dict(self.metrics),
        }

    def with_status(self, status: str, error: str | None = None) -> LineageRecord:
        return replace(self, status=status, error=error)

