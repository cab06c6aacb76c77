"""What happens to the data a write replaces: moved aside where `keep_versions` (or, for remote
data, a snapshot) may still need it, and freed once nothing does.

Local data is retained for snapshots by the snapshot itself (copied into the object store), so
only `keep_versions` keeps it beside the ref. Remote data is retained where it lies: it always
moves aside (a rename, as the swap does anyway) and `prune_remote_kept` frees it once the write
is on record, unless a snapshot references it or `keep_versions` keeps it.
"""

from __future__ import annotations

from collections.abc import Callable

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from dws_dagster.errors import DwsError
from dws_dagster.spark import version_marker
from dws_dagster.spark.remote_data import HadoopData
from dws_dagster.store.retained import referenced_versions
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.redaction import redact_text
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.remote_versions import kept_location, kept_versions, prunable
from dws_dagster.workspace.swap import kept_version_path, prune_kept


def keep_location(
    ws: Workspace, ref: ResourceRef, location: str, spark: SparkSession, keep_versions: int
) -> str | None:
    """Where the data being replaced at `location` goes; None when it is not kept (no data
    there yet, or local data with `keep_versions` 0)."""
    resource = ws.resource(ref.name)
    if resource.is_local and keep_versions <= 0:
        return None
    marker = version_marker.read_marker(spark, location)
    if marker is None:
        return None
    if resource.is_local:
        return str(kept_version_path(ws.resource_root(resource), ref.subpath, marker["version"]))
    return kept_location(str(resource.uri), ref.subpath, marker["version"])


def prune_local_kept(ws: Workspace, ref: ResourceRef, keep_versions: int) -> None:
    """Free a local ref's kept versions beyond the newest `keep_versions`."""
    resource = ws.resource(ref.name)
    if keep_versions > 0 and resource.is_local:
        prune_kept(ws.resource_root(resource), ref.subpath, keep_versions)


def prune_remote_kept(
    ws: Workspace,
    ref: ResourceRef,
    spark: SparkSession,
    keep_versions: int,
    warn: Callable[[str], None],
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
            referenced_versions(ws.store, str(ref)).get(str(ref), ()),
            keep_versions,
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
