"""One output's write by the IO manager, as the steps of `SparkWorkspaceIOManager.handle_output`
pass it on: what it writes where, what the step read, and the lineage record of the data
written (or of the failed attempt), built once the write knows the version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagster import OutputContext
from pyspark.sql import DataFrame

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.bindings import Binding
from dws_dagster.errors import OutputTypeError, ReplayOutsideScratchError
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import (
    COLUMN_LINEAGE_KEY,
    LineageRecord,
    StepInfo,
    now_iso,
)
from dws_dagster.workspace.redaction import redact_text, secret_values
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.remote_versions import KEEP_VERSIONS_KEY

if TYPE_CHECKING:
    from dws_dagster.spark.lineage_model import PlanLineage


@dataclass
class OutputStep:
    """One step's write of one output, as the IO manager found it before anything was written:
    the ref and location, what the step read and its parameters, its claim's provenance, and
    the column lineage. `record` gives the write its lineage record once the version is known:
    the data's marker keeps it, and the store commits it as is once the data is in place."""

    df: DataFrame
    asset: str
    ws: Workspace
    binding: Binding
    ref: ResourceRef
    partition: str | None
    location: str
    started: str
    config: Mapping[str, Any]
    parameters: dict[str, Any]
    plan: PlanLineage | None
    inputs: tuple[tuple[str, str], ...]
    input_assets: dict[str, str]
    provenance: dict[str, str]
    info: StepInfo
    direct: dict[str, list[tuple[str, str]]] | None
    described: dict[str, Any] | None
    keep_old_as: str | None
    #: where the replaced remote data is kept (None: local data, or nothing kept)
    remote_kept: str | None
    keep_versions: int
    #: the record the write asked for (once), kept in the data's marker and then committed
    records: list[LineageRecord] = field(default_factory=list)

    def record(self, version: str, rows: int) -> dict[str, Any]:
        """The lineage record of the data written, as its marker keeps it."""
        self.records.append(
            LineageRecord(
                ref=str(self.ref),
                version=version,
                step=self.info,
                parameters=self.parameters,
                inputs=self.inputs,
                provenance={**self.provenance, str(self.ref): version},
                start_time=self.started,
                end_time=now_iso(),
                extra={
                    "format": self.binding.format,
                    "rows": rows,
                    **({} if self.described is None else {COLUMN_LINEAGE_KEY: self.described}),
                    **({} if self.remote_kept is None else {KEEP_VERSIONS_KEY: self.keep_versions}),
                },
            )
        )
        return self.records[-1].to_json()

    def failed(self, exc: Exception) -> LineageRecord:
        """The record of a failed attempt (its error without the config's secrets)."""
        return LineageRecord(
            ref=str(self.ref),
            version=None,
            status="failed",
            step=self.info,
            parameters=self.parameters,
            inputs=self.inputs,
            provenance=self.provenance,
            start_time=self.started,
            end_time=now_iso(),
            error=redact_text(f"{type(exc).__name__}: {exc}", secret_values(self.config)),
        )


def check_dataframe(obj: Any, asset: str) -> None:
    if not isinstance(obj, DataFrame):
        raise OutputTypeError(
            f"asset '{asset}' returned {type(obj).__module__}.{type(obj).__qualname__}; "
            "SparkWorkspaceIOManager stores pyspark.sql.DataFrame only: return a DataFrame, "
            "or give this asset another io_manager_key"
        )


def refuse_replay_outside_scratch(context: OutputContext, ws: Workspace, asset: str) -> None:
    """The lineage sensor leaves replay runs alone: a replay's write outside its scratch
    workspace would replace the workspace's data with no snapshot or OpenLineage event to say
    so."""
    replaying = dagster_compat.run_tags(context).get(keys.REPLAY_OF)
    if replaying is not None and ws.replay_of is None:
        raise ReplayOutsideScratchError(
            f"asset '{asset}': run {context.run_id} is tagged {keys.REPLAY_OF}="
            f"{replaying}, a replay of a snapshot, but writes to workspace "
            f"'{ws.name}' ({ws.root}) itself, not to a replay's scratch workspace; nothing "
            "was written. Replays run through 'dws-dagster replay'; to materialize the "
            f"asset here, launch a new run without the {keys.REPLAY_OF} tag"
        )
