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
    TableMetadataValue,
    TableRecord,
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
#: the column lineage as a table open-source Dagster shows on the asset page (it shows
#: `dagster/column_lineage` only as JSON): output column, input asset, input column, kind
META_COLUMN_LINEAGE_TABLE = "dws/column_lineage_table"
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


#: Rows of `dws/column_lineage_table` at most; what is left over is counted in a last row
#: (the full lineage is in `dws/column_lineage`).
COLUMN_LINEAGE_TABLE_ROWS = 500
#: Output column of the rows naming what every row depends on (filters, joins, grouping).
ALL_ROWS = "(all rows)"
#: The table's columns: (name, description).
_LINEAGE_TABLE_COLUMNS = (
    ("output column", f"a column of this asset; {ALL_ROWS}: what decides which rows there are"),
    ("input asset", "the Dagster asset read; for data read by path, its workspace ref or "
                    "location"),
    ("input column", "the column of that input"),
    ("kind", "direct (the value is derived from it: identity, transformation, aggregation) or "
             "indirect (it decides rows or branches: filter, join, group by, sort, window, "
             "conditional), as OpenLineage's column lineage names them"),
)


def column_lineage_table(described: Mapping[str, Any], *, columns: Sequence[str] = (),
                         max_rows: int = COLUMN_LINEAGE_TABLE_ROWS) -> TableMetadataValue:
    """`dws/column_lineage` (the IO manager's description of the Spark plan's lineage) as a
    table: a row per output column and input column it depends on, in the order of `columns`
    (the output's schema; columns the lineage does not name come last), a row for an output
    column with no input column, then the inputs every row depends on. Beyond `max_rows` a
    last row counts what was left out."""
    by_column: Mapping[str, Sequence[Mapping[str, Any]]] = described.get("columns") or {}
    order = [*columns, *(name for name in by_column if name not in columns)]
    rows: list[dict[str, str]] = []
    for name in order:
        sources = by_column.get(name) or ()
        if not sources:
            rows.append(_lineage_row(name, None))
        rows.extend(_lineage_row(name, source) for source in sources)
    rows.extend(_lineage_row(ALL_ROWS, source) for source in described.get("dataset") or ())
    if not described.get("complete", True):
        rows.append({"output column": "…", "input asset": "", "input column": "",
                     "kind": "incomplete: parts of the Spark plan were not understood"})
    if len(rows) > max_rows:
        left = len(rows) - (max_rows - 1)
        rows = [*rows[:max_rows - 1],
                {"output column": "…", "input asset": "", "input column": "",
                 "kind": f"{left} more rows in {META_COLUMN_LINEAGE}"}]
    schema = TableSchema(columns=[TableColumn(name=name, type="string", description=text)
                                  for name, text in _LINEAGE_TABLE_COLUMNS])
    return MetadataValue.table(records=[TableRecord(row) for row in rows], schema=schema)


def _lineage_row(output: str, source: Mapping[str, Any] | None) -> dict[str, str]:
    if source is None:
        return {"output column": output, "input asset": "", "input column": "",
                "kind": "no input column (a constant, or a count of rows)"}
    kind = str(source.get("kind") or "").lower()
    subtype = str(source.get("subtype") or "").lower().replace("_", " ")
    return {"output column": output,
            "input asset": str(source.get("asset") or source.get("ref")
                               or source.get("location") or ""),
            "input column": str(source.get("column") or ""),
            "kind": f"{kind}: {subtype}" if kind and subtype else kind or subtype}


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
