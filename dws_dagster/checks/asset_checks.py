"""dws asset checks: what the workspace knows about an asset's data, on its Checks tab.

Three checks per asset, each opt-in:

- `dws_data_version` — *data matches its recorded version*: the data at the asset's ref (its
  partition's, for a partitioned asset) is the version its lineage says, not changed outside
  any step, not missing, not partial (`unknown`).
- `dws_inputs_consistent` — *inputs consistent*: the inputs the asset was built from hold, as
  they are now, one version of every ref across their provenance and none is `unknown`, so
  re-running it would not be refused.
- `dws_reproduced` — *reproduced*: the newest kept replay of a snapshot that replayed the
  asset's ref reproduced it. Without such a replay the check gives no result for that run.

One multi-asset check per asset evaluates them (its checks can run alone), with the
`WorkspaceResource` only: no Spark session. Cheap by default: the data's version is taken with
the machine's stat-keyed file hash cache, so only files changed since they were last hashed
are read; `full=True` re-reads every byte, as `dws-dagster status --verify`. Each result's
metadata carries the ref, the recorded and found versions and what to run.

Severity: `"blocking"` gives failed checks ERROR severity and blocks downstream assets of the
same run; `"warning"` gives WARN. A partitioned asset's checks are partitioned like it (a
Dagster preview feature): each run checks the partition it materializes.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    Definitions,
    MetadataValue,
    multi_asset_check,
)

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.binding_config import RefBinding, bindings_by_asset, bound_metadata
from dws_dagster.assets.bindings import binding_in
from dws_dagster.assets.partitions import partition_key_ref
from dws_dagster.assets.workspace_resource import WorkspaceResource
from dws_dagster.errors import CheckConfigError
from dws_dagster.views.status.ref_checks import (
    Verdict,
    data_verdict,
    inputs_verdict,
    reproduced_verdict,
)

Severity = Literal["blocking", "warning"]
SEVERITIES: tuple[str, ...] = ("blocking", "warning")

#: The checks, by the name given to `checks=`: (check name in Dagster, description).
CHECKS: dict[str, tuple[str, str]] = {
    "data_version": (
        "dws_data_version",
        "dws: the data at the asset's workspace ref is the version its lineage records "
        "(not changed outside a step, not missing, not partial)",
    ),
    "inputs": (
        "dws_inputs_consistent",
        "dws: the asset's inputs hold one version of every ref across their provenance, "
        "none unknown",
    ),
    "reproduced": (
        "dws_reproduced",
        "dws: the newest replay of a snapshot that replayed this asset reproduced its data "
        "(no result until one did: dws-dagster replay)",
    ),
}
DEFAULT_CHECKS: tuple[str, ...] = tuple(CHECKS)


@dataclass(frozen=True)
class CheckTarget:
    """An asset to check: its key, definition metadata and partitions."""

    key: AssetKey
    metadata: Mapping[str, Any]
    partitions_def: Any | None = None


Checkable = AssetsDefinition | AssetSpec | AssetKey | str | CheckTarget


def targets_of(assets: Iterable[Checkable]) -> list[CheckTarget]:
    """The check targets of assets given as definitions, specs, keys or targets (a multi-asset
    gives one per asset it computes). A key alone has neither metadata nor partitions: give
    the definition of an asset bound by `dws_ref` or partitioned."""
    found: list[CheckTarget] = []
    for item in assets:
        if isinstance(item, CheckTarget):
            found.append(item)
        elif isinstance(item, AssetsDefinition):
            found += [
                CheckTarget(spec.key, spec.metadata or {}, item.partitions_def)
                for spec in item.specs
            ]
        elif isinstance(item, AssetSpec):
            found.append(CheckTarget(item.key, item.metadata or {}, item.partitions_def))
        else:
            found.append(CheckTarget(AssetKey.from_coercible(item), {}))
    return found


def dws_asset_checks(
    assets: Iterable[Checkable],
    *,
    severity: Severity = "warning",
    full: bool = False,
    checks: Sequence[str] = DEFAULT_CHECKS,
    workspace_resource_key: str = "workspace",
    default_resource: str | None = None,
    default_format: str = "parquet",
    bindings: Sequence[RefBinding] = (),
) -> list[AssetChecksDefinition]:
    """The dws checks of `assets` (definitions, specs or keys), one multi-asset check each.

    The workspace is the `WorkspaceResource` under `workspace_resource_key`; an asset's ref
    is found as the IO manager finds it: its `dws_ref` metadata, its entry in `bindings`, else
    its key path in `default_resource` (as on `SparkWorkspaceIOManager`).

    Examples:
        .. code-block:: python

            from dagster import Definitions, asset
            from pyspark.sql import DataFrame

            from dws_dagster import (
                SparkWorkspaceIOManager,
                WorkspaceResource,
                dws_asset_checks,
                dws_ref,
                dws_source_asset,
            )

            trips = dws_source_asset("trips", "source-data", "trips", format="csv")

            @asset(metadata=dws_ref("intermediate-data", "hourly_actuals"))
            def hourly_actuals(trips: DataFrame) -> DataFrame:
                return trips.groupBy("zone", "hour").count()

            workspace = WorkspaceResource(root=".")
            defs = Definitions(
                assets=[trips, hourly_actuals],
                asset_checks=dws_asset_checks([hourly_actuals], severity="blocking", full=True),
                resources={
                    "workspace": workspace,  # the checks need no Spark session
                    "io_manager": SparkWorkspaceIOManager(workspace=workspace),
                },
            )
    """
    kinds = _checked_kinds(checks, severity)
    by_asset = bindings_by_asset(bindings)
    return [
        _asset_checks(
            target,
            kinds=kinds,
            blocking=severity == "blocking",
            full=full,
            resource_key=workspace_resource_key,
            default_resource=default_resource,
            default_format=default_format,
            by_asset=by_asset,
        )
        for target in targets_of(assets)
    ]


def with_dws_checks(
    defs: Definitions,
    *,
    severity: Severity = "warning",
    full: bool = False,
    checks: Sequence[str] = DEFAULT_CHECKS,
    workspace_resource_key: str = "workspace",
) -> Definitions:
    """`defs` with the dws checks of every materializable asset a `SparkWorkspaceIOManager`
    among its resources stores (its bindings and default resource are the IO manager's).

    Examples:
        .. code-block:: python

            from dagster import Definitions, asset
            from pyspark.sql import DataFrame

            from dws_dagster import (
                SparkWorkspaceIOManager,
                WorkspaceResource,
                dws_ref,
                dws_source_asset,
                with_dws_checks,
            )

            trips = dws_source_asset("trips", "source-data", "trips", format="csv")

            @asset(metadata=dws_ref("intermediate-data", "hourly_actuals"))
            def hourly_actuals(trips: DataFrame) -> DataFrame:
                return trips.groupBy("zone", "hour").count()

            workspace = WorkspaceResource(root=".")
            defs = with_dws_checks(  # checks for every asset the IO manager stores
                Definitions(
                    assets=[trips, hourly_actuals],
                    resources={
                        "workspace": workspace,
                        "io_manager": SparkWorkspaceIOManager(workspace=workspace),
                    },
                ),
                checks=["data_version", "inputs"],
            )
    """
    from dws_dagster.assets.io_manager import SparkWorkspaceIOManager

    managers = {
        key: value
        for key, value in (defs.resources or {}).items()
        if isinstance(value, SparkWorkspaceIOManager)
    }
    graph = defs.resolve_asset_graph()
    found: list[AssetChecksDefinition] = []
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: tuple(k.path)):
        node = graph.get(key)
        manager = managers.get(node.io_manager_key)
        if manager is None or not node.is_materializable:
            continue
        found += dws_asset_checks(
            [CheckTarget(key, node.metadata or {}, node.partitions_def)],
            severity=severity,
            full=full,
            checks=checks,
            workspace_resource_key=workspace_resource_key,
            default_resource=manager.default_resource,
            default_format=manager.format,
            bindings=manager.bindings,
        )
    return Definitions.merge(defs, Definitions(asset_checks=found)) if found else defs


def _checked_kinds(checks: Sequence[str], severity: str) -> tuple[str, ...]:
    unknown = [name for name in checks if name not in CHECKS]
    if unknown or not checks:
        raise CheckConfigError(
            f"dws asset checks: unknown check(s) {', '.join(map(repr, unknown)) or '(none)'}; "
            f"choose among {', '.join(CHECKS)}"
        )
    if severity not in SEVERITIES:
        raise CheckConfigError(
            f"dws asset checks: severity {severity!r}; choose {' or '.join(SEVERITIES)}"
        )
    return tuple(dict.fromkeys(checks))


def _asset_checks(
    target: CheckTarget,
    *,
    kinds: tuple[str, ...],
    blocking: bool,
    full: bool,
    resource_key: str,
    default_resource: str | None,
    default_format: str,
    by_asset: Mapping[str, Mapping[str, Any]],
) -> AssetChecksDefinition:
    key, partitions = target.key, target.partitions_def
    asset = key.to_user_string()
    # Checked when the definitions load, as the IO manager will read it.
    metadata = bound_metadata(target.metadata, key.path, by_asset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dagster_compat.preview_warning())
        specs = [
            AssetCheckSpec(
                CHECKS[kind][0],
                asset=key,
                description=CHECKS[kind][1] + (" (full re-read)" if full else ""),
                blocking=blocking and kind != "reproduced",
                partitions_def=partitions,
            )
            for kind in kinds
        ]
    severity = AssetCheckSeverity.ERROR if blocking else AssetCheckSeverity.WARN

    @multi_asset_check(
        specs=specs,
        name=f"dws_checks_{key.to_python_identifier()}",
        can_subset=True,
        required_resource_keys={resource_key},
        description=f"dws checks of asset '{asset}'",
    )
    def _checks(context) -> Iterator[AssetCheckResult]:
        # (context: AssetCheckExecutionContext, unannotated: Dagster reads the annotation,
        # which `from __future__ import annotations` makes a string.)
        resource = getattr(context.resources, resource_key)
        if not isinstance(resource, WorkspaceResource):
            raise CheckConfigError(
                f"dws checks of asset '{asset}': resource '{resource_key}' is a "
                f"{type(resource).__name__}, not a WorkspaceResource"
            )
        ws = resource.workspace()
        binding = binding_in(
            ws,
            metadata,
            key.path,
            default_resource=default_resource,
            default_format=default_format,
        )
        partition = context.partition_key if context.has_partition_key else None
        ref = str(
            binding.ref
            if partition is None or partitions is None
            else partition_key_ref(binding, partitions, partition, f"asset '{asset}'")
        )
        selected = context.selected_asset_check_keys
        for kind in kinds:
            name = CHECKS[kind][0]
            if AssetCheckKey(key, name) not in selected:
                continue
            if kind == "data_version":
                verdict: Verdict | None = data_verdict(ws, ref, what=f"asset '{asset}'", full=full)
            elif kind == "inputs":
                verdict = inputs_verdict(ws, ref, what=f"asset '{asset}'")
            else:
                verdict = reproduced_verdict(ws, ref)
            if verdict is None:
                context.log.info(f"{name}: no replay of a snapshot has replayed {ref} yet")
                continue
            yield _result(key, name, verdict, severity, partition)

    return _checks


def _result(
    key: AssetKey,
    name: str,
    verdict: Verdict,
    severity: AssetCheckSeverity,
    partition: str | None,
) -> AssetCheckResult:
    metadata: dict[str, Any] = {
        keys.REF: MetadataValue.text(verdict.ref),
        keys.CHECK_RECORDED: MetadataValue.text(verdict.recorded or "-"),
        keys.CHECK_FOUND: MetadataValue.text(verdict.found or "-"),
    }
    if verdict.to_run:  # as text: the open-source UI shows Markdown only behind a link
        metadata[keys.CHECK_TO_RUN] = MetadataValue.text("; ".join(verdict.to_run))
    if verdict.details:
        metadata[keys.CHECK_DETAILS] = MetadataValue.json(verdict.details)
    if partition is not None:
        metadata["dagster/partition"] = MetadataValue.text(partition)
    return AssetCheckResult(
        asset_key=key,
        check_name=name,
        passed=verdict.passed,
        severity=AssetCheckSeverity.WARN if verdict.warn_only else severity,
        description=verdict.description,
        metadata=metadata,
    )
