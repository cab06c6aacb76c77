"""SparkWorkspaceIOManager: Spark DataFrames stored at workspace refs, versioned, with lineage.

One source of truth: each materialization's lineage record is built once, committed to the
workspace store by `handle_output` (so the next step, in this run or another, is checked against
it at once) and carried in the materialization's metadata in exactly the form the lineage sensor
turns back into the same record (`materialization.py`); applying it twice changes nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dagster import (
    ConfigurableIOManager,
    InputContext,
    MetadataValue,
    MultiPartitionsDefinition,
    OutputContext,
    TimeWindowPartitionsDefinition,
)
from dagster_pyspark import PySparkResource
from py4j.protocol import Py4JError
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.bindings import Binding, BindingError, binding_from_metadata, is_hive_style
from dws_dagster.assets.materialization import (
    META_COLUMN_SOURCES,
    META_INPUT_SCHEMAS,
    META_REF_ROOT,
    STEP_KIND,
    column_lineage,
    column_lineage_table,
    column_schema,
    lineage_metadata,
)
from dws_dagster.assets.resources import WorkspaceResource
from dws_dagster.assets.schema_drift import check_one_schema
from dws_dagster.errors import DwsError
from dws_dagster.spark import storage
from dws_dagster.spark.remote_data import HadoopData
from dws_dagster.workspace.gitinfo import git_commit
from dws_dagster.workspace.records import (
    COLUMN_LINEAGE_KEY,
    LineageRecord,
    StepInfo,
    now_iso,
    sanitize_parameters,
)
from dws_dagster.workspace.redaction import redact_text, secret_values
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.snapshots import snapshot_data
from dws_dagster.workspace.snapshots.remote import (
    KEEP_VERSIONS_KEY,
    kept_location,
    kept_versions,
    prunable,
)
from dws_dagster.workspace.swap import kept_version_path, prune_kept
from dws_dagster.workspace.workspace import RemoteDataError, Workspace

if TYPE_CHECKING:
    from dws_dagster.spark.plan import PlanLineage


class OutputTypeError(DwsError):
    """An asset handed the Spark IO manager something other than a DataFrame."""


class MissingPartitionError(DwsError):
    """An input partition has never been materialized."""


@dataclass
class _LoadedInput:
    asset: str
    refs: list[tuple[ResourceRef, str]]
    locations: list[str]


@dataclass
class _StepReads:
    """What one step loaded so far: checked together, recorded with each of its outputs."""

    started: str = field(default_factory=now_iso)
    inputs: dict[str, _LoadedInput] = field(default_factory=dict)


_READS: OrderedDict[tuple[str, str], _StepReads] = OrderedDict()
_READS_LOCK = threading.Lock()
_MAX_TRACKED_STEPS = 4096


def _reads(run_id: str, step_key: str) -> _StepReads:
    with _READS_LOCK:
        key = (run_id, step_key)
        if key not in _READS:
            _READS[key] = _StepReads()
            while len(_READS) > _MAX_TRACKED_STEPS:
                _READS.popitem(last=False)
        _READS.move_to_end(key)
        return _READS[key]


class SparkWorkspaceIOManager(ConfigurableIOManager):
    """Stores Spark DataFrames at workspace refs: atomic writes, content versions as Dagster
    data versions, lineage in the workspace store and in materialization metadata.

    Bind an asset with `metadata=dws_ref(RESOURCE, SUBPATH)`; without it the asset lives at its
    key path in `default_resource`.
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
        ws = self._workspace()
        name = self.default_resource
        if name is None:
            candidates = sorted(
                r.name for r in ws.resources.values() if r.role == "intermediate-data"
            )
            if len(candidates) != 1:
                raise BindingError(
                    f"asset '{'/'.join(key_path)}' has no dws_ref metadata and the workspace has "
                    f"{len(candidates)} intermediate-data resources ({', '.join(candidates)}): "
                    "set default_resource on SparkWorkspaceIOManager, or bind the asset with "
                    "metadata=dws_ref(...)"
                )
            name = candidates[0]
        return ResourceRef(name, "/".join(key_path))

    def binding_for(self, metadata: Mapping[str, Any] | None, key_path: Sequence[str]) -> Binding:
        """The binding of an asset from its definition metadata (checked against the
        workspace: the resource must exist)."""
        what = f"asset '{'/'.join(key_path)}'"
        default = None
        if not metadata or keys.REF not in metadata:
            default = self.default_ref(key_path)
        binding = binding_from_metadata(
            metadata, default_ref=default, default_format=self.format, what=what
        )
        try:
            self._workspace().check_ref(binding.ref)
        except DwsError as exc:
            raise type(exc)(f"{what}: {exc}") from None
        return binding

    # ------------------------------------------------------------------ output

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        asset = context.asset_key.to_user_string()
        if not isinstance(obj, DataFrame):
            raise OutputTypeError(
                f"asset '{asset}' returned {type(obj).__module__}.{type(obj).__qualname__}; "
                "SparkWorkspaceIOManager stores pyspark.sql.DataFrame only: return a DataFrame, "
                "or give this asset another io_manager_key"
            )
        ws = self._workspace()
        binding = self.binding_for(context.definition_metadata, context.asset_key.path)
        partition = _output_partition(context, asset)
        ref = (
            binding.ref
            if partition is None
            else partition_ref(binding, context.asset_partitions_def, partition, f"asset '{asset}'")
        )
        location = ws.location(ws.check_writable(ref))
        reads = _reads(context.run_id, context.step_key)
        # Parameters that cannot be recorded are refused before anything reaches the store.
        config = dagster_compat.op_config(context)
        parameters = sanitize_parameters(
            {**config, **({"dagster/partition": partition} if partition is not None else {})},
            what=f"asset '{asset}': parameter",
        )
        store = ws.store
        plan = self._plan(context, obj, asset)
        inputs, input_assets = self._inputs(
            ws, reads, plan, obj.sparkSession, asset, ref, log=context.log.warning
        )
        # The output claimed (rule (a)) only if the inputs pass too, in one append under the
        # store's lock: a refused asset leaves no claim behind. The lock is taken even when the
        # claim is on record, so an unwritable store is found before the data is touched.
        provenance = store.begin_step(asset, claims=[ref], inputs=inputs, lock=True).provenance
        step = StepInfo(
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
            _describe_lineage(plan, ws, input_assets) if plan is not None else (None, None)
        )
        built: list[LineageRecord] = []

        def lineage(version: str, rows: int) -> dict[str, Any]:
            built.append(
                LineageRecord(
                    ref=str(ref),
                    version=version,
                    step=step,
                    parameters=parameters,
                    inputs=inputs,
                    provenance={**provenance, str(ref): version},
                    start_time=reads.started,
                    end_time=now_iso(),
                    extra={
                        "format": binding.format,
                        "rows": rows,
                        **({} if described is None else {COLUMN_LINEAGE_KEY: described}),
                        **({} if remote_kept is None else {KEEP_VERSIONS_KEY: self.keep_versions}),
                    },
                )
            )
            return built[-1].to_json()

        keep_old_as = self._keep_location(ws, ref, location, obj.sparkSession)
        remote_kept = None if ws.resource(ref.name).is_local else keep_old_as
        try:
            result = storage.write_atomic(
                obj,
                location,
                fmt=binding.format,
                options=binding.write_options,
                partition_by=binding.partition_by,
                keep_old_as=keep_old_as,
                what=f"asset '{asset}' ({ref})",
                lineage=lineage,
                versioning=binding.versioning or self.versioning,
            )
        except Exception as exc:
            try:
                store.fail(
                    [
                        LineageRecord(
                            ref=str(ref),
                            version=None,
                            status="failed",
                            step=step,
                            parameters=parameters,
                            inputs=inputs,
                            provenance=provenance,
                            start_time=reads.started,
                            end_time=now_iso(),
                            error=redact_text(
                                f"{type(exc).__name__}: {exc}", secret_values(config)
                            ),
                        )
                    ]
                )
            except (OSError, DwsError) as unrecorded:  # the same full or read-only disk
                exc.add_note(
                    f"asset '{asset}': the failed attempt could not be recorded in "
                    f"the lineage store either: {redact_text(str(unrecorded))}"
                )
            raise
        self._prune_kept(ws, ref)
        record = built[-1]  # the record kept with the data, committed as is
        store.commit([record])
        if remote_kept is not None:
            self._prune_remote_kept(ws, ref, obj.sparkSession, context.log.warning)
        metadata = lineage_metadata(
            record, fmt=binding.format, input_assets=input_assets, workspace=ws.name
        )
        metadata.update(self._table_metadata(obj, result, plan, direct, described, ws))
        if partition is not None:  # events name the asset by its root, the partition apart
            metadata[META_REF_ROOT] = MetadataValue.text(str(binding.ref))
        context.add_output_metadata(metadata)
        dagster_compat.set_data_version(context, result.version)

    def _plan(self, context: OutputContext, df: DataFrame, asset: str) -> PlanLineage | None:
        if not self.column_lineage:
            return None
        try:
            from dws_dagster.spark.plan import plan_lineage

            return plan_lineage(df)
        except Exception as exc:  # lineage is best effort; the data is what matters
            context.log.warning(
                redact_text(f"asset '{asset}': no column lineage from the Spark plan: {exc}")
            )
            return None

    def _inputs(
        self,
        ws: Workspace,
        reads: _StepReads,
        plan: PlanLineage | None,
        spark: SparkSession,
        asset: str,
        output: ResourceRef,
        *,
        log: Callable[[str], None] | None = None,
    ) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
        """Inputs loaded through the IO manager, plus workspace data the body read by path
        (found in the Spark plan)."""
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
            found[str(read)] = self.current_version(
                ws, read, spark, fmt=item.format or "parquet", what=f"asset '{asset}'", log=log
            )
            loaded_refs.append(read)
        return tuple(sorted(found.items())), input_assets

    def _keep_location(
        self, ws: Workspace, ref: ResourceRef, location: str, spark: SparkSession
    ) -> str | None:
        """Where the data being replaced goes. Local data is retained for snapshots by the
        snapshot itself (copied into the object store), so only `keep_versions` keeps it here.
        Remote data is retained where it lies: it always moves aside (a rename, as the swap
        does anyway) and `_prune_remote_kept` frees it once the write is on record, unless a
        snapshot references it or `keep_versions` keeps it."""
        resource = ws.resource(ref.name)
        if resource.is_local and self.keep_versions <= 0:
            return None
        marker = storage.read_marker(spark, location)
        if marker is None:
            return None
        if resource.is_local:
            return str(
                kept_version_path(ws.resource_root(resource), ref.subpath, marker["version"])
            )
        return kept_location(str(resource.uri), ref.subpath, marker["version"])

    def _prune_kept(self, ws: Workspace, ref: ResourceRef) -> None:
        resource = ws.resource(ref.name)
        if self.keep_versions > 0 and resource.is_local:
            prune_kept(ws.resource_root(resource), ref.subpath, self.keep_versions)

    def _prune_remote_kept(
        self, ws: Workspace, ref: ResourceRef, spark: SparkSession, warn: Callable[[str], None]
    ) -> None:
        """Free the ref's kept remote versions that no snapshot references, beyond the newest
        `keep_versions`. Run after the write's record is committed: a snapshot taken since then
        records the new version, and one taken before is in the store when this reads it."""
        resource = ws.resource(ref.name)
        remote = HadoopData(spark)
        uri = str(resource.uri)
        try:
            doomed = prunable(
                kept_versions(remote, uri, ref.subpath),
                snapshot_data.referenced(ws, str(ref)).get(str(ref), ()),
                self.keep_versions,
            )
            for version in doomed:
                remote.delete(kept_location(uri, ref.subpath, version))
        except (DwsError, Py4JError) as exc:  # the data is written: a later write or gc frees it
            warn(
                redact_text(
                    f"asset {ref}: replaced versions were not freed: {exc}; "
                    "'dws-dagster gc' frees them later"
                )
            )

    def _table_metadata(
        self,
        df: DataFrame,
        result: storage.WriteResult,
        plan: PlanLineage | None,
        direct: Mapping[str, list[tuple[str, str]]] | None,
        described: Mapping[str, Any] | None,
        ws: Workspace,
    ) -> dict[str, Any]:
        fields = [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields]
        uri = (
            result.location
            if not storage.is_local(result.location)
            else f"file://{result.location}"
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
            metadata[META_COLUMN_SOURCES] = column_lineage_table(
                described,
                columns=[name for name, _, _ in fields],
                assets=_writing_assets(ws, described),
            )
            # (dws/column_lineage itself comes with the record: `lineage_metadata`.)
            schemas = _input_schemas(plan, ws)
            if schemas:
                metadata[META_INPUT_SCHEMAS] = MetadataValue.json(schemas)
        return metadata

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
            version = self.current_version(
                ws,
                binding.ref,
                self._session(),
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
        uri = f"file://{location}" if storage.is_local(location) else location
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
            refs = [partition_ref(binding, context.asset_partitions_def, key, what) for key in keys]
        else:
            keys, refs = [], [binding.ref]
        locations = [ws.location(ref) for ref in refs]
        self._check_present(ws, refs, locations, keys, spark, what, upstream)
        if len(keys) > 1:
            check_one_schema(
                {
                    key: storage.read_marker(spark, location)
                    for key, location in zip(keys, locations, strict=True)
                },
                what=what,
                upstream=upstream,
            )
        versions = [
            self.current_version(
                ws,
                ref,
                spark,
                fmt=binding.format,
                options=binding.read_options,
                what=what,
                log=context.log.warning,
            )
            for ref in refs
        ]

        run_id, step_key = dagster_compat.step_identity(context)
        reads = _reads(run_id, step_key)
        loaded = _LoadedInput(upstream, list(zip(refs, versions, strict=True)), locations)
        others = [
            pair
            for name, other in reads.inputs.items()
            if name != context.name
            for pair in other.refs
        ]
        # Rule (b) and unknown refs, before the asset body runs.
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

    def current_version(
        self,
        ws: Workspace,
        ref: ResourceRef,
        spark: SparkSession,
        *,
        fmt: str = "parquet",
        options: Mapping[str, str] | None = None,
        what: str,
        log: Callable[[str], None] | None = None,
    ) -> str:
        """The version of the data at a ref now: the marker written with it (re-hashed when
        `verify_inputs`), the byte version of files written outside Spark, or for remote data
        without a marker a listing or logical version by the resource's versioning mode."""
        location = ws.location(ref)
        resource = ws.resource(ref.name)
        if not self.verify_inputs or not resource.is_local:
            marker = storage.read_marker(spark, location)
            if marker is not None:
                _catch_up(ws, ref, marker)
                return marker["version"]
        try:
            return ws.version_of(ref, on_skip=log)
        except RemoteDataError:
            pass
        if resource.versioning == "listing":
            return storage.remote_listing_version(spark, location)
        df = storage.read(spark, location, fmt=fmt, options=options, what=what)
        return storage.dataframe_version(df)[0]


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


def _output_partition(context: OutputContext, asset: str) -> str | None:
    if not context.has_asset_partitions:
        return None
    keys = list(context.asset_partition_keys)
    if len(keys) != 1:
        raise DwsError(
            f"asset '{asset}' materializes {len(keys)} partitions in one step "
            f"({keys[0]} … {keys[-1]}); SparkWorkspaceIOManager versions each partition on its "
            "own: use BackfillPolicy.multi_run(1) (one partition per run)"
        )
    return keys[0]


def partition_ref(binding: Binding, partitions_def: Any, key: str, what: str) -> ResourceRef:
    """The ref of one partition of a bound asset (time windows and dimensions filled in)."""
    dimensions = window = None
    if isinstance(partitions_def, MultiPartitionsDefinition):
        dimensions = dict(partitions_def.get_partition_key_from_str(str(key)).keys_by_dimension)
    elif isinstance(partitions_def, TimeWindowPartitionsDefinition):
        span = partitions_def.time_window_for_partition_key(str(key))
        window = (span.start, span.end)
    return binding.partition_ref(str(key), dimensions=dimensions, window=window, what=what)


def _input_schemas(plan: PlanLineage, ws: Workspace) -> dict[str, list[list[Any]]]:
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


def _code_version(context: OutputContext) -> str | None:
    try:
        return context.asset_spec.code_version
    except Exception:  # ops outside assets have no spec
        return None


def _writing_assets(ws: Workspace, described: Mapping[str, Any]) -> dict[str, str]:
    """{ref: the Dagster asset whose materialization it holds} for the inputs of the lineage
    read by path (not loaded as an asset's input), from the store: one query."""
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


def _describe_lineage(
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

    def asset_of(ref: str | None) -> str | None:
        if ref is None:
            return None
        for input_ref, asset in input_assets.items():
            if ResourceRef.parse(input_ref).overlaps(ResourceRef.parse(ref)):
                return asset
        return None

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

    from dws_dagster.spark.plan import LineageKind

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
