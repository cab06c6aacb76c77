"""A range of partitions materialized in one step (`BackfillPolicy.single_run()`): one Spark
write for the whole range, and for each partition exactly what one run per partition records —
its own ref, content version, lineage record and Dagster metadata.

Which partition a row belongs to is read the Dagster way (as dagster-deltalake and
dagster-duckdb read it): the asset's `partition_expr` metadata names the column. A time-window
partition holds the rows whose column (a date, a timestamp, or the partition key as text) falls
in its window; another partition the rows whose column equals its key.

Each partition's record names the inputs that partition reads: the partitions of a loaded
upstream asset its partition mapping gives it (Dagster's mapping, as for one run per
partition), unpartitioned inputs, and the data read by path whose rows it holds
(`range_inputs`: known from the files Spark read each row from, conservative where the plan
cannot tell).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetKey,
    MetadataValue,
    MultiPartitionsDefinition,
    OutputContext,
    TimeWindowPartitionsDefinition,
)
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, StringType, TimestampNTZType, TimestampType

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets import range_inputs
from dws_dagster.assets.bindings import Binding, metadata_value
from dws_dagster.assets.materialization import STEP_KIND, lineage_metadata
from dws_dagster.assets.output_metadata import (
    describe_lineage,
    input_schemas,
    table_metadata,
    writing_assets,
)
from dws_dagster.assets.partitions import partition_key_ref
from dws_dagster.assets.replaced_versions import keep_location, prune_local_kept
from dws_dagster.assets.step_reads import StepReads
from dws_dagster.errors import DwsError, PartitionRangeError, RangeWriteError
from dws_dagster.spark import key_index, row_files, window_index
from dws_dagster.spark.connect.read_paths import connect_read_paths
from dws_dagster.spark.range_write import RangeTarget, write_range_atomic
from dws_dagster.spark.sql_quoting import quoted_name
from dws_dagster.workspace.definition import Workspace
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

#: The asset metadata naming the column that holds each row's partition (Dagster's name).
PARTITION_EXPR = "partition_expr"


def partition_column(metadata: Mapping[str, Any] | None, df: DataFrame, asset: str, n: int) -> str:
    """The column `partition_expr` names, checked against the DataFrame."""
    column = metadata_value((metadata or {}).get(PARTITION_EXPR))
    if not isinstance(column, str) or not column:
        raise PartitionRangeError(
            f"asset '{asset}' materializes {n} partitions in one step, but has no "
            f"'{PARTITION_EXPR}' metadata naming the column that holds each row's partition: "
            f"add metadata={{'{PARTITION_EXPR}': 'COLUMN', **dws_ref(...)}}, or give the asset "
            "BackfillPolicy.multi_run(1) (one partition per run); nothing was written"
        )
    if column not in df.columns:
        raise PartitionRangeError(
            f"asset '{asset}': {PARTITION_EXPR} names column '{column}', which the DataFrame "
            f"does not have (columns: {', '.join(df.columns)}); nothing was written"
        )
    return column


def partition_index(
    partitions_def: Any, partition_keys: Sequence[str], column: str, df: DataFrame, asset: str
) -> Column:
    """Each row's position in `partition_keys` (null: none of them), from `column`."""
    kind = df.schema[column].dataType
    if isinstance(partitions_def, MultiPartitionsDefinition):
        raise PartitionRangeError(
            f"asset '{asset}': a range of multi-dimensional partitions is not written in one "
            "step; give the asset BackfillPolicy.multi_run(1); nothing was written"
        )
    if isinstance(partitions_def, TimeWindowPartitionsDefinition) and not isinstance(
        kind, StringType
    ):
        windows = [partitions_def.time_window_for_partition_key(k) for k in partition_keys]
        bounds: list[tuple[object, object]]
        if isinstance(kind, DateType):
            column_kind: window_index.Kind = "date"
            bounds = [(w.start.date(), w.end.date()) for w in windows]
        elif isinstance(kind, TimestampType):
            column_kind = "timestamp"
            bounds = [(w.start, w.end) for w in windows]
        elif isinstance(kind, TimestampNTZType):
            column_kind = "timestamp_ntz"
            bounds = [(w.start.replace(tzinfo=None), w.end.replace(tzinfo=None)) for w in windows]
        else:
            raise PartitionRangeError(
                f"asset '{asset}': {PARTITION_EXPR} column '{column}' is {kind.simpleString()}; "
                "a time-window partition's column must be a date, a timestamp or the "
                "partition key as a string; nothing was written"
            )
        # SQL text: one call into Spark, where Column objects take one per operation.
        return F.expr(window_index.window_index_sql(quoted_name(column), column_kind, bounds))
    if not isinstance(kind, StringType):
        raise PartitionRangeError(
            f"asset '{asset}': {PARTITION_EXPR} column '{column}' is {kind.simpleString()}; "
            "it must hold the partition key as a string; nothing was written"
        )
    return F.expr(key_index.key_index_sql(quoted_name(column), partition_keys))


def other_partitions(context: OutputContext, reads: StepReads, partition: str) -> set[str]:
    """The refs of upstream partitions loaded by the step that `partition` does not read: of
    each upstream asset loaded by partitions, those its partition mapping does not give it."""
    graph = dagster_compat.asset_graph(context)
    dropped: set[str] = set()
    for loaded in reads.inputs.values():
        if loaded.keys is None or graph is None:
            continue
        wanted = dagster_compat.parent_partition_keys(
            graph, partition, AssetKey.from_user_string(loaded.asset), context.asset_key
        )
        if wanted is None:
            continue
        chosen = set(wanted)
        for key, (ref, _) in zip(loaded.keys, loaded.refs, strict=True):
            if key not in chosen:
                dropped.add(str(ref))
    return dropped


def _without(described: Mapping[str, Any] | None, dropped: set[str]) -> dict[str, Any] | None:
    """A column lineage description without the sources read from `dropped` refs."""
    if described is None:
        return None
    return {
        **described,
        "columns": {
            column: [s for s in sources if s.get("ref") not in dropped]
            for column, sources in described["columns"].items()
        },
        "dataset": [s for s in described["dataset"] if s.get("ref") not in dropped],
    }


def write_partition_range(
    manager: Any,
    context: OutputContext,
    df: DataFrame,
    binding: Binding,
    ws: Workspace,
    partition_keys: Sequence[str],
    reads: StepReads,
    code_version: str | None,
) -> None:
    """Write and record a range of partitions of one asset (see the module's docstring)."""
    asset = context.asset_key.to_user_string()
    what = f"asset '{asset}'"
    column = partition_column(context.definition_metadata, df, asset, len(partition_keys))
    partitions_def = context.asset_partitions_def
    index = partition_index(partitions_def, partition_keys, column, df, asset)
    refs = [partition_key_ref(binding, partitions_def, k, what) for k in partition_keys]
    locations = [ws.location(ws.check_writable(ref)) for ref in refs]
    config = dagster_compat.op_config(context)
    parameters = {
        k: sanitize_parameters({**config, "dagster/partition": k}, what=f"{what}: parameter")
        for k in partition_keys
    }
    store = ws.store
    spark = df.sparkSession
    plan = manager._plan(context, df, asset)
    from dws_dagster.assets.input_versions import step_inputs

    read_plan = plan if plan is not None else connect_read_paths(df)
    all_inputs, input_assets = step_inputs(
        ws,
        reads,
        read_plan,
        spark,
        asset,
        binding.ref,
        verify=manager.verify_inputs,
        log=context.log.warning,
    )
    dropped = {k: other_partitions(context, reads, k) for k in partition_keys}
    # What each partition may read: its upstream partitions, and all data read by path (which
    # of it each partition's rows came from is known once the range is written).
    candidates = {
        k: tuple(item for item in all_inputs if item[0] not in dropped[k]) for k in partition_keys
    }
    by_path = range_inputs.paths_read(
        ws, read_plan, [ref for ref, _ in all_inputs if ref not in input_assets]
    )
    # One-writer and one-version rules, partition by partition as one run each would check
    # them, all before anything is written.
    checks = store.begin_steps(
        asset, [(ref, candidates[k]) for k, ref in zip(partition_keys, refs, strict=True)]
    )
    checked = {k: check.provenance for k, check in zip(partition_keys, checks, strict=True)}
    inputs, provenance = dict(candidates), dict(checked)
    commit = git_commit(ws.root)
    steps = {
        k: StepInfo(
            name=asset,
            kind=STEP_KIND,
            run_id=context.run_id,
            partition=k,
            code_version=code_version,
            git_commit=commit,
        )
        for k in partition_keys
    }
    direct, described_all = (
        describe_lineage(plan, ws, input_assets) if plan is not None else (None, None)
    )
    described = {k: _without(described_all, dropped[k]) for k in partition_keys}
    ref_of = dict(zip(partition_keys, refs, strict=True))
    built: dict[str, LineageRecord] = {}
    attribution: range_inputs.Attribution | None = None
    unread: dict[str, set[str]] = {k: set() for k in partition_keys}
    untraceable = row_files.untraceable(df) if by_path else None
    if by_path and untraceable is not None:
        attribution = range_inputs.everywhere(
            partition_keys, by_path, f"which file each row came from is unknown: {untraceable}"
        )

    def attribute(files: Mapping[str, frozenset[str]]) -> None:
        """Each partition's inputs read by path, from the files its rows came from."""
        nonlocal attribution
        attribution = range_inputs.by_rows(partition_keys, by_path, files)
        for k, ref in zip(partition_keys, refs, strict=True):
            unread[k] = {r for r in by_path if r not in attribution.refs(k)}
            if not unread[k]:
                continue
            inputs[k] = tuple(item for item in candidates[k] if item[0] not in unread[k])
            provenance[k] = store.check_inputs(asset, inputs[k], outputs=[ref]).provenance
            described[k] = _without(described[k], unread[k])

    def lineage(key: str, version: str, rows: int) -> dict[str, Any]:
        ref = ref_of[key]
        built[key] = LineageRecord(
            ref=str(ref),
            version=version,
            step=steps[key],
            parameters=parameters[key],
            inputs=inputs[key],
            provenance={**provenance[key], str(ref): version},
            start_time=reads.started,
            end_time=now_iso(),
            extra={
                "format": binding.format,
                "rows": rows,
                **({} if described[key] is None else {COLUMN_LINEAGE_KEY: described[key]}),
            },
        )
        return built[key].to_json()

    targets = [
        RangeTarget(
            key=k,
            location=location,
            keep_old_as=keep_location(ws, ref, location, spark, manager.keep_versions),
        )
        for k, ref, location in zip(partition_keys, refs, locations, strict=True)
    ]
    try:
        result = write_range_atomic(
            df,
            targets,
            index,
            staging_parent=ws.location(binding.ref),
            fmt=binding.format,
            options=binding.write_options,
            partition_by=binding.partition_by,
            what=f"{what} ({binding.ref}, {len(partition_keys)} partitions)",
            lineage=lineage,
            versioning=binding.versioning or manager.versioning,
            read_files=attribute if by_path and untraceable is None else None,
        )
        written = result.results
        failure: BaseException | None = None
    except RangeWriteError as exc:
        written, failure = exc.written, exc
    except Exception as exc:
        written, failure = {}, exc
    good = [built[k] for k in partition_keys if k in written]
    if good:
        store.commit(good)
        for k in written:
            prune_local_kept(ws, ref_of[k], manager.keep_versions)
    if failure is not None:
        _record_failures(
            ws,
            failure,
            partition_keys,
            written,
            ref_of,
            steps,
            parameters,
            candidates,
            checked,
            reads,
            config,
            asset,
        )
        raise failure
    note = range_inputs.summary(asset, partition_keys, attribution) if attribution else None
    if note is not None:
        context.log.warning(note)
    # Worked out once for the range: the same for every partition but for what it did not read.
    schemas = input_schemas(plan, ws) if plan is not None else {}
    writers = writing_assets(ws, described_all) if described_all is not None else {}
    for k in partition_keys:
        record = built[k]
        metadata = lineage_metadata(
            record, fmt=binding.format, input_assets=input_assets, workspace=ws.name
        )
        metadata.update(
            table_metadata(
                df,
                written[k],
                plan,
                direct,
                described[k],
                ws,
                schemas={r: c for r, c in schemas.items() if r not in unread[k]},
                writers=writers,
            )
        )
        if attribution is not None:
            metadata[keys.INPUTS_BY_PATH] = MetadataValue.json(attribution.describe(k))
        metadata[keys.REF_ROOT] = MetadataValue.text(str(binding.ref))
        if ws.replay_of is not None:
            metadata[keys.REPLAY_OF] = MetadataValue.text(ws.replay_of["snapshot"])
        dagster_compat.add_partition_metadata(context, k, metadata)


def _record_failures(
    ws: Workspace,
    failure: BaseException,
    partition_keys: Sequence[str],
    written: Mapping[str, Any],
    ref_of: Mapping[str, ResourceRef],
    steps: Mapping[str, StepInfo],
    parameters: Mapping[str, Mapping[str, Any]],
    inputs: Mapping[str, tuple[tuple[str, str], ...]],
    provenance: Mapping[str, Mapping[str, str]],
    reads: StepReads,
    config: Mapping[str, Any],
    asset: str,
) -> None:
    """A failed attempt for each partition that keeps its previous data."""
    error = redact_text(f"{type(failure).__name__}: {failure}", secret_values(config))
    try:
        ws.store.fail(
            [
                LineageRecord(
                    ref=str(ref_of[k]),
                    version=None,
                    status="failed",
                    step=steps[k],
                    parameters=parameters[k],
                    inputs=inputs[k],
                    provenance=provenance[k],
                    start_time=reads.started,
                    end_time=now_iso(),
                    error=error,
                )
                for k in partition_keys
                if k not in written
            ]
        )
    except (OSError, DwsError) as unrecorded:
        failure.add_note(
            f"asset '{asset}': the failed attempts could not be recorded in the lineage store "
            f"either: {redact_text(str(unrecorded))}"
        )
