"""The values the lineage store hands out: a ref's current lineage (`RefState`), what `status`
lists of it (`RefSummary`), and what a step's checks and an observation found.

Plain data, apart from the store that reads them, so that snapshots, views and the command
line can take and pass them around (a snapshot's manifest is `RefState.to_json()` of each ref)
without importing the queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dws_dagster.workspace.records import LineageRecord


@dataclass(slots=True)
class RefState:
    """The current lineage of one ref.

    `record` is the last good materialization; `attempt` a failed attempt made after it;
    `unknown` means the failed attempt may have left partial data, so the ref must be rewritten
    before anything reads it. `owner` is the step that writes the ref (the one-writer rule).
    """

    owner: str | None = None
    record: dict[str, Any] | None = None
    attempt: dict[str, Any] | None = None
    unknown: bool = False

    @property
    def status(self) -> str:
        if self.unknown:
            return "unknown"
        if self.attempt is not None:
            return "failed"
        if self.record is not None:
            return "ok" if self.owner is not None else "source"
        return "pending"

    @property
    def version(self) -> str | None:
        return None if self.record is None else self.record.get("version")

    @property
    def latest(self) -> dict[str, Any] | None:
        """The most recent record: the failed attempt if there is one, else the good one."""
        return self.attempt if self.attempt is not None else self.record

    def lineage_record(self) -> LineageRecord | None:
        return None if self.record is None else LineageRecord.from_json(self.record)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"owner": self.owner, "record": self.record}
        if self.attempt is not None:
            data["attempt"] = self.attempt
        if self.unknown:
            data["unknown"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RefState:
        return cls(
            data.get("owner"),
            data.get("record"),
            data.get("attempt"),
            bool(data.get("unknown", False)),
        )


@dataclass(frozen=True)
class InputCheck:
    """What `LineageStore.check_inputs` found: the provenance closure, and drift warnings."""

    provenance: dict[str, str]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Observed:
    """What `LineageStore.observe_source` did: the version recorded for `ref`, whether that was
    new (`recorded`), and whether the ref was `unknown` before."""

    ref: str
    version: str
    recorded: bool
    was_unknown: bool


@dataclass(frozen=True)
class RefSummary:
    """A ref as `status` lists it; `state` is read only when the ref needs attention."""

    ref: str
    owner: str | None
    version: str | None
    status: str
    finished: str | None
    state: RefState | None = None


def status_from_columns(
    owner: str | None, has_record: bool, has_attempt: bool, unknown: bool
) -> str:
    """`RefState.status`, from columns."""
    if unknown:
        return "unknown"
    if has_attempt:
        return "failed"
    if has_record:
        return "ok" if owner is not None else "source"
    return "pending"
