"""What `dws-dagster status` reports of the refs: which there are, which need attention, what to
run, and the verdict of `--verify`.

The refs of a resource are every ref of it that the lineage names, whatever its role: the refs
with lineage of their own (a step wrote them, or their data was observed) and the refs steps
read that have none (source data read as found, `source` with no step). Code a step ran is
recorded in the step (its code version or code refs' versions), not as refs.

A ref needs attention when its step failed (`failed`), its data may be partial (`unknown`),
or, verified, its data is not the version its lineage says (`drift`: changed outside any step;
for source data, since steps read it or it was observed) or is gone (`missing`). Data that
could not be checked (remote data without its filesystem) is listed but needs no attention.
Everything here is pure: status rows in, lines and JSON out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dws_dagster.views.grouping import (
    RefGroup,
    count_summary,
    group_refs,
    overlapping,
    span,
)
from dws_dagster.workspace.versions import short

__all__ = ["Problem", "StatusReport", "source_rows"]

Row = dict[str, Any]

#: `dws-dagster observe` commands listed before `and N more`.
MAX_OBSERVE = 10

_KIND_WORDS = {
    "unknown": "unknown",
    "failed": "failed",
    "missing": "data missing",
    "drift": "data changed",
}
_WHY = {
    "unknown": "data may be partial",
    "failed": "the step failed",
    "missing": "data missing",
    "drift": "data changed outside the step",
    "read": "read source data that changed",
}
_RESTORE = "or bring back a snapshot's data with 'dws-dagster restore SNAPSHOT'"


def source_rows(
    read: Mapping[str, tuple[str, Sequence[tuple[str, str | None]]]], recorded: Sequence[str]
) -> list[Row]:
    """Status rows of the refs steps read that have no lineage of their own
    (`LineageStore.read_without_lineage`), leaving out those nested in or around a ref with
    lineage (`recorded`): a folder read around written partitions is not source data."""
    ordered = sorted(recorded)
    rows = []
    for ref, (version, readers) in read.items():
        if overlapping(ref, ordered):
            continue
        rows.append(
            {
                "ref": ref,
                "version": version,
                "status": "source",
                "step": None,
                "finished": None,
                "read_by": [{"ref": reader, "step": step} for reader, step in readers],
            }
        )
    return rows


@dataclass(frozen=True)
class Problem:
    """A ref that needs attention: `kind` unknown, failed, missing or drift; `step` writes it
    (None: source data, `observed` or only read); `note` says what happened and what to do."""

    ref: str
    kind: str
    step: str | None
    note: str
    observed: bool = False
    readers: tuple[tuple[str, str | None], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "problem": self.kind, "step": self.step, "note": self.note}


def _readers(row: Row) -> tuple[tuple[str, str | None], ...]:
    return tuple((item["ref"], item["step"]) for item in row.get("read_by", ()))


def _reader_steps(readers: Iterable[tuple[str, str | None]]) -> tuple[str, str]:
    """(`step 'a'` or `steps 'a', 'b'`, `it` or `them`) of the steps that read source data."""
    steps = sorted({step for _, step in readers if step is not None})
    names = ", ".join(f"'{step}'" for step in steps)
    if len(steps) == 1:
        return f"step {names}", "it"
    return (f"steps {names}", "them") if steps else ("steps now gone", "them")


def _problem(row: Row) -> Problem | None:
    ref, step, status, data = row["ref"], row["step"], row["status"], row.get("data")
    recorded, found = short(row["version"]), short(row.get("found"))
    observed = step is None and "read_by" not in row
    readers = _readers(row)
    if status == "unknown":
        return Problem(ref, "unknown", step, str(row.get("attention") or ""), observed, readers)
    if row["version"] is None:  # claimed by a step still running: no version to compare
        data = None
    if data == "missing":
        if step is not None:
            note = (
                f"its data is missing (lineage says {recorded}); re-run '{step}' to write "
                f"it again, {_RESTORE}"
            )
        else:
            note = f"its source data is missing (lineage says {recorded}); put it back, {_RESTORE}"
        return Problem(ref, "missing", step, note, observed, readers)
    if data == "changed":
        if step is not None:
            note = (
                f"its data changed outside step '{step}' (lineage says {recorded}, found "
                f"{found}); re-run '{step}' to rewrite it, {_RESTORE}"
            )
        elif observed:
            note = (
                f"its source data changed since it was observed ({recorded}, found "
                f"{found}); record it as found with 'dws-dagster observe {ref}', then "
                "re-run the steps that read it"
            )
        else:
            steps, pronoun = _reader_steps(readers)
            note = (
                f"its source data changed since {steps} read it ({recorded}, found "
                f"{found}); re-run {pronoun} to read it as it is"
            )
        return Problem(ref, "drift", step, note, observed, readers)
    if status == "failed":
        return Problem(ref, "failed", step, str(row.get("attention") or ""), observed, readers)
    return None


def _group_note(kind: str, problems: Sequence[Problem]) -> str:
    """What happened to several refs of one group, without what differs between them."""
    step = problems[0].step
    if kind == "unknown":
        return (
            f"their data may be partial after step '{step}' failed"
            if step
            else "a restore could not bring back their versions (marked unknown)"
        )
    if kind == "failed":
        return f"step '{step}' failed; their last good versions are still the ones read"
    if kind == "missing":
        return "their data is missing"
    if step is not None:
        return f"their data changed outside step '{step}'"
    if problems[0].observed:
        return "their source data changed since it was observed"
    readers = [reader for problem in problems for reader in problem.readers]
    return f"their source data changed since {_reader_steps(readers)[0]} read it"


class StatusReport:
    """`status` rows (`ref`, `version`, `status`, `step`, `finished`, with `--verify` `data`,
    for source data only read `read_by`), grouped, with their problems and what to run."""

    def __init__(self, rows: Sequence[Row], verified: bool) -> None:
        self.rows = sorted(rows, key=lambda row: row["ref"])
        self.verified = verified
        self.groups = group_refs((row["ref"], row["step"]) for row in self.rows)
        self.problems = [p for p in (_problem(row) for row in self.rows) if p is not None]
        self._unchecked = [
            (row["ref"], row["step"]) for row in self.rows if row.get("data") == "unchecked"
        ]
        self.unchecked = [ref for ref, _ in self._unchecked]

    # ------------------------------------------------------------------ grouping

    def _group(self, ref: str, step: str | None) -> RefGroup | None:
        group = self.groups.get((ref, step))
        return group if group is not None and len(group) > 1 else None

    def describe(self, refs: Iterable[tuple[str, str | None]]) -> str:
        """(ref, step) pairs as names: `root (K of N partitions: runs)` for a group's."""
        by_group: dict[Any, tuple[RefGroup | None, list[str]]] = {}
        for ref, step in refs:
            group = self._group(ref, step)
            key = group.key if group is not None else ("ref", ref)
            by_group.setdefault(key, (group, []))[1].append(ref)
        names = []
        for group, members in sorted(by_group.values(), key=lambda item: min(item[1])):
            if group is None:
                names.extend(sorted(set(members)))
            else:
                names.append(group.part(members) if len(set(members)) > 1 else members[0])
        return ", ".join(names)

    # ------------------------------------------------------------------ verdict

    @property
    def verdict(self) -> str:
        """`attention` when a ref needs it, else `clean`."""
        return "attention" if self.problems else "clean"

    def summary(self) -> str:
        """The last line: what was found, and what to do next."""
        count = len(self.problems)
        unchecked = ""
        if self.unchecked:
            names = self.describe(self._unchecked)
            unchecked = f"; {len(self.unchecked)} could not be checked ({names})"
        if count:
            again = (
                "'dws-dagster status --verify'"
                if self.verified
                else "'dws-dagster status' (--verify also compares the data)"
            )
            return (
                f"{count} ref{'s' if count != 1 else ''} need{'' if count != 1 else 's'} "
                f"attention: run what is listed above, then {again} again{unchecked}"
            )
        if self.verified:
            return (
                f"Verified {len(self.rows) - len(self.unchecked)} ref(s): the data of "
                f"every one is the version its lineage says; nothing needs attention"
                f"{unchecked}"
            )
        return "Nothing needs attention ('dws-dagster status --verify' also compares the data)"

    def to_run(self) -> list[str]:
        """What to run to bring the data and the lineage together, one line a step."""
        rerun: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
        observe: list[str] = []
        put_back: list[str] = []
        for problem in self.problems:
            if problem.step is not None:
                rerun.setdefault((problem.step, problem.kind), []).append(
                    (problem.ref, problem.step)
                )
                continue
            if problem.kind == "missing":
                put_back.append(problem.ref)
                continue
            if problem.observed:
                observe.append(problem.ref)
            for reader, step in problem.readers:
                if step is not None:
                    rerun.setdefault((step, "read"), []).append((reader, step))
        lines = [
            f"re-run step '{step}' for {self.describe(dict.fromkeys(refs))} ({_WHY[why]})"
            for (step, why), refs in sorted(rerun.items())
        ]
        for ref in observe[:MAX_OBSERVE]:
            lines.append(f"dws-dagster observe {ref}   (records its source data as found)")
        if len(observe) > MAX_OBSERVE:
            lines.append(
                f"... and 'dws-dagster observe' each of "
                f"{len(observe) - MAX_OBSERVE} more source ref(s) listed above"
            )
        if put_back:
            lines.append(
                f"put back the source data of "
                f"{self.describe((ref, None) for ref in put_back)}, {_RESTORE}"
            )
        return lines

    # ------------------------------------------------------------------ text

    def refs_lines(self, *, expand: bool) -> list[str]:
        """The `Refs:` table: a line a ref, or with partitions and folders grouped."""
        if not self.rows:
            return ["  (no lineage yet)"]
        entries: list[tuple[str, list[Row]]] = []
        index: dict[Any, int] = {}
        for row in self.rows:
            group = None if expand else self._group(row["ref"], row["step"])
            if group is None:
                entries.append((row["ref"], [row]))
            elif group.key in index:
                entries[index[group.key]][1].append(row)
            else:
                index[group.key] = len(entries)
                entries.append((f"{group.root} ({len(group)} {group.noun})", [row]))
        cells = [
            (label, self._version(rows), rows[0]["step"] or "-", rows) for label, rows in entries
        ]
        widths = [
            max(minimum, *(len(cell[i]) for cell in cells))
            for i, minimum in ((0, 10), (1, 12), (2, 20))
        ]
        return [self._line(cell, widths) for cell in cells]

    @staticmethod
    def _version(rows: list[Row]) -> str:
        versions = {row["version"] for row in rows}
        return short(rows[0]["version"]) if len(versions) == 1 else f"{len(versions)} versions"

    def _line(self, cell: tuple[str, str, str, list[Row]], widths: list[int]) -> str:
        label, version, step, rows = cell
        first = rows[0]
        statuses = [row["status"] for row in rows]
        status = statuses[0] if len(set(statuses)) == 1 else "mixed"
        finished = max((row["finished"] for row in rows if row["finished"]), default=None)
        extra = ""
        if len(rows) > 1:
            group = self._group(first["ref"], first["step"])
            assert group is not None
            extra += f"  {span(group.labels)}"
        if status == "mixed":
            extra += f"  {count_summary(statuses)}"
        data = [row["data"] for row in rows if "data" in row]
        if data:
            extra += (
                f"  data {data[0]}"
                if len(rows) == 1
                else f"  data {count_summary('match' if d == 'matches' else d for d in data)}"
            )
        readers = sorted(
            {
                item["step"]
                for row in rows
                for item in row.get("read_by", ())
                if item["step"] is not None
            }
        )
        if readers:
            extra += f"  read by {', '.join(readers)}"
        if len(rows) == 1 and first.get("error"):
            extra += f"  error: {first['error']}"
        return (
            f"  {label:<{widths[0]}}  {version:<{widths[1]}}  {status:<8} "
            f"{step:<{widths[2]}} {finished or '-'}{extra}"
        )

    def attention_lines(self, *, expand: bool) -> list[str]:
        """`N ref(s) need attention: ...` and a line for each ref or group of them."""
        if not self.problems:
            return []
        entries: list[Problem | tuple[str, tuple[Any, ...]]] = []
        by_group: dict[tuple[Any, ...], list[Problem]] = {}
        for problem in self.problems:
            group = None if expand else self._group(problem.ref, problem.step)
            if group is None:
                entries.append(problem)
                continue
            key = (problem.kind, group.key)
            if key not in by_group:
                by_group[key] = []
                entries.append(("group", key))
            by_group[key].append(problem)
        names, lines = [], []
        for entry in entries:
            problems = [entry] if isinstance(entry, Problem) else by_group[entry[1]]
            first = problems[0]
            kind = f"({_KIND_WORDS[first.kind]})"
            if len(problems) == 1:
                names.append(f"{first.ref} {kind}")
                lines.append(f"  {first.ref}: {first.note}")
                continue
            group = self._group(first.ref, first.step)
            assert group is not None
            refs = [problem.ref for problem in problems]
            names.append(f"{group.count(refs)} {kind}")
            lines.append(f"  {group.part(refs)}: {_group_note(first.kind, problems)}")
        count = len(self.problems)
        return [f"{count} ref(s) need attention: " + ", ".join(names), *lines]

    def lines(self, *, expand: bool) -> list[str]:
        """What follows the `Refs:` table: attention, what to run, the verdict."""
        out = self.attention_lines(expand=expand)
        if self.problems:
            out += ["", "To run:", *(f"  {line}" for line in self.to_run()), ""]
        if self.problems or self.verified:
            out.append(self.summary())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "verified": self.verified,
            "verdict": self.verdict,
            "attention": [problem.to_json() for problem in self.problems],
            "to_run": self.to_run() if self.problems else [],
            "unchecked": self.unchecked,
            "summary": self.summary(),
        }
