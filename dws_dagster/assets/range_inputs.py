"""The inputs each partition of a range records, as one run per partition records them.

Inputs loaded through the IO manager go by Dagster's partition mapping (`partition_range`).
Data the body read by path is attributed by its rows: while the range is written, Spark names
the file each row was read from (`spark.row_files`), and a partition records the refs read by
path whose files gave it rows. A run of one partition reads its own files, whose rows are that
partition's; a range reads all of them, and each file's rows land in the partitions they belong
to, so both record the same files.

Where the rows cannot tell, the record is conservative, never short: a ref is recorded with
every partition of the range when the plan combines or reorders rows (joins, aggregations,
windows, subqueries, Python UDFs: a row's file is unknown or is not all it depends on), when no
row of it reached any partition (all filtered out, or read by a subquery), and a partition that
received no row records every ref read by path (which files its run would have read is
unknown). Each partition's materialization says which of its inputs are exact and why the
others are not (`dws/inputs_by_path`), and the run's log says it once per range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dws_dagster.spark.row_files import under
from dws_dagster.workspace.definition import Workspace

if TYPE_CHECKING:
    from dws_dagster.spark.lineage_model import PlanLineage

Inputs = tuple[tuple[str, str], ...]


@dataclass
class Attribution:
    """Which refs read by path each partition records, exact or not, and why not."""

    exact: dict[str, list[str]] = field(default_factory=dict)
    conservative: dict[str, list[str]] = field(default_factory=dict)
    reasons: dict[str, list[str]] = field(default_factory=dict)

    def refs(self, key: str) -> set[str]:
        return {*self.exact.get(key, ()), *self.conservative.get(key, ())}

    def describe(self, key: str) -> dict[str, object]:
        """The partition's `dws/inputs_by_path` metadata."""
        described: dict[str, object] = {
            "exact": sorted(self.exact.get(key, ())),
            "every_partition": sorted(self.conservative.get(key, ())),
        }
        if self.reasons.get(key):
            described["reason"] = "; ".join(self.reasons[key])
        return described


def paths_read(
    ws: Workspace, plan: PlanLineage | None, refs: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """{ref read by path: the paths the plan reads it at} for the refs among `refs` that a
    path of the plan resolves to."""
    wanted = set(refs)
    found: dict[str, list[str]] = {}
    for item in plan.inputs if plan is not None else ():
        ref = ws.ref_for_location(item.path)
        if ref is not None and str(ref) in wanted:
            found.setdefault(str(ref), []).append(item.path)
    return {ref: tuple(paths) for ref, paths in found.items()}


def everywhere(
    keys: Sequence[str], by_path: Mapping[str, Sequence[str]], reason: str
) -> Attribution:
    """Every ref read by path recorded with every partition, for `reason`."""
    attribution = Attribution()
    for key in keys:
        attribution.conservative[key] = sorted(by_path)
        attribution.reasons[key] = [reason]
    return attribution


def by_rows(
    keys: Sequence[str],
    by_path: Mapping[str, Sequence[str]],
    files: Mapping[str, frozenset[str]],
) -> Attribution:
    """Each ref read by path recorded with the partitions its files gave rows (`files`: for
    each partition that got rows, the files they came from), conservatively where that cannot
    tell."""
    reached: dict[str, set[str]] = {ref: set() for ref in by_path}
    for key, read in files.items():
        for ref, roots in by_path.items():
            if any(under(path, roots) for path in read):
                reached[ref].add(key)
    unreached = sorted(ref for ref, partitions in reached.items() if not partitions)
    attribution = Attribution()
    for key in keys:
        reasons = []
        if key not in files:
            attribution.conservative[key] = sorted(by_path)
            attribution.reasons[key] = [
                "the partition received no row, so which files its run would read is unknown"
            ]
            continue
        attribution.exact[key] = sorted(
            ref for ref, partitions in reached.items() if key in partitions
        )
        attribution.conservative[key] = unreached
        if unreached:
            reasons.append(
                f"no row of {', '.join(unreached)} reached any partition (all filtered out, or "
                "read by a subquery)"
            )
        attribution.reasons[key] = reasons
    return attribution


def summary(asset: str, keys: Sequence[str], attribution: Attribution) -> str | None:
    """One log line for a range whose records are not all exact (None: they are)."""
    loose = [key for key in keys if attribution.conservative.get(key)]
    if not loose:
        return None
    reasons = sorted({reason for key in loose for reason in attribution.reasons.get(key, ())})
    shown = ", ".join(loose[:5]) + (" ..." if len(loose) > 5 else "")
    return (
        f"asset '{asset}': {len(loose)} of {len(keys)} partitions of the range ({shown}) "
        "record data read by path as inputs of every partition, not only the files whose rows "
        f"they hold: {'; '.join(reasons)}. One run per partition (BackfillPolicy.multi_run(1)) "
        "records each partition's own reads; dws/inputs_by_path on each materialization says "
        "which inputs are exact"
    )
