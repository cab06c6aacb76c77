"""The facts of an OpenLineage run and job that every event of it repeats, looked up once a tick
(`OpenLineageEvents` caches them): the run's (its Dagster run, partition, nominal window,
`deps=` assets, versions of Dagster and Spark), the asset's job (its description, owners, source
code) and its checks' job, and a check's verdict as an assertion.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable

from dagster import AssetKey

from dws_dagster.ol.model import Assertion, JobInfo, RunInfo
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.sensor.check_verdicts import CheckVerdict
from dws_dagster.sensor.run_lookup import RunLookup


def run_info(
    catalog: AssetCatalog,
    runs: RunLookup,
    skip: Callable[[str], None],
    run_id: str,
    key: AssetKey,
    partition: str | None,
) -> RunInfo | None:
    facts = runs.facts(run_id)
    if facts is None:
        skip(
            f"run {run_id} is not in the instance; no OpenLineage event for "
            f"'{key.to_user_string()}'"
        )
        return None
    window = catalog.nominal_window(key, partition)
    return RunInfo(
        dagster_run_id=run_id,
        dagster_job=facts.job,
        dagster_run_created=facts.created,
        partition=partition,
        nominal_start=window[0] if window else None,
        nominal_end=window[1] if window else None,
        dependencies=tuple(k.to_user_string() for k in catalog.dependencies(key)),
        dagster_version=dagster_version(),
        spark_version=spark_version(),
    )


def job_info(catalog: AssetCatalog, namespace: str, key: AssetKey) -> JobInfo:
    code = catalog.code(key)
    return JobInfo(
        namespace=namespace,
        name=key.to_user_string(),
        description=catalog.description(key),
        owners=catalog.owners(key),
        source_code=code.source,
        source_path=code.path,
        git_url=code.git_url,
        git_commit=code.git_commit,
        git_branch=code.git_branch,
        code_version=catalog.code_version(key),
        git_root=code.git_root,
    )


def checks_job_info(catalog: AssetCatalog, namespace: str, key: AssetKey) -> JobInfo:
    asset = key.to_user_string()
    return JobInfo(
        namespace=namespace,
        name=asset,
        description=f"The Dagster asset checks of '{asset}': each run reads the asset's data "
        "(a partition of it, or all of it) and judges it; the verdicts are the "
        "dataQualityAssertions of that input.",
        owners=catalog.owners(key),
        checks=True,
    )


def assertion(verdict: CheckVerdict) -> Assertion:
    return Assertion(
        name=verdict.name,
        success=verdict.passed,
        severity=verdict.severity.lower() or None,
        column=verdict.column,
        description=verdict.description,
    )


def kept_dependencies(
    catalog: AssetCatalog, dependencies: tuple[str, ...], read: tuple[str, ...]
) -> tuple[str, ...]:
    """The `deps=` assets of `dependencies` whose data the run did not read (`read`: the refs
    of its inputs): every event of a run asks with the same few."""
    return tuple(name for name in dependencies if not _dependency_read(catalog, name, read))


def _dependency_read(catalog: AssetCatalog, name: str, read: tuple[str, ...]) -> bool:
    """Whether the run read the data of the `deps=` asset `name` (its ref, or one inside
    or around it: refs are normalised, so that is a prefix up to a slash)."""
    binding = catalog.binding(AssetKey.from_user_string(name))
    if binding is None:
        return False
    root = str(binding.ref)
    return any(
        ref == root or ref.startswith(root + "/") or root.startswith(ref + "/") for ref in read
    )


@functools.cache
def dagster_version() -> str | None:
    try:
        from dagster.version import __version__

        return str(__version__)
    except Exception:
        return None


@functools.cache
def spark_version() -> str | None:
    """The installed PySpark's version, from its package metadata: the read path never
    imports pyspark (a sensor must not pay for it, nor need it installed)."""
    try:
        return importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None
