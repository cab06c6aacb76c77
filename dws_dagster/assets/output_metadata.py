"""What a materialization says about the table it wrote, beyond the lineage record: Dagster's
table metadata, and the Spark plan's column lineage in workspace terms (refs, and the assets
that wrote them) for the record and for Dagster's column deps alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dagster import MetadataValue
from pyspark.sql import DataFrame

from dws_dagster import metadata_keys as keys
from dws_dagster.assets.materialization import (
    STEP_KIND,
    column_lineage,
    column_lineage_table,
    column_schema,
)
from dws_dagster.spark import locations, storage
from dws_dagster.spark.lineage_model import LineageKind
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.redaction import redact_text
from dws_dagster.workspace.refs import ResourceRef

if TYPE_CHECKING:
    from dws_dagster.spark.lineage_model import PlanLineage


def table_metadata(
    df: DataFrame,
    result: storage.WriteResult,
    plan: PlanLineage | None,
    direct: Mapping[str, list[tuple[str, str]]] | None,
    described: Mapping[str, Any] | None,
    ws: Workspace,
    *,
    schemas: Mapping[str, list[list[Any]]] | None = None,
    writers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The materialization's table metadata: Dagster's schema, row count and URI, and with
    column lineage Dagster's column deps, the column sources table and the inputs' schemas.
    `schemas` (`input_schemas`) and `writers` (`writing_assets`), when given, were worked out
    once for several partitions written together."""
    fields = [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields]
    uri = (
        result.location if not locations.is_local(result.location) else f"file://{result.location}"
    )
    metadata: dict[str, Any] = {
        "dagster/column_schema": column_schema(fields),
        "dagster/row_count": MetadataValue.int(result.row_count),
        "dagster/uri": MetadataValue.text(uri),
    }
    if result.size_bytes is not None:
        metadata[keys.SIZE_BYTES] = MetadataValue.int(result.size_bytes)
    if plan is not None and direct is not None and described is not None:
        metadata["dagster/column_lineage"] = column_lineage(direct)
        # Open-source Dagster shows column lineage only as JSON: a table beside it.
        metadata[keys.COLUMN_SOURCES] = column_lineage_table(
            described,
            columns=[name for name, _, _ in fields],
            assets=writing_assets(ws, described) if writers is None else writers,
        )
        # (dws/column_lineage itself comes with the record: `lineage_metadata`.)
        if schemas is None:
            schemas = input_schemas(plan, ws)
        if schemas:
            metadata[keys.INPUT_SCHEMAS] = MetadataValue.json(schemas)
    return metadata


def describe_lineage(
    plan: PlanLineage, ws: Workspace, input_assets: Mapping[str, str]
) -> tuple[dict[str, list[tuple[str, str]]], dict[str, Any]]:
    """Plan lineage in workspace terms: Dagster's direct column deps (inputs that are assets)
    and the full description (refs, direct and indirect) for dws/column_lineage."""
    refs: dict[str, str | None] = {}

    def ref_of(path: str) -> str | None:
        if path not in refs:
            ref = ws.ref_for_location(path)
            refs[path] = str(ref) if ref is not None else None
        return refs[path]

    loaded = [(ResourceRef.parse(ref), asset) for ref, asset in input_assets.items()]
    assets: dict[str, str | None] = {}

    def asset_of(ref: str | None) -> str | None:
        if ref is None:
            return None
        if ref not in assets:
            parsed = ResourceRef.parse(ref)
            assets[ref] = next(
                (asset for input_ref, asset in loaded if input_ref.overlaps(parsed)), None
            )
        return assets[ref]

    def source(item: Any) -> dict[str, Any]:
        ref = ref_of(item.path)
        described = {
            "ref": ref,
            "column": item.column,
            "kind": item.kind.value,
            "subtype": item.subtype,
        }
        if ref is None:
            described["location"] = redact_text(item.path)
        asset = asset_of(ref)
        if asset is not None:
            described["asset"] = asset
        return described

    direct: dict[str, list[tuple[str, str]]] = {}
    columns: dict[str, list[dict[str, Any]]] = {}
    for column, sources in plan.columns.items():
        columns[column] = [source(item) for item in sources]
        direct[column] = [
            (asset, item.column)
            for item in sources
            if item.kind is LineageKind.DIRECT
            and (asset := asset_of(ref_of(item.path))) is not None
        ]
    described = {
        "columns": columns,
        "dataset": [source(item) for item in plan.dataset],
        "complete": plan.complete,
    }
    return direct, described


def input_schemas(plan: PlanLineage, ws: Workspace) -> dict[str, list[list[Any]]]:
    """The columns Spark read from each input (by ref, else by location): OpenLineage events
    give them as the inputs' schema facets, so column lineage resolves to an input's field
    even for landed files no asset wrote."""
    schemas: dict[str, list[list[Any]]] = {}
    for item in plan.inputs:
        if not item.schema:
            continue
        ref = ws.ref_for_location(item.path)
        schemas[str(ref) if ref is not None else item.path] = [
            [name, spark_type, nullable] for name, spark_type, nullable in item.schema
        ]
    return schemas


def writing_assets(ws: Workspace, described: Mapping[str, Any]) -> dict[str, str]:
    """{ref: the Dagster asset whose materialization it holds} for the inputs of the lineage
    read by path (not loaded as an asset's input), from the store."""
    sources = [
        *described.get("dataset", ()),
        *(item for items in described.get("columns", {}).values() for item in items),
    ]
    refs = sorted({item["ref"] for item in sources if item.get("ref") and not item.get("asset")})
    found: dict[str, str] = {}
    for ref, state in ws.store.states_in(None, refs).items() if refs else ():
        record = state.lineage_record()
        if record is not None and record.step is not None and record.step.kind == STEP_KIND:
            found[ref] = record.step.name
    return found
