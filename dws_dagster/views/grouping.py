"""Refs shown together on one line: the partitions of an asset, the files of a folder.

The text the CLI prints (`lineage`, `diff`, `status`) would otherwise list a daily-partitioned
asset's refs one per line. A group is decided by who wrote the refs, not by what their names
look like:

- the refs one step writes, under the deepest ref they all lie in (their *root*): the
  partitions of a partitioned asset (`inter/weather/2024-01-01`, ... under `inter/weather`,
  however many levels its partition template makes), or the outputs of one script step
  under one folder; a step whose refs share no root (two resources) is grouped per parent;
- refs no step writes (source data read as found, or observed), by their parent ref: the
  landed files of one folder.

A ref that is a whole resource is never grouped. Each member is named by its subpath below
the root (its *label*): for a partitioned asset, the partition key (as its path holds it).
Everything here is pure: refs and step names in, groups and text out.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "RefGroup",
    "count_summary",
    "group_refs",
    "label_runs",
    "span",
]

#: Members a group line names one by one; more are shown as `first … last`.
SPELLED_OUT = 3
#: Runs of consecutive labels a selection (a diff, a status problem) names before `and N more`.
MAX_RUNS = 6


@dataclass(frozen=True)
class RefGroup:
    """Refs shown as one: `refs` sorted by their `labels` (subpaths below `root`)."""

    key: tuple[str | None, ...]
    root: str
    step: str | None
    refs: tuple[str, ...]
    labels: tuple[str, ...]
    _index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update({ref: i for i, ref in enumerate(self.refs)})

    def __len__(self) -> int:
        return len(self.refs)

    @property
    def noun(self) -> str:
        """What the members are: partitions (one step wrote them), files (names with an
        extension), else refs."""
        if self.step is not None:
            return "partitions"
        if all("." in label.rsplit("/", 1)[-1] for label in self.labels):
            return "files"
        return "refs"

    def label(self, ref: str) -> str:
        return self.labels[self._index[ref]]

    def position(self, ref: str) -> int:
        return self._index[ref]

    def title(self) -> str:
        """`root (N partitions first … last)`: the whole group."""
        return f"{self.root} ({len(self)} {self.noun} {span(self.labels)})"

    def _chosen(self, refs: Iterable[str], *, complete: bool = True) -> tuple[str, str]:
        """(`K of N partitions` or `N partitions`, the runs of their labels). A group that
        is not `complete` holds only the refs named (others may exist between them): its
        labels are listed, never joined in runs."""
        chosen = sorted({self.position(ref) for ref in refs})
        if not complete:
            return f"{len(chosen)} {self.noun}", label_runs(chosen, self.labels, runs=False)
        runs = label_runs(chosen, self.labels)
        if len(chosen) == len(self):
            return f"{len(self)} {self.noun}", runs
        return f"{len(chosen)} of {len(self)} {self.noun}", runs

    def selection(self, refs: Iterable[str], verb: str, *, complete: bool = True) -> str:
        """`root: K of N partitions VERB: runs` (`root: N partitions VERB: …` for all):
        members of the group, named by runs of consecutive labels."""
        count, runs = self._chosen(refs, complete=complete)
        return f"{self.root}: {count} {verb}: {runs}"

    def part(self, refs: Iterable[str]) -> str:
        """`root (K of N partitions: runs)`: members of the group, as a name."""
        count, runs = self._chosen(refs)
        return f"{self.root} ({count}: {runs})"

    def count(self, refs: Iterable[str]) -> str:
        """`root (K of N partitions)`: how many members, without naming them."""
        return f"{self.root} ({self._chosen(refs)[0]})"


def _parent(ref: str) -> str:
    return ref.rpartition("/")[0]


def _common_root(refs: Iterable[str]) -> str:
    """The deepest ref every one of `refs` lies strictly inside ('' for none)."""
    common: list[str] | None = None
    for ref in refs:
        parts = ref.split("/")[:-1]
        if common is None:
            common = parts
            continue
        size = 0
        for mine, theirs in zip(common, parts, strict=False):
            if mine != theirs:
                break
            size += 1
        del common[size:]
    return "/".join(common or [])


def group_refs(pairs: Iterable[tuple[str, str | None]]) -> dict[tuple[str, str | None], RefGroup]:
    """The group of each (ref, step that wrote it or None) pair, by that pair; a pair that
    forms no group with others is a group of one."""
    wanted = list(dict.fromkeys(pairs))
    by_step: dict[str, set[str]] = {}
    for ref, step in wanted:
        if step is not None and "/" in ref:
            by_step.setdefault(step, set()).add(ref)
    roots = {step: _common_root(refs) for step, refs in by_step.items()}
    keys: dict[tuple[str, str | None], tuple[str | None, ...]] = {}
    buckets: dict[tuple[str | None, ...], set[str]] = {}
    for ref, step in wanted:
        if "/" not in ref:  # a whole resource is never grouped
            key: tuple[str | None, ...] = ("ref", ref, step)
        elif step is None:
            key = ("dir", _parent(ref), None)
        elif roots[step]:
            key = ("step", step, roots[step])
        else:  # one step's refs in several resources: per folder
            key = ("dir", _parent(ref), step)
        keys[(ref, step)] = key
        buckets.setdefault(key, set()).add(ref)
    groups: dict[tuple[str | None, ...], RefGroup] = {}
    for key, refs in buckets.items():
        root = str(key[2] if key[0] == "step" else key[1] if key[0] == "dir" else "")
        labelled = sorted((ref[len(root) + 1 :] if root else ref, ref) for ref in refs)
        groups[key] = RefGroup(
            key=key,
            root=root,
            step=key[2] if key[0] != "step" else key[1],
            refs=tuple(ref for _, ref in labelled),
            labels=tuple(label for label, _ in labelled),
        )
    return {pair: groups[key] for pair, key in keys.items()}


def span(labels: Sequence[str]) -> str:
    """Labels in order: all of a few, else `first … last`."""
    if len(labels) <= SPELLED_OUT:
        return ", ".join(labels)
    return f"{labels[0]} … {labels[-1]}"


def label_runs(
    positions: Sequence[int], labels: Sequence[str], limit: int = MAX_RUNS, *, runs: bool = True
) -> str:
    """The labels at sorted `positions`, consecutive ones as `first … last` (a run needs three
    or more; `runs=False`: never), at most `limit` then `and N more`."""
    found: list[tuple[int, int]] = []
    for position in positions:
        if runs and found and found[-1][1] == position - 1:
            found[-1] = (found[-1][0], position)
        else:
            found.append((position, position))
    shown: list[str] = []
    for start, end in found:
        if end - start >= 2:
            shown.append(f"{labels[start]} … {labels[end]}")
        else:
            shown.extend(labels[i] for i in range(start, end + 1))
    if len(shown) > limit:
        rest = len(shown) - (limit - 1)
        shown = [*shown[: limit - 1], f"and {rest} more"]
    return ", ".join(shown)


def count_summary(values: Iterable[str], *, every: str = "all") -> str:
    """`all ok`, or `14 ok, 1 failed` (most first)."""
    counts = Counter(values)
    if len(counts) == 1:
        [(value, _)] = counts.items()
        return f"{every} {value}"
    return ", ".join(
        f"{n} {value}" for value, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )


def overlapping(ref: str, ordered: Sequence[str]) -> bool:
    """Whether `ref` is, contains or lies inside one of `ordered` (sorted refs)."""
    parts = ref.split("/")
    for size in range(1, len(parts) + 1):
        prefix = "/".join(parts[:size])
        at = bisect.bisect_left(ordered, prefix)
        if at < len(ordered) and ordered[at] == prefix:
            return True
    at = bisect.bisect_left(ordered, ref + "/")
    return at < len(ordered) and ordered[at].startswith(ref + "/")
