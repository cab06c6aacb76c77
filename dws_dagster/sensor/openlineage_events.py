"""The OpenLineage events a Dagster event implies, as the `ol.model` objects the outbox renders.

Each asset of a Dagster run is an OpenLineage run of its own (START when planned, COMPLETE when
materialized, FAIL or ABORT when its Dagster run ended without it), nested in the Dagster run's
own OpenLineage run, whose START comes before its assets' events and whose end after theirs.
The checks a Dagster run evaluated on an asset (a partition of it, or all of it) are one more
run, of the asset's checks job, reading the asset's dataset: its COMPLETE carries the verdicts.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from dagster import AssetKey, DagsterEventType, TableSchema

from dws_dagster import metadata_keys as keys
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.errors import DwsError
from dws_dagster.ol.model import (
    Assertion,
    AssetRunEvent,
    DatasetAbout,
    DatasetInfo,
    JobInfo,
    OutputInfo,
    PartitionInfo,
    RunInfo,
)
from dws_dagster.ol.run_events import DagsterRunEvent
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.sensor.check_verdicts import CheckVerdict
from dws_dagster.sensor.run_lookup import RunLookup
from dws_dagster.sensor.stored_events import AssetEventRecord
from dws_dagster.workspace.records import LineageRecord
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.workspace import Workspace

#: The OpenLineage event type of a Dagster run's end.
_RUN_END_STATES: dict[DagsterEventType, Literal["COMPLETE", "FAIL", "ABORT"]] = {
    DagsterEventType.RUN_SUCCESS: "COMPLETE",
    DagsterEventType.RUN_FAILURE: "FAIL",
    DagsterEventType.RUN_CANCELED: "ABORT",
}

Schema = tuple[tuple[str, str, bool], ...]


class OpenLineageEvents:
    """Collects the OpenLineage events of the events one tick applies, in the order they are
    spooled.

    What every event of a run or asset repeats (its run and job facts, the location of each
    ref, the `deps=` assets its inputs leave) is looked up once per tick (the workspace cannot
    change within one), through `functools.cache` of functions holding the tick's workspace and
    catalog but not this object: the caches go with it by reference counting, not whenever the
    cycle collector finds them (the tick keeps the collector off its older objects)."""

    def __init__(
        self,
        ws: Workspace,
        catalog: AssetCatalog,
        runs: RunLookup,
        *,
        namespace: str,
        parse_ref: Callable[[str], ResourceRef],
        skip: Callable[[str], None],
    ) -> None:
        self.ws = ws
        self.catalog = catalog
        self.runs = runs
        self.namespace = namespace
        self._parse_ref = parse_ref
        #: the OpenLineage events of the batch, in the order they are spooled
        self.events: list[AssetRunEvent | DagsterRunEvent] = []
        #: Dagster runs whose own START these events have put before their assets' events
        self._parents_started: set[str] = set()
        self._location = functools.cache(ws.location)
        self._run_info = functools.cache(functools.partial(_run_info, catalog, runs, skip))
        self._job_info = functools.cache(functools.partial(_job_info, catalog, namespace))
        self._checks_job_info = functools.cache(
            functools.partial(_checks_job_info, catalog, namespace)
        )
        self._about = functools.cache(functools.partial(_about, catalog))
        self._kept_dependencies = functools.cache(functools.partial(_kept_dependencies, catalog))

    def locate(self, ref: ResourceRef | str) -> str:
        """`Workspace.location`, once per ref and tick."""
        return self._location(str(ref))

    def run_info(self, run_id: str, key: AssetKey, partition: str | None) -> RunInfo | None:
        """The run facts of one asset's run, shared by its START and end events (None: the
        Dagster run is not in the instance, which is reported as a skipped event)."""
        return self._run_info(run_id, key, partition)

    # ------------------------------------------------------------------ assets' events

    def planned(self, event: AssetEventRecord, when: dt.datetime) -> None:
        """The START of each planned partition, with the inputs the definitions declare (or
        the asset read last time) and its output, or neither: never output-only."""
        key = event.asset_key
        for partition in event.partitions:
            run = self.run_info(event.run_id, key, partition)
            if run is None:
                continue
            output = self.catalog.ref_written_by(key, partition)
            inputs: tuple[DatasetInfo, ...] = ()
            outputs: tuple[OutputInfo, ...] = ()
            if output is not None:
                expected = self.catalog.input_refs(key, partition) or self._last_inputs(output)
                if expected:
                    inputs = self._inputs([(ref, None) for ref in expected])
                    root = self.catalog.partitioned_root(key) if partition is not None else None
                    outputs = (
                        OutputInfo(
                            dataset=self._written(output, root, partition, about=self._about(key))
                        ),
                    )
            self._child_event(
                AssetRunEvent(
                    kind="START",
                    event_time=when,
                    job=self._job_info(key),
                    run=self._without_data_deps(run, inputs),
                    inputs=inputs,
                    outputs=outputs,
                )
            )

    def materialized(
        self,
        run: RunInfo,
        event: AssetEventRecord,
        when: dt.datetime,
        record: LineageRecord | None,
    ) -> None:
        """The COMPLETE of a materialization: with what it read and wrote when it is a
        workspace asset's (`record`), else bare (its run still completes)."""
        key = event.asset_key
        if record is None:
            self._child_event(
                AssetRunEvent(kind="COMPLETE", event_time=when, job=self._job_info(key), run=run)
            )
            return
        metadata = event.metadata
        inputs = self._inputs(record.inputs, _input_schemas(metadata))
        self._child_event(
            AssetRunEvent(
                kind="COMPLETE",
                event_time=when,
                job=self._job_info(key),
                run=self._without_data_deps(run, inputs),
                inputs=inputs,
                outputs=(
                    self._output(
                        self._parse_ref(record.ref),
                        record.version,
                        metadata,
                        key,
                        event.partition,
                        metrics=tuple((record.metrics or {}).items()),
                    ),
                ),
            )
        )

    def checked(
        self, run_id: str, key: AssetKey, partition: str | None, verdicts: Sequence[CheckVerdict]
    ) -> bool:
        """The run of an asset's checks in one Dagster run, for one partition or the whole
        asset: a START, then a COMPLETE whose input (the asset's dataset, the partition in its
        subset facet) carries each check's last verdict as an assertion. False when nothing
        was emitted: no verdict, a Dagster run not in the instance, or an asset that is not a
        workspace asset (no dataset to judge)."""
        if not verdicts:
            return False
        ref = self.catalog.ref_written_by(key, partition)
        run = self.run_info(run_id, key, partition)
        if ref is None or run is None:
            return False
        root = self.catalog.partitioned_root(key) if partition is not None else None
        dataset = self._written(
            ref, root, partition, self._checked_version(ref, verdicts), about=self._about(key)
        )
        last = {verdict.name: verdict for verdict in verdicts}  # a check run twice: its last
        job = self._checks_job_info(key)
        run = replace(run, dependencies=())
        self._child_event(
            AssetRunEvent(
                kind="START",
                event_time=min(v.at for v in verdicts),
                job=job,
                run=run,
                inputs=(dataset,),
            )
        )
        judged = replace(dataset, assertions=tuple(_assertion(v) for v in last.values()))
        self._child_event(
            AssetRunEvent(
                kind="COMPLETE",
                event_time=max(v.at for v in verdicts),
                job=job,
                run=run,
                inputs=(judged,),
            )
        )
        return True

    def _checked_version(self, ref: ResourceRef, verdicts: Sequence[CheckVerdict]) -> str | None:
        """The version the checks judged: the ref's current one when a check's target was the
        materialization that wrote it; else unknown (a later run may have rewritten it)."""
        state = self.ws.store.get(ref)
        record = state.record if state is not None else None
        written_by = ((record or {}).get("step") or {}).get("run_id")
        if state is None or written_by is None:
            return None
        return state.version if any(v.target_run_id == written_by for v in verdicts) else None

    def not_materialized(
        self,
        run_id: str,
        key: AssetKey,
        partition: str | None,
        when: dt.datetime,
        *,
        failed: bool,
        message: str,
        stack: str | None,
    ) -> None:
        """The FAIL (with its error) or ABORT of an asset its ended run did not materialize."""
        run = self.run_info(run_id, key, partition)
        if run is None:
            return
        self._child_event(
            AssetRunEvent(
                kind="FAIL" if failed else "ABORT",
                event_time=when,
                job=self._job_info(key),
                run=run,
                error_message=message if failed else None,
                stack_trace=stack if failed else None,
            )
        )

    def _last_inputs(self, output: ResourceRef) -> list[str]:
        """What the asset read last time, for assets whose inputs only the Spark plan shows
        (data read by path): the best forecast of this run's inputs."""
        state = self.ws.store.get(output)
        record = state.record if state is not None else None
        return [item["ref"] for item in (record or {}).get("inputs", ())]

    # ------------------------------------------------------------------ the Dagster run

    def _child_event(self, event: AssetRunEvent) -> None:
        """An asset run's event, after its Dagster run's START. The START is put before the
        first asset event of the run each tick meets: a tick that meets the run midway
        repeats it, and the outbox, keyed by (runId, eventType), keeps the first."""
        self._parent_started_before(event.run.dagster_run_id)
        self.events.append(event)

    def _parent_started_before(self, run_id: str) -> None:
        if run_id in self._parents_started:
            return
        self._parents_started.add(run_id)
        facts = self.runs.facts(run_id)
        if facts is not None:
            # A run seen before it started (queued) is dated by its creation.
            self.events.append(
                DagsterRunEvent(
                    kind="START",
                    event_time=facts.started or facts.created,
                    namespace=self.namespace,
                    dagster_run_id=run_id,
                    dagster_job=facts.job,
                    dagster_version=_dagster_version(),
                    tags=facts.launch_tags,
                )
            )

    def run_ended(
        self, run_id: str, kind: DagsterEventType, error: str | None, when: dt.datetime
    ) -> None:
        """The Dagster run's own end, after its assets' ends; dated by the run's end event,
        whose time Dagster stores as the run's end time."""
        facts = self.runs.facts(run_id)
        if facts is None:
            return
        self._parent_started_before(run_id)
        state = _RUN_END_STATES[kind]
        self.events.append(
            DagsterRunEvent(
                kind=state,
                event_time=when,
                namespace=self.namespace,
                dagster_run_id=run_id,
                dagster_job=facts.job,
                dagster_version=_dagster_version(),
                error_message=(error or f"run {run_id} failed") if state == "FAIL" else None,
                tags=facts.launch_tags,
            )
        )

    # ------------------------------------------------------------------ datasets

    def _written(
        self,
        ref: ResourceRef,
        root: ResourceRef | None,
        partition: str | None,
        version: str | None = None,
        *,
        about: DatasetAbout | None = None,
    ) -> DatasetInfo:
        """An output: a partition is named by its asset's root, the partition in the subset
        facet (one OpenLineage run writes one partition, so the version is that partition's)."""
        if root is None or partition is None or not root.covers(ref):  # strictly inside
            return DatasetInfo(
                location=self.locate(ref), ref=str(ref), version=version, about=about
            )
        subpath = "/".join(ref.parts[len(root.parts) :])
        return DatasetInfo(
            location=self.locate(root),
            ref=str(root),
            partitions=(PartitionInfo(identifier=partition, subpath=subpath, version=version),),
            about=about,
        )

    def _about_ref(self, ref: ResourceRef) -> DatasetAbout | None:
        """What describes the data `ref` is in: its asset's description, owners, tags."""
        key = self.catalog.asset_bound_to(ref)
        return self._about(key) if key is not None else None

    def _inputs(
        self, items: Any, schemas: Mapping[str, Schema] | None = None
    ) -> tuple[DatasetInfo, ...]:
        """Inputs (ref, version) as datasets: the partitions of one partitioned asset are one
        dataset, its root, with the partitions read in the subset facet; the schema of each
        dataset is the one Spark read (its first partition's, for a partitioned one)."""
        schemas = schemas or {}
        plain: dict[str, DatasetInfo] = {}
        grouped: dict[ResourceRef, list[PartitionInfo]] = {}
        order: list[ResourceRef | str] = []
        schema_of: dict[ResourceRef, Schema] = {}
        for raw, version in items:
            ref = self._parse_ref(raw) if isinstance(raw, str) else raw
            found = self.catalog.root_of(ref)
            if found is None or found[0] == ref:
                text = str(ref)
                if text not in plain:
                    plain[text] = DatasetInfo(
                        location=self.locate(ref),
                        ref=text,
                        version=version,
                        schema=schemas.get(text, ()),
                        about=self._about_ref(ref),
                    )
                    order.append(text)
                continue
            root = found[0]
            if root not in grouped:
                grouped[root] = []
                order.append(root)
            subpath = "/".join(ref.parts[len(root.parts) :])
            grouped[root].append(
                PartitionInfo(
                    identifier=self._partition_key(ref) or subpath, subpath=subpath, version=version
                )
            )
            if root not in schema_of and schemas.get(str(ref)):
                schema_of[root] = schemas[str(ref)]
        return tuple(
            plain[item]
            if isinstance(item, str)
            else DatasetInfo(
                location=self.locate(item),
                ref=str(item),
                partitions=tuple(grouped[item]),
                schema=schema_of.get(item, ()),
                about=self._about_ref(item),
            )
            for item in order
        )

    def _partition_key(self, ref: ResourceRef) -> str | None:
        """The partition key of a partition's ref: as the definitions map it (planned
        inputs), else as the workspace recorded it (the ref's last step)."""
        found = self.catalog.partition_key_of(ref)
        if found is not None:
            return found
        state = self.ws.store.get(ref)
        step = ((state.record or {}).get("step") or {}) if state is not None else {}
        key = step.get("partition") if isinstance(step, Mapping) else None
        return key if isinstance(key, str) and key else None

    def _without_data_deps(self, run: RunInfo, inputs: tuple[DatasetInfo, ...]) -> RunInfo:
        """`jobDependencies` name the assets the run depends on without reading their data:
        a `deps=` asset whose data the run did read (by path) is an input, not a dependency."""
        if not run.dependencies or not inputs:
            return run
        read = tuple(info.ref for info in inputs if info.ref)
        kept = self._kept_dependencies(run.dependencies, read)
        return run if len(kept) == len(run.dependencies) else replace(run, dependencies=kept)

    def _output(
        self,
        ref: ResourceRef,
        version: str | None,
        metadata: Mapping[str, Any],
        key: AssetKey | None = None,
        partition: str | None = None,
        *,
        metrics: tuple[tuple[str, Any], ...] = (),
    ) -> OutputInfo:
        schema = metadata_value(metadata.get("dagster/column_schema"))
        columns: Schema = ()
        if isinstance(schema, TableSchema):
            columns = tuple((c.name, c.type, bool(c.constraints.nullable)) for c in schema.columns)
        rows = metadata_value(metadata.get("dagster/row_count"))
        size = metadata_value(metadata.get(keys.SIZE_BYTES))
        lineage = metadata_value(metadata.get(keys.COLUMN_LINEAGE))
        root = _root_from_metadata(metadata)
        if root is None and key is not None and partition is not None:
            root = self.catalog.partitioned_root(key)  # events recorded before dws/ref_root
        return OutputInfo(
            dataset=self._written(
                ref, root, partition, version, about=self._about(key) if key is not None else None
            ),
            schema=columns,
            rows=int(rows) if rows is not None else None,
            size_bytes=int(size) if size is not None else None,
            file_format=metadata_value(metadata.get(keys.FORMAT)),
            column_lineage=lineage if isinstance(lineage, Mapping) else None,
            metrics=metrics,
        )


# ---------------------------------------------------------------------- looked up once a tick


def _run_info(
    catalog: AssetCatalog,
    runs: RunLookup,
    skip: Callable[[str], None],
    run_id: str,
    key: AssetKey,
    partition: str | None,
) -> RunInfo | None:
    facts = runs.facts(run_id)
    if facts is None:
        skip(
            f"run {run_id} is not in the instance; no OpenLineage event for "
            f"'{key.to_user_string()}'"
        )
        return None
    window = catalog.nominal_window(key, partition)
    return RunInfo(
        dagster_run_id=run_id,
        dagster_job=facts.job,
        dagster_run_created=facts.created,
        partition=partition,
        nominal_start=window[0] if window else None,
        nominal_end=window[1] if window else None,
        dependencies=tuple(k.to_user_string() for k in catalog.dependencies(key)),
        dagster_version=_dagster_version(),
        spark_version=_spark_version(),
    )


def _job_info(catalog: AssetCatalog, namespace: str, key: AssetKey) -> JobInfo:
    code = catalog.code(key)
    return JobInfo(
        namespace=namespace,
        name=key.to_user_string(),
        description=catalog.description(key),
        owners=catalog.owners(key),
        source_code=code.source,
        source_path=code.path,
        git_url=code.git_url,
        git_commit=code.git_commit,
        git_branch=code.git_branch,
        code_version=catalog.code_version(key),
        git_root=code.git_root,
    )


def _about(catalog: AssetCatalog, key: AssetKey) -> DatasetAbout:
    return DatasetAbout(
        description=catalog.description(key),
        owners=catalog.owners(key),
        tags=catalog.tags(key),
        kinds=catalog.kinds(key),
    )


def _checks_job_info(catalog: AssetCatalog, namespace: str, key: AssetKey) -> JobInfo:
    asset = key.to_user_string()
    return JobInfo(
        namespace=namespace,
        name=asset,
        description=f"The Dagster asset checks of '{asset}': each run reads the asset's data "
        "(a partition of it, or all of it) and judges it; the verdicts are the "
        "dataQualityAssertions of that input.",
        owners=catalog.owners(key),
        checks=True,
    )


def _assertion(verdict: CheckVerdict) -> Assertion:
    return Assertion(
        name=verdict.name,
        success=verdict.passed,
        severity=verdict.severity.lower() or None,
        column=verdict.column,
        description=verdict.description,
    )


def _kept_dependencies(
    catalog: AssetCatalog, dependencies: tuple[str, ...], read: tuple[str, ...]
) -> tuple[str, ...]:
    """The `deps=` assets of `dependencies` whose data the run did not read (`read`: the refs
    of its inputs): every event of a run asks with the same few."""
    return tuple(name for name in dependencies if not _dependency_read(catalog, name, read))


def _dependency_read(catalog: AssetCatalog, name: str, read: tuple[str, ...]) -> bool:
    """Whether the run read the data of the `deps=` asset `name` (its ref, or one inside
    or around it: refs are normalised, so that is a prefix up to a slash)."""
    binding = catalog.binding(AssetKey.from_user_string(name))
    if binding is None:
        return False
    root = str(binding.ref)
    return any(
        ref == root or ref.startswith(root + "/") or root.startswith(ref + "/") for ref in read
    )


# ---------------------------------------------------------------------- metadata


def _root_from_metadata(metadata: Mapping[str, Any]) -> ResourceRef | None:
    raw = metadata_value(metadata.get(keys.REF_ROOT))
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return ResourceRef.parse(raw)
    except DwsError:  # untrusted metadata: the partition keeps its own identity
        return None


def _input_schemas(metadata: Mapping[str, Any]) -> dict[str, Schema]:
    """`dws/input_schemas` as the IO manager wrote it; anything malformed is left out (events
    of older versions have none: their inputs carry no schema)."""
    raw = metadata_value(metadata.get(keys.INPUT_SCHEMAS))
    if not isinstance(raw, Mapping):
        return {}
    found: dict[str, Schema] = {}
    for name, columns in raw.items():
        if not isinstance(columns, list):
            continue
        fields = tuple(
            (column[0], column[1], bool(column[2]))
            for column in columns
            if isinstance(column, list)
            and len(column) == 3
            and isinstance(column[0], str)
            and isinstance(column[1], str)
        )
        if fields:
            found[str(name)] = fields
    return found


@functools.cache
def _dagster_version() -> str | None:
    try:
        from dagster.version import __version__

        return str(__version__)
    except Exception:
        return None


@functools.cache
def _spark_version() -> str | None:
    """The installed PySpark's version, from its package metadata: the read path never
    imports pyspark (a sensor must not pay for it, nor need it installed)."""
    try:
        return importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None
