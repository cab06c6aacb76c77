"""The versions of the data a step reads, as the input check and the lineage record need them:
the marker written with the data, else a version computed from the data itself; and the full
list of a step's inputs, loaded or read by path.

Reading a marker is also where a lost commit is found: a run killed after its data was swapped
in but before its record was committed leaves the record in the marker only (`_catch_up`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from dws_dagster.assets.step_reads import StepReads
from dws_dagster.spark import remote_data, row_version, storage, version_marker
from dws_dagster.workspace.definition import RemoteDataError, Workspace
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.refs import ResourceRef

if TYPE_CHECKING:
    from dws_dagster.spark.lineage_model import PlanLineage


def current_version(
    ws: Workspace,
    ref: ResourceRef,
    spark: SparkSession,
    *,
    verify: bool = False,
    fmt: str = "parquet",
    options: Mapping[str, str] | None = None,
    what: str,
    log: Callable[[str], None] | None = None,
) -> str:
    """The version of the data at a ref now: the marker written with it (local data re-hashed
    instead when `verify`), the byte version of files written outside Spark, or for remote
    data without a marker a listing or logical version by the resource's versioning mode."""
    location = ws.location(ref)
    resource = ws.resource(ref.name)
    if not verify or not resource.is_local:
        marker = version_marker.read_marker(spark, location)
        if marker is not None:
            _catch_up(ws, ref, marker)
            return marker["version"]
    try:
        return ws.version_of(ref, on_skip=log)
    except RemoteDataError:
        pass
    if resource.versioning == "listing":
        return remote_data.remote_listing_version(spark, location)
    df = storage.read(spark, location, fmt=fmt, options=options, what=what)
    return row_version.dataframe_version(df)[0]


def step_inputs(
    ws: Workspace,
    reads: StepReads,
    plan: PlanLineage | None,
    spark: SparkSession,
    asset: str,
    output: ResourceRef,
    *,
    verify: bool,
    log: Callable[[str], None] | None = None,
) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
    """A step's inputs for its lineage record, as (ref, version) sorted, and the asset each
    loaded ref belongs to: those loaded through the IO manager, plus workspace data the body
    read by path (found in the Spark plan; the output's own ref and data already loaded
    are left out)."""
    found: dict[str, str] = {}
    input_assets: dict[str, str] = {}
    for loaded in reads.inputs.values():
        for ref, version in loaded.refs:
            found[str(ref)] = version
            input_assets[str(ref)] = loaded.asset
    loaded_refs = [ResourceRef.parse(key) for key in found]
    for item in plan.inputs if plan is not None else ():
        read = ws.ref_for_location(item.path)
        if read is None or read.overlaps(output) or any(r.overlaps(read) for r in loaded_refs):
            continue
        found[str(read)] = current_version(
            ws,
            read,
            spark,
            verify=verify,
            fmt=item.format or "parquet",
            what=f"asset '{asset}'",
            log=log,
        )
        loaded_refs.append(read)
    return tuple(sorted(found.items())), input_assets


def _catch_up(ws: Workspace, ref: ResourceRef, marker: Mapping[str, Any]) -> None:
    """Commit the lineage record kept in a data marker if the store never got it: a run killed
    after its data was swapped in but before its record was committed leaves it there only.
    `LineageStore.apply` skips records it saw (a restore that replaced them) and older ones."""
    data = marker.get("lineage")
    if (
        not isinstance(data, dict)
        or data.get("ref") != str(ref)
        or data.get("version") != marker["version"]
    ):
        return
    state = ws.store.get(ref)
    if state is not None and (state.version == marker["version"] or state.unknown):
        return
    try:
        record = LineageRecord.from_json(data)
    except (KeyError, TypeError, ValueError):
        return  # a damaged marker: the input check reports the drift instead
    ws.store.apply(record)
