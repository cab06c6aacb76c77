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

from dws_dagster import metadata_keys as keys
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.workspace.records import COLUMN_LINEAGE_KEY, LineageRecord, StepInfo
from dws_dagster.workspace.remote_versions import KEEP_VERSIONS_KEY

STEP_KIND = "dagster-asset"


def lineage_metadata(
    record: LineageRecord, *, fmt: str, input_assets: Mapping[str, str], workspace: str
) -> dict[str, Any]:
    """The `dws/...` metadata of a materialization (`input_assets`: input ref -> asset key)."""
    step = record.step
    metadata: dict[str, Any] = {
        keys.REF: MetadataValue.text(record.ref),
        keys.VERSION: MetadataValue.text(record.version or ""),
        keys.FORMAT: MetadataValue.text(fmt),
        keys.WORKSPACE: MetadataValue.text(workspace),
        keys.INPUTS: MetadataValue.json(
            [
                {
                    "ref": ref,
                    "version": version,
                    **({"asset": input_assets[ref]} if ref in input_assets else {}),
                }
                for ref, version in record.inputs
            ]
        ),
        keys.PROVENANCE: MetadataValue.json(dict(sorted(record.provenance.items()))),
        keys.PARAMETERS: MetadataValue.json(dict(record.parameters)),
    }
    if record.start_time:
        metadata[keys.STARTED] = MetadataValue.text(record.start_time)
    if record.end_time:
        metadata[keys.FINISHED] = MetadataValue.text(record.end_time)
    if step is not None and step.code_version:
        metadata[keys.CODE_VERSION] = MetadataValue.text(step.code_version)
    if step is not None and step.git_commit:
        metadata[keys.GIT_COMMIT] = MetadataValue.text(step.git_commit)
    if COLUMN_LINEAGE_KEY in record.extra:
        metadata[keys.COLUMN_LINEAGE] = MetadataValue.json(record.extra[COLUMN_LINEAGE_KEY])
    if KEEP_VERSIONS_KEY in record.extra:
        metadata[keys.KEEP_VERSIONS] = MetadataValue.int(record.extra[KEEP_VERSIONS_KEY])
    return metadata


def record_from_metadata(
    metadata: Mapping[str, Any],
    *,
    asset: str,
    run_id: str | None,
    partition: str | None,
    status: str = "ok",
) -> LineageRecord | None:
    """The lineage record a materialization's metadata describes (None: not a dws asset)."""
    ref = metadata_value(metadata.get(keys.REF))
    version = metadata_value(metadata.get(keys.VERSION))
    if not isinstance(ref, str) or not isinstance(version, str) or not version:
        return None
    inputs = metadata_value(metadata.get(keys.INPUTS)) or []
    step = StepInfo(
        name=asset,
        kind=STEP_KIND,
        run_id=run_id,
        partition=partition,
        code_version=metadata_value(metadata.get(keys.CODE_VERSION)),
        git_commit=metadata_value(metadata.get(keys.GIT_COMMIT)),
    )
    extra: dict[str, Any] = {"format": metadata_value(metadata.get(keys.FORMAT))}
    rows = metadata_value(metadata.get("dagster/row_count"))
    if rows is not None:
        extra["rows"] = int(rows)
    described = metadata_value(metadata.get(keys.COLUMN_LINEAGE))
    if isinstance(described, dict):
        extra[COLUMN_LINEAGE_KEY] = described
    keep = metadata_value(metadata.get(keys.KEEP_VERSIONS))
    if type(keep) is int:
        extra[KEEP_VERSIONS_KEY] = keep
    return LineageRecord(
        ref=ref,
        version=version,
        status=status,
        step=step,
        parameters=metadata_value(metadata.get(keys.PARAMETERS)) or {},
        inputs=tuple((item["ref"], item["version"]) for item in inputs),
        provenance=metadata_value(metadata.get(keys.PROVENANCE)) or {},
        start_time=metadata_value(metadata.get(keys.STARTED)),
        end_time=metadata_value(metadata.get(keys.FINISHED)),
        extra=extra,
    )


def column_schema(fields: Sequence[tuple[str, str, bool]]) -> TableSchema:
    """Dagster's column schema from (name, Spark type, nullable) triples."""
    return TableSchema(
        columns=[
            TableColumn(
                name=name, type=spark_type, constraints=TableColumnConstraints(nullable=nullable)
            )
            for name, spark_type, nullable in fields
        ]
    )


def column_lineage(direct: Mapping[str, Sequence[tuple[str, str]]]) -> TableColumnLineage:
    """Dagster's column lineage from output column -> [(upstream asset key, column)]."""
    return TableColumnLineage(
        deps_by_column={
            column: [
                TableColumnDep(asset_key=AssetKey.from_user_string(asset), column_name=name)
                for asset, name in sorted(set(deps))
            ]
            for column, deps in direct.items()
        }
    )


#: Rows of `dws/column_sources` at most; what is left over is counted in a last row
#: (the full lineage is in `dws/column_lineage`).
COLUMN_LINEAGE_TABLE_ROWS = 500
#: Output column of the rows naming what every row depends on (filters, joins, grouping).
ALL_ROWS = "(all rows)"
#: The table's columns: (name, description).
_LINEAGE_TABLE_COLUMNS = (
    ("output column", f"a column of this asset; {ALL_ROWS}: what decides which rows there are"),
    (
        "input asset",
        "the Dagster asset whose data was read (with how many of its partitions); "
        "for other data read by path, its workspace ref or location",
    ),
    ("input column", "the column of that input"),
    (
        "kind",
        "how the output depends on the input column, by the subtype OpenLineage's "
        "column lineage gives it: identity, transformation, aggregation (direct: the "
        "value is derived from it), filter, join, group by, sort, window, conditional "
        "(indirect: it decides rows or branches)",
    ),
)


def column_lineage_table(
    described: Mapping[str, Any],
    *,
    columns: Sequence[str] = (),
    assets: Mapping[str, str] | None = None,
    max_rows: int = COLUMN_LINEAGE_TABLE_ROWS,
) -> TableMetadataValue:
    """`dws/column_lineage` (the IO manager's description of the Spark plan's lineage) as a
    table a person reads: a row per output column and input column it depends on, in the
    order of `columns` (the output's schema; columns the lineage does not name come last),
    a row for an output column with no input column, then the inputs every row depends on.

    An input is named by its asset: the one it was loaded as, else `assets[ref]` (the asset
    that wrote the ref, for data read by path), else by its ref or location. The partitions of
    one asset (or files of one folder) read alike make one row. Beyond `max_rows` a last row
    counts what was left out."""
    assets = assets or {}
    by_column: Mapping[str, Sequence[Mapping[str, Any]]] = described.get("columns") or {}
    order = [*columns, *(name for name in by_column if name not in columns)]
    rows: list[dict[str, str]] = []
    for name in order:
        sources = by_column.get(name) or ()
        if not sources:
            rows.append(_lineage_row(name, "", "", "no input column"))
        rows.extend(_grouped_rows(name, sources, assets))
    rows.extend(_grouped_rows(ALL_ROWS, described.get("dataset") or (), assets))
    if not described.get("complete", True):
        rows.append(
            _lineage_row("…", "", "", "incomplete: parts of the Spark plan were not understood")
        )
    if len(rows) > max_rows:
        left = len(rows) - (max_rows - 1)
        rows = [
            *rows[: max_rows - 1],
            _lineage_row("…", "", "", f"{left} more rows in {keys.COLUMN_LINEAGE}"),
        ]
    schema = TableSchema(
        columns=[
            TableColumn(name=name, type="string", description=text)
            for name, text in _LINEAGE_TABLE_COLUMNS
        ]
    )
    return MetadataValue.table(records=[TableRecord(row) for row in rows], schema=schema)


def _lineage_row(output: str, source: str, column: str, kind: str) -> dict[str, str]:
    return {"output column": output, "input asset": source, "input column": column, "kind": kind}


def _grouped_rows(
    output: str, sources: Sequence[Mapping[str, Any]], assets: Mapping[str, str]
) -> list[dict[str, str]]:
    """One row per (input asset or folder, column, kind), in the order first met."""
    groups: dict[tuple[str, bool, str, str], list[str]] = {}
    for source in sources:
        ref = str(source.get("ref") or source.get("location") or "")
        asset = source.get("asset") or assets.get(ref)
        # The subtype says whether the dependency is direct or indirect, in fewer words: the
        # table must fit the asset page's metadata column.
        how = str(source.get("subtype") or source.get("kind") or "").lower().replace("_", " ")
        key = (str(asset), True) if asset else (ref.rpartition("/")[0] or ref, False)
        members = groups.setdefault((*key, str(source.get("column") or ""), how), [])
        if ref not in members:
            members.append(ref)
    rows = []
    for (name, is_asset, column, how), refs in groups.items():
        if len(refs) == 1:
            label = name if is_asset else refs[0]
        elif is_asset:
            label = f"{name} ({len(refs)} partitions)"
        else:
            leaves = sorted(ref.rpartition("/")[2] for ref in refs)
            label = f"{name}/{{{leaves[0]} … {leaves[-1]}}} ({len(refs)})"
        rows.append(_lineage_row(output, label, column, how))
    return rows


def dws_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Output metadata carrying a results asset's metrics, for `results.json` and snapshots.

    Use in the asset body as `context.add_output_metadata(dws_metrics({"mae": mae}))` or
    `Output(df, metadata=dws_metrics(...))`. Without it, the lineage sensor takes the
    materialization's numeric metadata (other than Dagster's and dws_dagster's own) as metrics.

    Examples:
        .. code-block:: python

            from dagster import AssetExecutionContext, asset
            from pyspark.sql import DataFrame
            from pyspark.sql import functions as F

            from dws_dagster import dws_metrics, dws_ref

            @asset(metadata=dws_ref("results", "forecast"))
            def forecast(context: AssetExecutionContext, hourly_actuals: DataFrame) -> DataFrame:
                predicted = hourly_actuals.withColumn("predicted", F.col("count") * 1.1)
                error = F.abs(F.col("predicted") - F.col("count"))
                mae = predicted.agg(F.avg(error)).first()[0]
                context.add_output_metadata(dws_metrics({"mae": mae}))  # results.json, snapshots
                return predicted
    """
    from dws_dagster.workspace.records import sanitize_parameters

    clean = sanitize_parameters(metrics, what="metric")
    return {keys.METRICS: MetadataValue.json(clean)}


def metrics_from_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A results asset's metrics: `dws/metrics` if the asset set it, else its numeric metadata
    (Dagster's `dagster/...` and dws_dagster's `dws/...` keys are bookkeeping, not metrics)."""
    explicit = metadata_value(metadata.get(keys.METRICS))
    if isinstance(explicit, Mapping):
        return dict(explicit)
    found: dict[str, Any] = {}
    for key, value in metadata.items():
        if key.startswith(("dagster/", keys.PREFIX)):
            continue
        plain = metadata_value(value)
        if isinstance(plain, bool) or not isinstance(plain, int | float):
            continue
        found[key] = plain
    return found
