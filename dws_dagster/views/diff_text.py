"""`dws-dagster diff` as text: what changed between two states of the lineage, in words, with
partitions grouped.

A version that appears or goes is said so (`input X added at 24f227af4823`, `removed (was
…)`, `changed a -> b`) instead of `- -> b`. By default the refs one step wrote that changed
alike are one entry (`3 of 62 partitions changed: 2024-01-05, …`), and a step's inputs from one
asset or folder one line; `expand=True` lists every ref and input. JSON output keeps
`RefChange.changes` as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from dws_dagster.snapshots.diff import ChangeDetail, RefChange
from dws_dagster.views.grouping import RefGroup, group_refs
from dws_dagster.workspace.versions import short

__all__ = ["diff_text"]

INDENT = " " * 11
Owners = Sequence[tuple[str, str | None]]


def _how(detail: ChangeDetail) -> str:
    return "added" if detail.before is None else "removed" if detail.after is None else "changed"


def worded(detail: ChangeDetail) -> str:
    """A line of a change in words: what appeared, went, or changed from what to what."""
    if detail.what in ("input", "code") and detail.name is not None:
        how = _how(detail)
        if how == "added":
            return f"{detail.what} {detail.name} added at {short(detail.after)}"
        if how == "removed":
            return f"{detail.what} {detail.name} removed (was {short(detail.before)})"
        return (
            f"{detail.what} {detail.name} changed {short(detail.before)} -> {short(detail.after)}"
        )
    if detail.what == "data" and detail.name is not None and " -> " in detail.text:
        if detail.before is None and detail.after is not None:
            return f"{detail.name}: data {short(detail.after)} (none before)"
        if detail.after is None and detail.before is not None:
            return f"{detail.name} (was {short(detail.before)})"
    if detail.what == "version" and " -> " in detail.text:
        if detail.before is None and detail.after is not None:
            return f"version {short(detail.after)} (none before)"
        if detail.after is None and detail.before is not None:
            return f"version none now (was {short(detail.before)})"
    return detail.text


def _generic(detail: ChangeDetail) -> str:
    """A line as it reads for any of several refs that changed alike (no versions)."""
    if detail.what == "version":
        if detail.before is not None and detail.after is not None:
            return "versions changed"
        return "version none before" if detail.before is None else "version none now"
    if detail.what == "data" and detail.name is not None:
        # "changed outside any step (drift): data a -> b" or "source data a -> b"
        return detail.name if ": data " in detail.text else f"{detail.name} changed"
    return worded(detail)


class _Refs:
    """Who writes each ref on the two sides of the diff, and the groups they form."""

    def __init__(self, before: Owners, after: Owners) -> None:
        self.before, self.after = dict(before), dict(after)
        self.groups_before = group_refs(before)
        self.groups_after = group_refs(after)

    def of_ref(self, ref: str) -> RefGroup | None:
        """The group of a ref with lineage on either side (after first)."""
        for owners, groups in ((self.after, self.groups_after), (self.before, self.groups_before)):
            if ref in owners:
                return groups.get((ref, owners[ref]))
        return None

    def group(self, change: RefChange) -> RefGroup | None:
        first, second = ((self.before, self.groups_before), (self.after, self.groups_after))
        if change.kind != "removed":
            first, second = second, first
        for owners, groups in (first, second):
            if change.ref in owners:
                group = groups.get((change.ref, owners[change.ref]))
                return group if group is not None and len(group) > 1 else None
        return None


def _input_lines(
    details: Iterable[ChangeDetail],
    refs: _Refs,
    seen: Callable[[ChangeDetail], int] | None = None,
    members: int = 1,
) -> list[str]:
    """The lines of `details` (of one ref, or `members` refs that changed alike, `seen`
    telling in how many each line is): inputs and code of one asset or folder that changed
    the same way as one line."""
    # Each slot one line, or the lines of one group of inputs (kept apart, never joined with
    # newlines: a name may hold one, which must not start a line of its own).
    lines: list[list[str]] = []
    grouped: dict[tuple[str, str], list[ChangeDetail]] = {}
    slots: dict[tuple[str, str], int] = {}
    for detail in details:
        if detail.what in ("input", "code") and detail.name is not None:
            key = (detail.what, _how(detail))
            if key not in grouped:
                slots[key] = len(lines)
                lines.append([])
            grouped.setdefault(key, []).append(detail)
        else:
            lines.append(
                [
                    _counted(
                        _generic(detail) if members > 1 else worded(detail),
                        seen(detail) if seen else members,
                        members,
                    )
                ]
            )
    for key, found in grouped.items():
        what, how = key
        by_ref: dict[str, list[ChangeDetail]] = {}
        for detail in found:
            by_ref.setdefault(str(detail.name), []).append(detail)
        # Refs with lineage are named within all the partitions of their step (`3 of 62`);
        # others (source data read as found) within those that changed.
        loose = group_refs((ref, None) for ref in by_ref if refs.of_ref(ref) is None)
        found_in = {
            ref: (group, True)
            if (group := refs.of_ref(ref)) is not None
            else (loose[(ref, None)], False)
            for ref in by_ref
        }
        chosen: dict[tuple[bool, tuple[str | None, ...]], list[str]] = {}
        for ref in by_ref:
            group, complete = found_in[ref]
            chosen.setdefault((complete, group.key), []).append(ref)
        out: list[str] = []
        done: set[tuple[bool, tuple[str | None, ...]]] = set()
        for ref, same in by_ref.items():
            group, complete = found_in[ref]
            siblings = chosen[(complete, group.key)]
            if len(siblings) > 1:
                if (complete, group.key) not in done:
                    done.add((complete, group.key))
                    out.append(f"{what}s {group.selection(siblings, how, complete=complete)}")
                continue
            versions = {(d.before, d.after) for d in same}
            text = worded(same[0]) if len(versions) == 1 else f"{what} {ref} {how}"
            out.append(_counted(text, len(same) if seen else members, members))
        lines[slots[key]] = out
    return [line for slot in lines for line in slot if line]


def _counted(text: str, count: int, members: int) -> str:
    return text if count >= members else f"{text} (in {count} of {members})"


def _single(change: RefChange, refs: _Refs) -> list[str]:
    return [
        f"{change.kind:<8} {change.ref}",
        *(f"{INDENT}{line}" for line in _input_lines(change.lines(), refs)),
    ]


def _several(group: RefGroup, changes: list[RefChange], refs: _Refs) -> list[str]:
    """Refs of one group that changed the same way (all added, all removed or all changed),
    as one entry: which of the group, then each line with in how many it is."""
    kind = changes[0].kind
    header = f"{kind:<8} {group.selection([c.ref for c in changes], kind)}"
    if kind != "changed":
        return [header]
    details: list[ChangeDetail] = []
    counts: dict[str, int] = {}
    for change in changes:
        mine = set()
        for detail in change.lines():
            generic = _generic(detail)
            if detail.what in ("input", "code") or generic not in counts:
                details.append(detail)
            if generic not in mine:
                mine.add(generic)
                counts[generic] = counts.get(generic, 0) + 1
    lines = _input_lines(details, refs, seen=lambda d: counts[_generic(d)], members=len(changes))
    return [header, *(f"{INDENT}{line}" for line in lines)]


def diff_text(
    changes: Sequence[RefChange], before: Owners, after: Owners, *, expand: bool = False
) -> list[str]:
    """The lines `diff` prints for `changes`; `before` and `after` are (ref, owner) of every
    ref on each side (`LineageStore.owners`), which tells the partitions of one step."""
    refs = _Refs(before, after)
    if expand:
        return [
            line
            for change in changes
            for line in [
                f"{change.kind:<8} {change.ref}",
                *(f"{INDENT}{worded(detail)}" for detail in change.lines()),
            ]
        ]
    entries: dict[tuple[str | None, ...], tuple[RefGroup | None, list[RefChange]]] = {}
    for change in changes:
        group = refs.group(change)
        key = (change.kind, *group.key) if group is not None else ("ref", change.ref, change.kind)
        entries.setdefault(key, (group, []))[1].append(change)
    out: list[str] = []
    for group, found in sorted(entries.values(), key=lambda entry: entry[1][0].ref):
        if group is None or len(found) == 1:
            for change in found:
                out += _single(change, refs)
        else:
            out += _several(group, found, refs)
    return out
