"""A materialization's lineage as Dagster metadata, and back.

One conversion each way, so the lineage record the IO manager commits to the workspace store
and the one the lineage sensor rebuilds from the Dagster event log are the same record: the
event log (metadata) and the store can never disagree about what a materialization was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetKey,
    MetadataValue,
    TableColumn,
    TableColumnConstraints,
    TableColumnDep,
    TableColumnLineage,
    TableSchema,
)

from .bindings import metadata_value
from .workspace.records import LineageRecord, StepInfo

STEP_KIND = "dagster-asset"

META_VERSION = "dws/version"
META_INPUTS = "dws/inputs"
META_PROVENANCE = "dws/provenance"
META_PARAMETERS = "dws/parameters"
META_CODE_VERSION = "dws/code_version"
META_GIT_COMMIT = "dws/git_commit"
META_STARTED = "dws/started_at"
META_FINISHED = "dws/finished_at"
META_COLUMN_LINEAGE = "dws/column_lineage"
#: {input ref or location: [[column, Spark simple type, nullable], ...]} as Spark read them
META_INPUT_SCHEMAS = "dws/input_schemas"
#: the ref of a partitioned asset's root (its binding's ref, above the partition's subpath)
META_REF_ROOT = "dws/ref_root"
META_WORKSPACE = "dws/workspace"


def lineage_metadata(record: LineageRecord, *, fmt: str, input_assets: Mapping[str, str],
                     workspace: str) -> dict[str, Any]:
    """The `dws/...` metadata of a materialization (`input_assets`: input ref -> asset key)."""
    step = record.step
    metadata: dict[str, Any] = {
        "dws/ref": MetadataValue.text(record.ref),
        META_VERSION: MetadataValue.text(record.version or ""),
        "dws/format": MetadataValue.text(fmt),
        META_WORKSPACE: MetadataValue.text(workspace),
        META_INPUTS: MetadataValue.json([
            {"ref": ref, "version": version,
             **({"asset": input_assets[ref]} if ref in input_assets else {})}
            for ref, version in record.inputs]),
        META_PROVENANCE: MetadataValue.json(dict(sorted(record.provenance.items()))),
        META_PARAMETERS: MetadataValue.json(dict(record.parameters)),
    }
    if record.start_time:
        metadata[META_STARTED] = MetadataValue.text(record.start_time)
    if record.end_time:
        metadata[META_FINISHED] = MetadataValue.text(record.end_time)
    if step is not None and step.code_version:
        metadata[META_CODE_VERSION] = MetadataValue.text(step.code_version)
    if step is not None and step.git_commit:
        metadata[META_GIT_COMMIT] = MetadataValue.text(step.git_commit)
    return metadata


def record_from_metadata(metadata: Mapping[str, Any], *, asset: str, run_id: str | None,
                         partition: str | None, status: str = "ok") -> LineageRecord | None:
    """The lineage record a materialization's metadata describes (None: not a dws asset)."""
    ref = metadata_value(metadata.get("dws/ref"))
    version = metadata_value(metadata.get(META_VERSION))
    if not isinstance(ref, str) or not isinstance(version, str) or not version:
        return None
    inputs = metadata_value(metadata.get(META_INPUTS)) or []
    step = StepInfo(name=asset, kind=STEP_KIND, run_id=run_id, partition=partition,
                    code_version=metadata_value(metadata.get(META_CODE_VERSION)),
                    git_commit=metadata_value(metadata.get(META_GIT_COMMIT)))
    extra: dict[str, Any] = {"format": metadata_value(metadata.get("dws/format"))}
    rows = metadata_value(metadata.get("dagster/row_count"))
    if rows is not None:
        extra["rows"] = int(rows)
    return LineageRecord(
        ref=ref, version=version, status=status, step=step,
        parameters=metadata_value(metadata.get(META_PARAMETERS)) or {},
        inputs=tuple((item["ref"], item["version"]) for item in inputs),
        provenance=metadata_value(metadata.get(META_PROVENANCE)) or {},
        start_time=metadata_value(metadata.get(META_STARTED)),
        end_time=metadata_value(metadata.get(META_FINISHED)), extra=extra,
    )


def column_schema(fields: Sequence[tuple[str, str, bool]]) -> TableSchema:
    """Dagster's column schema from (name, Spark type, nullable) triples."""
    return TableSchema(columns=[
        TableColumn(name=name, type=spark_type,
                    constraints=TableColumnConstraints(nullable=nullable))
        for name, spark_type, nullable in fields])


def column_lineage(direct: Mapping[str, Sequence[tuple[str, str]]]) -> TableColumnLineage:
    """Dagster's column lineage from output column -> [(upstream asset key, column)]."""
    return TableColumnLineage(deps_by_column={
        column: [TableColumnDep(asset_key=AssetKey.from_user_string(asset), column_name=name)
                 for asset, name in sorted(set(deps))]
        for column, deps in direct.items()})


META_METRICS = "dws/metrics"


def dws_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Output metadata carrying a results asset's metrics, for `results.json` and snapshots.

    Use in the asset body as `context.add_output_metadata(dws_metrics({"mae": mae}))` or
    `Output(df, metadata=dws_metrics(...))`. Without it, the lineage sensor takes the
    materialization's numeric metadata (other than Dagster's and dws_dagster's own) as metrics.
    """
    from .workspace.records import sanitize_parameters

    clean = sanitize_parameters(metrics, what="metric")
    return {META_METRICS: MetadataValue.json(clean)}


def metrics_from_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A results asset's metrics: `dws/metrics` if the asset set it, else its numeric metadata
    (Dagster's `dagster/...` and dws_dagster's `dws/...` keys are bookkeeping, not metrics)."""
    explicit = metadata_value(metadata.get(META_METRICS))
    if isinstance(explicit, Mapping):
        return dict(explicit)
    found: dict[str, Any] = {}
    for key, value in metadata.items():
        if key.startswith(("dagster/", "dws/")):
            continue
        plain = metadata_value(value)
        if isinstance(plain, bool) or not isinstance(plain, int | float):
            continue
        found[key] = plain
    return found
