"""The datasets of the OpenLineage events one tick builds: where each ref is, the inputs a run
read (the partitions of one partitioned asset as one dataset, its root), the output it wrote
with what its materialization's metadata says of it, and what describes each (its asset's
description, owners, tags).

A partition is named by its asset's root, the partition in the subset facet: one OpenLineage
run writes one partition, while a catalog sees one dataset per asset.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from dagster import AssetKey, TableSchema

from dws_dagster import metadata_keys as keys
from dws_dagster.assets.bindings import metadata_value
from dws_dagster.errors import DwsError
from dws_dagster.ol.model import DatasetAbout, DatasetInfo, OutputInfo, PartitionInfo
from dws_dagster.sensor.asset_catalog import AssetCatalog
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.refs import ResourceRef

Schema = tuple[tuple[str, str, bool], ...]


class EventDatasets:
    """The datasets of one tick's events. What every event repeats (the location of each ref,
    what describes each asset) is looked up once per tick, through `functools.cache` of
    functions holding the tick's workspace and catalog but not this object (see
    `OpenLineageEvents`)."""

    def __init__(
        self, ws: Workspace, catalog: AssetCatalog, parse_ref: Callable[[str], ResourceRef]
    ) -> None:
        self.ws = ws
        self.catalog = catalog
        self._parse_ref = parse_ref
        self._location = functools.cache(ws.location)
        self.about = functools.cache(functools.partial(dataset_about, catalog))

    def locate(self, ref: ResourceRef | str) -> str:
        """`Workspace.location`, once per ref and tick."""
        return self._location(str(ref))

    def written(
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

    def about_ref(self, ref: ResourceRef) -> DatasetAbout | None:
        """What describes the data `ref` is in: its asset's description, owners, tags."""
        key = self.catalog.asset_bound_to(ref)
        return self.about(key) if key is not None else None

    def inputs(
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
                        about=self.about_ref(ref),
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
                    identifier=self.partition_key(ref) or subpath, subpath=subpath, version=version
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
                about=self.about_ref(item),
            )
            for item in order
        )

    def partition_key(self, ref: ResourceRef) -> str | None:
        """The partition key of a partition's ref: as the definitions map it (planned
        inputs), else as the workspace recorded it (the ref's last step)."""
        found = self.catalog.partition_key_of(ref)
        if found is not None:
            return found
        state = self.ws.store.get(ref)
        step = ((state.record or {}).get("step") or {}) if state is not None else {}
        key = step.get("partition") if isinstance(step, Mapping) else None
        return key if isinstance(key, str) and key else None

    def output(
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
        root = root_from_metadata(metadata)
        if root is None and key is not None and partition is not None:
            root = self.catalog.partitioned_root(key)  # events recorded before dws/ref_root
        return OutputInfo(
            dataset=self.written(
                ref, root, partition, version, about=self.about(key) if key is not None else None
            ),
            schema=columns,
            rows=int(rows) if rows is not None else None,
            size_bytes=int(size) if size is not None else None,
            file_format=metadata_value(metadata.get(keys.FORMAT)),
            column_lineage=lineage if isinstance(lineage, Mapping) else None,
            metrics=metrics,
        )


def dataset_about(catalog: AssetCatalog, key: AssetKey) -> DatasetAbout:
    return DatasetAbout(
        description=catalog.description(key),
        owners=catalog.owners(key),
        tags=catalog.tags(key),
        kinds=catalog.kinds(key),
    )


def root_from_metadata(metadata: Mapping[str, Any]) -> ResourceRef | None:
    raw = metadata_value(metadata.get(keys.REF_ROOT))
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return ResourceRef.parse(raw)
    except DwsError:  # untrusted metadata: the partition keeps its own identity
        return None


def input_schemas(metadata: Mapping[str, Any]) -> dict[str, Schema]:
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
