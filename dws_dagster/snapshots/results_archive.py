"""The results copies a snapshot keeps: each results ref copied into
`<resource>/snapshots/<name>/` with a `lineage.json` beside it.

Results are what people open, share and compare, often without dws_dagster: a copy per
snapshot, carrying the lineage that made it, stays readable on its own whatever happens to
the workspace afterwards. (The metrics a snapshot shows, from the lineage or a user's
`results.json`, are `results_metrics`'s.)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import xxhash

from dws_dagster.errors import SnapshotError
from dws_dagster.snapshots.index import INDEX_FORMAT, SnapshotInfo
from dws_dagster.store.ref_state import RefState
from dws_dagster.store.upstream import prefetch_upstream, upstream_records
from dws_dagster.workspace.data_files import is_ignored_name, special_names
from dws_dagster.workspace.definition import RESULTS_SNAPSHOT_DIR, Workspace
from dws_dagster.workspace.files import pretty_json, writing
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.swap import staging_path
from dws_dagster.workspace.trees import copy_tree, make_folders, remove_tree
from dws_dagster.workspace.versions import short


def folder_name(info: SnapshotInfo, infos: list[SnapshotInfo]) -> str:
    """The name of a new snapshot's results folder: its tag, unless an older snapshot's results
    still use that name (a tag removed from a snapshot with other tags keeps its folder), then
    its short hash."""
    taken = {entry["folder"] for other in infos for entry in other.results}
    return info.name if f"{RESULTS_SNAPSHOT_DIR}/{info.name}" not in taken else info.hash[:12]


def archive_results(
    ws: Workspace,
    info: SnapshotInfo,
    states: dict[str, RefState],
    results_refs: list[str],
    warnings: list[str],
    name: str,
) -> list[Path]:
    """Copy each results ref with its lineage.json into `<resource>/snapshots/<name>/`. The
    snapshot is the current lineage (the caller holds the store's lock), so the lineage of
    each results ref is read from the store itself. A ref not archived, and why, goes to
    `warnings`; the folders placed are returned (the caller removes them if its commit fails).
    """
    view = ws.store
    staged: dict[str, Path] = {}
    placed: list[Path] = []
    known = prefetch_upstream(view, results_refs)
    try:
        for ref in results_refs:
            parsed = as_ref(ref)
            resource = ws.resource(parsed.name)
            if not resource.is_local:
                warnings.append(f"results ref {ref} is remote; not archived")
                continue
            source = ws.local_path(parsed)
            if not source.exists():
                warnings.append(f"results ref {ref} has no data at {source}; not archived")
                continue
            if states[ref].unknown or ws.version_of(parsed) != states[ref].version:
                warnings.append(
                    f"results ref {ref}: its data is not the version its lineage records "
                    f"({short(states[ref].version)}); not archived — re-run its step"
                )
                continue
            root = ws.resource_root(resource)
            final = root / RESULTS_SNAPSHOT_DIR / name
            if final.exists():
                raise SnapshotError(f"{final} already exists; move it away or choose another tag")
            stage = staged.get(parsed.name)
            if stage is None:
                stage = staging_path(final)
                make_folders(stage)
                staged[parsed.name] = stage
            target = stage / parsed.subpath if parsed.subpath else stage
            lineage = {
                "format": INDEX_FORMAT,
                "snapshot": info.hash,
                "ref": ref,
                "version": states[ref].version,
                "records": upstream_records(view, ref, known),
            }
            # Named by where the copy goes, not by the staging folder the user never sees.
            with writing(final, action="copy results into"):
                if source.is_dir():
                    _copy_results_dir(source, target)
                    (target / "lineage.json").write_bytes(pretty_json(lineage))
                else:
                    make_folders(target.parent)
                    shutil.copy2(source, target)
                    lineage_beside(target).write_bytes(pretty_json(lineage))
            info.results.append({"ref": ref, "folder": f"{RESULTS_SNAPSHOT_DIR}/{name}"})
        for resource_name, stage in staged.items():
            final = ws.resource_root(resource_name) / RESULTS_SNAPSHOT_DIR / name
            os.replace(stage, final)
            placed.append(final)
    except BaseException:
        for stage in staged.values():
            remove_tree(stage, ignore_errors=True)
        for folder in placed:
            remove_tree(folder, ignore_errors=True)
        raise
    return placed


def lineage_beside(target: Path) -> Path:
    """Where the lineage of a single-file results copy goes: `<name>.lineage.json`, or, for a
    name within 13 bytes of the 255-byte limit, its first bytes, a 16-hex hash of the whole
    name and `.lineage.json` (255 bytes at most, so such a result is archived too)."""
    suffix = ".lineage.json"
    name = os.fsencode(target.name)
    if len(name) + len(suffix) <= 255:
        return target.with_name(target.name + suffix)
    head = name[: 255 - len(suffix) - 17].decode("utf-8", "ignore")  # whole characters
    return target.with_name(f"{head}-{xxhash.xxh3_64_hexdigest(name)}{suffix}")


def _copy_results_dir(source: Path, target: Path) -> None:
    """Copy what the results' version covers: pipes, sockets and devices are not data (a
    pipe would block the copy), the snapshot archives are not part of a snapshot."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory) == source
        skipped = special_names(directory)
        skipped.update(
            n for n in names if is_ignored_name(n) or (top and n == RESULTS_SNAPSHOT_DIR)
        )
        return skipped

    copy_tree(source, target, ignore=ignore, exists_ok=True)
