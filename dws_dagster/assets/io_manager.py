"""SparkWorkspaceIOManager: Spark DataFrames stored at workspace refs, versioned, with lineage.

One source of truth: each materialization's lineage record is built once, committed to the
workspace store by `handle_output` (so the next step, in this run or another, is checked against
it at once) and carried in the materialization's metadata in exactly the form the lineage sensor
turns back into the same record (`materialization.py`); applying it twice changes nothing.

The manager drives `load_input` and `handle_output`; the work they share out lives beside it:
`partitions` (each partition's ref), `step_reads` (what a running step has loaded),
`input_versions` (the versions of what it read), `replaced_versions` (keeping and freeing
the data a write replaces), `output_step` (an output's write and its lineage record) and
`output_metadata` (table metadata and column lineage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from dagster import ConfigurableIOManager, InputContext, MetadataValue, OutputContext
from dagster_pyspark import PySparkResource
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.binding_config import RefBinding, bindings_by_asset, bound_metadata
from dws_dagster.assets.bindings import Binding, binding_in, default_ref
from dws_dagster.assets.input_versions import current_version, step_inputs
from dws_dagster.assets.materialization import STEP_KIND, lineage_metadata
from dws_dagster.assets.output_metadata import describe_lineage, table_metadata
from dws_dagster.assets.output_step import (
    OutputStep,
    check_dataframe,
    refuse_replay_outside_scratch,
)
from dws_dagster.assets.partition_range import write_partition_range
from dws_dagster.assets.partitions import is_hive_style, partition_key_ref
from dws_dagster.assets.replaced_versions import keep_location, prune_local_kept, prune_remote_kept
from dws_dagster.assets.schema_drift import check_one_schema
from dws_dagster.assets.step_reads import LoadedInput, step_reads
from dws_dagster.assets.workspace_resource import WorkspaceResource
from dws_dagster.errors import (
    DwsError,
    MissingPartitionError,
)
from dws_dagster.spark import storage
from dws_dagster.spark.locations import check_reachable, is_local
from dws_dagster.spark.storage import WriteResult
from dws_dagster.spark.version_marker import read_marker
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.gitinfo import git_commit
from dws_dagster.workspace.records import StepInfo, now_iso, sanitize_parameters
from dws_dagster.workspace.redaction import redact_text
from dws_dagster.workspace.refs import ResourceRef

if TYPE_CHECKING:
    from dws_dagster.spark.lineage_model import PlanLineage


class SparkWorkspaceIOManager(ConfigurableIOManager):
    """Stores Spark DataFrames at workspace refs: atomic writes, content versions as Dagster
    data versions, lineage in the workspace store and in materialization metadata.

    Bind an asset with `metadata=dws_ref(RESOURCE, SUBPATH)`; without it the asset lives at its
    key path in `default_resource`.

    Examples:
        .. code-block:: python

            from dagster import Definitions, asset
            from dagster_pyspark import PySparkResource
            from pyspark.sql import DataFrame

            from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource, dws_ref

            @asset(metadata=dws_ref("intermediate-data", "zones"), code_version="2")
            def zones(pyspark: PySparkResource) -> DataFrame:
                return pyspark.spark_session.read.csv("data/source/zones.csv", header=True)

            pyspark = PySparkResource(spark_config={"spark.sql.session.timeZone": "UTC"})
            workspace = WorkspaceResource(root=".")
            manager = SparkWorkspaceIOManager(workspace=workspace, pyspark=pyspark, keep_versions=2)
            resources = {"io_manager": manager, "pyspark": pyspark}
            defs = Definitions(assets=[zones], resources=resources)
    """

    workspace: WorkspaceResource = Field(description="The workspace the assets live in.")
    pyspark: PySparkResource | None = Field(
        default=None, description="Session for reading inputs; default: the active session."
    )
    default_resource: str | None = Field(
        default=None,
        description="Resource for assets without dws_ref metadata; default: the "
        "workspace's only intermediate-data resource.",
    )
    format: str = Field(default="parquet", description="parquet, csv, json or orc.")
    keep_versions: int = Field(
        default=0,
        ge=0,
        description="Earlier data versions kept per ref beyond those a "
        "snapshot references (snapshots retain theirs whatever this is).",
    )
    verify_inputs: bool = Field(
        default=False,
        description="Re-hash local input files instead of trusting the version "
        "marker written with them (catches edits made outside any step).",
    )
    column_lineage: bool = Field(
        default=True, description="Derive dagster/column_lineage from the Spark plan."
    )
    bindings: list[RefBinding] = Field(
        default=[],
        description="Assets bound to refs by configuration rather than dws_ref metadata "
        "(the WorkspaceComponent's YAML bindings); an asset is bound one way or the other.",
    )
    versioning: Literal["rows", "files"] = Field(
        default="rows",
        description="How written data is versioned: 'rows' hashes every row in "
        "the write pass (the version ignores row order, so unchanged results keep their version "
        "after any shuffle); 'files' versions the written files' bytes (no per-row work, for "
        "very large outputs of deterministic plans). An asset's dws_ref(versioning=...) wins.",
    )

    # ----------------------------------------------------------------- bindings

    def _workspace(self) -> Workspace:
        return self.workspace.workspace()

    def default_ref(self, key_path: Sequence[str]) -> ResourceRef:
        """Where an asset without `dws_ref` metadata lives."""
        return default_ref(self._workspace(), self.default_resource, key_path)

    def binding_for(self, metadata: Mapping[str, Any] | None, key_path: Sequence[str]) -> Binding:
        """The binding of an asset from its definition metadata, or its configured binding
        (`bindings`), checked against the workspace: the resource must exist."""
        return binding_in(
            self._workspace(),
            bound_metadata(metadata, key_path, bindings_by_asset(self.bindings)),
            key_path,
            default_resource=self.default_resource,
            default_format=self.format,
        )

    # ------------------------------------------------------------------ output

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        """A write's steps: check what is written where, begin the step (its inputs checked
        and its output claimed in the store), write the data atomically with its lineage
        record, commit the record, and describe the materialization."""
        asset = context.asset_key.to_user_string()
        check_dataframe(obj, asset)
        ws = self._workspace()
        refuse_replay_outside_scratch(context, ws, asset)
        binding = self.binding_for(context.definition_metadata, context.asset_key.path)
        partition_keys = _output_partitions(context)
        if len(partition_keys) > 1:  # a range in one step (BackfillPolicy.single_run())
            reads = step_reads(context.run_id, context.step_key)
            version = _code_version(context)
            write_partition_range(self, context, obj, binding, ws, partition_keys, reads, version)
            return
        partition = partition_keys[0] if partition_keys else None
        step = self._begin_step(context, obj, ws, binding, partition, asset)
        result = self._write(step)
        self._commit(step, context)
        self._describe(step, result, context)

    def _begin_step(
        self,
        context: OutputContext,
        obj: DataFrame,
        ws: Workspace,
        binding: Binding,
        partition: str | None,
        asset: str,
    ) -> OutputStep:
        """Where the output goes, what the step read, and its output claimed: checked before
        anything is written."""
        ref = binding.ref
        if partition is not None:
            ref = partition_key_ref(
                binding, context.asset_partitions_def, partition, f"asset '{asset}'"
            )
        location = ws.location(ws.check_writable(ref))
        check_reachable(obj.sparkSession, location, f"asset '{asset}' ({ref})")
        reads = step_reads(context.run_id, context.step_key)
        # Parameters that cannot be recorded are refused before anything reaches the store.
        config = dagster_compat.op_config(context)
        parameters = sanitize_parameters(
            {**config, **({"dagster/partition": partition} if partition is not None else {})},
            what=f"asset '{asset}': parameter",
        )
        store = ws.store
        plan = self._plan(context, obj, asset)
        inputs, input_assets = step_inputs(
            ws,
            reads,
            plan if plan is not None else _read_paths(obj),
            obj.sparkSession,
            asset,
            ref,
            verify=self.verify_inputs,
            log=context.log.warning,
        )
        # The output is claimed (the one-writer rule: no two steps write the same or nested
        # refs) only if the inputs pass too, in one append under the store's lock: a refused
        # asset leaves no claim behind. The lock is taken even when the claim is on record, so
        # an unwritable store is found before the data is touched.
        provenance = store.begin_step(asset, claims=[ref], inputs=inputs, lock=True).provenance
        info = StepInfo(
            name=asset,
            kind=STEP_KIND,
            run_id=context.run_id,
            partition=partition,
            code_version=_code_version(context),
            git_commit=git_commit(ws.root),
        )
        # Column lineage is part of the record (the lineage page and `lineage` read it from
        # the store), described once for the record and the metadata alike.
        direct, described = (
            describe_lineage(plan, ws, input_assets) if plan is not None else (None, None)
        )
        keep_old_as = keep_location(ws, ref, location, obj.sparkSession, self.keep_versions)
        return OutputStep(
            df=obj,
            asset=asset,
            ws=ws,
            binding=binding,
            ref=ref,
            partition=partition,
            location=location,
            started=reads.started,
            config=config,
            parameters=parameters,
            plan=plan,
            inputs=inputs,
            input_assets=input_assets,
            provenance=provenance,
            info=info,
            direct=direct,
            described=described,
            keep_old_as=keep_old_as,
            remote_kept=None if ws.resource(ref.name).is_local else keep_old_as,
            keep_versions=self.keep_versions,
        )

    def _write(self, step: OutputStep) -> WriteResult:
        """The data written atomically, its lineage record kept with it; a failed write is
        recorded as a failed attempt (when the store can still take it) and raised."""
        try:
            return storage.write_atomic(
                step.df,
                step.location,
                fmt=step.binding.format,
                options=step.binding.write_options,
                partition_by=step.binding.partition_by,
                keep_old_as=step.keep_old_as,
                what=f"asset '{step.asset}' ({step.ref})",
                lineage=step.record,
                versioning=step.binding.versioning or self.versioning,
            )
        except Exception as exc:
            try:
                step.ws.store.fail([step.failed(exc)])
            except (OSError, DwsError) as unrecorded:  # the same full or read-only disk
                exc.add_note(
                    f"asset '{step.asset}': the failed attempt could not be recorded in "
                    f"the lineage store either: {redact_text(str(unrecorded))}"
                )
            raise

    def _commit(self, step: OutputStep, context: OutputContext) -> None:
        """The record kept with the data committed as is, and the versions kept beyond
        `keep_versions` freed."""
        prune_local_kept(step.ws, step.ref, self.keep_versions)
        step.ws.store.commit([step.records[-1]])
        if step.remote_kept is not None:
            spark = step.df.sparkSession
            prune_remote_kept(step.ws, step.ref, spark, self.keep_versions, context.log.warning)

    def _describe(self, step: OutputStep, result: WriteResult, context: OutputContext) -> None:
        """The materialization's metadata (the lineage, the table) and its data version."""
        ws, binding = step.ws, step.binding
        metadata = lineage_metadata(
            step.records[-1], fmt=binding.format, input_assets=step.input_assets, workspace=ws.name
        )
        metadata.update(table_metadata(step.df, result, step.plan, step.direct, step.described, ws))
        if step.partition is not None:  # events name the asset by its root, the partition apart
            metadata[keys.REF_ROOT] = MetadataValue.text(str(binding.ref))
        if ws.replay_of is not None:
            metadata[keys.REPLAY_OF] = MetadataValue.text(ws.replay_of["snapshot"])
        context.add_output_metadata(metadata)
        dagster_compat.set_data_version(context, result.version)

    def _plan(self, context: OutputContext, df: DataFrame, asset: str) -> PlanLineage | None:
        if not self.column_lineage:
            return None
        try:
            from dws_dagster.spark.column_lineage import plan_lineage

            return plan_lineage(df)
        except Exception as exc:  # lineage is best effort; the data is what matters
            context.log.warning(
                redact_text(f"asset '{asset}': no column lineage from the Spark plan: {exc}")
            )
            return None

    # ----------------------------------------------------------------- sources

    def observe_source(
        self,
        metadata: Mapping[str, Any],
        key_path: Sequence[str],
        *,
        log: Callable[[str], None] | None = None,
    ) -> tuple[str, str, str]:
        """Version source data now (local files by their bytes, whatever marker they carry) and
        record it as an observation; returns (version, URI, observation time). Files skipped
        as not data (pipes, sockets, broken links) are told to `log` (the Dagster log)."""
        ws = self._workspace()
        binding = self.binding_for(metadata, key_path)
        location = ws.location(binding.ref)
        what = f"source asset '{'/'.join(key_path)}'"
        resource = ws.resource(binding.ref.name)
        if resource.is_local:
            version = ws.version_of(binding.ref, on_skip=log)
        else:
            version = current_version(
                ws,
                binding.ref,
                self._session(),
                verify=self.verify_inputs,
                fmt=binding.format,
                options=binding.read_options,
                what=what,
                log=log,
            )
        at = now_iso()
        # Versioned just now: also the way back for a source a partial restore left unknown.
        ws.store.observe(
            binding.ref, version, extra={"asset": "/".join(key_path)}, at=at, recover=True
        )
        uri = f"file://{location}" if is_local(location) else location
        return version, uri, at

    # ------------------------------------------------------------------- input

    def load_input(self, context: InputContext) -> DataFrame:
        upstream = context.asset_key.to_user_string()
        consumer = (
            ", ".join(k.to_user_string() for k in dagster_compat.consumer_asset_keys(context))
            or upstream
        )
        ws = self._workspace()
        metadata = context.upstream_output.definition_metadata if context.upstream_output else None
        binding = self.binding_for(metadata, context.asset_key.path)
        spark = self._session()
        what = f"asset '{consumer}' reading '{upstream}'"
        if context.has_asset_partitions:
            keys = list(context.asset_partition_keys)
            refs = [
                partition_key_ref(binding, context.asset_partitions_def, key, what) for key in keys
            ]
        else:
            keys, refs = [], [binding.ref]
        locations = [ws.location(ref) for ref in refs]
        self._check_present(ws, refs, locations, keys, spark, what, upstream)
        if len(keys) > 1:
            check_one_schema(
                {
                    key: read_marker(spark, location)
                    for key, location in zip(keys, locations, strict=True)
                },
                what=what,
                upstream=upstream,
            )
        versions = [
            current_version(
                ws,
                ref,
                spark,
                verify=self.verify_inputs,
                fmt=binding.format,
                options=binding.read_options,
                what=what,
                log=context.log.warning,
            )
            for ref in refs
        ]

        run_id, step_key = dagster_compat.step_identity(context)
        reads = step_reads(run_id, step_key)
        loaded = LoadedInput(
            upstream, list(zip(refs, versions, strict=True)), keys=[str(k) for k in keys] or None
        )
        others = [
            pair
            for name, other in reads.inputs.items()
            if name != context.name
            for pair in other.refs
        ]
        # The one-version rule (no step reads two versions of one input) and unknown refs,
        # before the asset body runs.
        ws.store.check_inputs(
            consumer,
            [(str(r), v) for r, v in [*others, *loaded.refs]],
            outputs=self._consumer_refs(context),
        )
        reads.inputs[context.name] = loaded
        base_path = None
        if refs and keys and is_hive_style(binding.ref, refs[0]):
            base_path = ws.location(binding.ref)
        return storage.read(
            spark,
            locations,
            fmt=binding.format,
            options=binding.read_options,
            base_path=base_path,
            what=what,
        )

    def _consumer_refs(self, context: InputContext) -> list[ResourceRef]:
        """The refs the consuming step writes, so its own earlier versions (a partitioned asset
        reading its previous partition) are not taken for a second version of an input."""
        refs = []
        for key in dagster_compat.consumer_asset_keys(context):
            metadata = dagster_compat.asset_metadata(context, key)
            try:
                refs.append(self.binding_for(metadata, key.path).ref)
            except DwsError:
                continue
        return refs

    def _check_present(
        self,
        ws: Workspace,
        refs: list[ResourceRef],
        locations: list[str],
        keys: list[str] | None,
        spark: SparkSession,
        what: str,
        upstream: str,
    ) -> None:
        missing = [
            key or str(ref)
            for key, ref, location in zip(
                keys if keys else [None] * len(refs), refs, locations, strict=True
            )
            if not storage.exists(spark, location)
        ]
        if not missing:
            return
        if keys:
            shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
            raise MissingPartitionError(
                f"{what}: {len(missing)} of {len(keys)} partitions have no data ({shown}): "
                f"materialize them first (e.g. a backfill of '{upstream}'), or narrow the "
                "partition mapping"
            )
        raise MissingPartitionError(
            f"{what}: ref {refs[0]} has no data at {locations[0]}: materialize '{upstream}' first"
        )

    def _session(self) -> SparkSession:
        if self.pyspark is not None and self.pyspark.spark_session is not None:
            return self.pyspark.spark_session
        active = SparkSession.getActiveSession()
        return active if active is not None else SparkSession.builder.getOrCreate()


def _output_partitions(context: OutputContext) -> list[str]:
    """The partition keys the step stores: none, one, or a range (`partition_range.py`)."""
    if not context.has_asset_partitions:
        return []
    return [str(key) for key in context.asset_partition_keys]


def _read_paths(df: DataFrame) -> PlanLineage | None:
    """Data a Spark Connect DataFrame reads by path (its inputs, without column lineage)."""
    from dws_dagster.spark.connect.read_paths import connect_read_paths

    return connect_read_paths(df)


def _code_version(context: OutputContext) -> str | None:
    try:
        return context.asset_spec.code_version
    except Exception:  # ops outside assets have no spec
        return None
