"""The OpenLineage job names of Dagster's runs, assets and asset checks: one catalog job per
asset, whichever Dagster job, schedule, sensor, backfill or UI launch materialized it.

Catalogs name a job after its parent. Marquez names a job whose run has a `parent` facet
`<parent job>.<job>`, unless its name already starts with `<parent job>.`, and keeps one job
per (namespace, full name), linking a dataset to its producer only through each job's latest
version. DataHub makes the part of a job's name before the first dot its DataFlow and the
whole name its DataJob. So an asset's runs stay one job in every catalog only when its
parent job is the same for all of them, and its name says that parent itself.

Every Dagster run is therefore a run of one job, `DAGSTER_JOB`, whatever Dagster job it
executes (that job's name is one of the run's tags), and every asset is the job
`dagster.<asset key>`; its runs name the Dagster run that caused them as parent and root, so
a catalog still groups a run's assets under it. An asset's checks are the job
`dagster.<asset key>.checks`, a reader of the asset's dataset.
"""

from __future__ import annotations

__all__ = ["CHECKS_SUFFIX", "DAGSTER_JOB", "asset_job_name", "checks_job_name"]

#: the job of every Dagster run: the parent of every asset's and checks' run
DAGSTER_JOB = "dagster"
#: what follows an asset key in the name of the job of its checks
CHECKS_SUFFIX = "checks"


def asset_job_name(asset: str) -> str:
    """The OpenLineage job of an asset (its key as a user string, `taxi/raw`)."""
    return f"{DAGSTER_JOB}.{asset}"


def checks_job_name(asset: str) -> str:
    """The OpenLineage job of the checks of an asset."""
    return f"{DAGSTER_JOB}.{asset}.{CHECKS_SUFFIX}"
