"""What a Dagster asset check evaluation says, as the lineage sensor keeps it: which check,
its verdict and severity, the column it is about, and the partition of the checked asset it
judged.

A check defined on a partition (`partitions_def=`) names it in its evaluation. A check without
partitions on a partitioned asset, run by a run of one partition, judged that partition:
Dagster itself takes that partition's materialization as the check's target. Otherwise (a
range of partitions, or none) it judged the asset as a whole. The column is the check's
`dws/column` metadata, on its result or, more usually, on its definition.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from dagster import AssetKey

from dws_dagster import metadata_keys as keys
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.workspace.redaction import redact_text


@dataclass(frozen=True)
class CheckVerdict:
    """One evaluation of one asset check."""

    key: AssetKey
    name: str
    passed: bool
    #: Dagster's severity: `ERROR` or `WARN`
    severity: str
    at: dt.datetime
    #: the partition of the checked asset the check judged; None: the asset as a whole
    partition: str | None = None
    description: str | None = None
    column: str | None = None
    #: the run whose materialization the check judged, when Dagster knew it
    target_run_id: str | None = None


def read_verdict(
    entry: Any, catalog: AssetCatalog, run_partition: str | None
) -> CheckVerdict | None:
    """The verdict an `ASSET_CHECK_EVALUATION` entry of a run's log holds (None: not one);
    `run_partition` is the run's own partition key, if it has one."""
    event = getattr(entry, "dagster_event", None)
    evaluation = getattr(event, "event_specific_data", None)
    key = getattr(evaluation, "asset_key", None)
    name = getattr(evaluation, "check_name", None)
    passed = getattr(evaluation, "passed", None)
    if not isinstance(key, AssetKey) or not isinstance(name, str) or not name or passed is None:
        return None
    spec = catalog.check_spec(key, name)
    partition = getattr(evaluation, "partition", None)
    if partition is None and catalog.partitioned_root(key) is not None:
        partition = run_partition
    description = getattr(evaluation, "description", None) or getattr(spec, "description", None)
    target = getattr(evaluation, "target_materialization_data", None)
    severity = getattr(evaluation, "severity", None)
    return CheckVerdict(
        key=key,
        name=name,
        passed=bool(passed),
        severity=str(getattr(severity, "value", severity)),
        at=dt.datetime.fromtimestamp(entry.timestamp, dt.UTC),
        partition=partition if isinstance(partition, str) else None,
        description=redact_text(str(description)) if description else None,
        column=_column(getattr(evaluation, "metadata", None))
        or _column(getattr(spec, "metadata", None)),
        target_run_id=getattr(target, "run_id", None),
    )


def _column(metadata: Any) -> str | None:
    value = metadata_value((metadata or {}).get(keys.CHECK_COLUMN))
    return value if isinstance(value, str) and value else None
