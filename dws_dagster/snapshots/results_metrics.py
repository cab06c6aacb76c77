"""The metrics a snapshot shows, from the lineage or from a `results.json` the user wrote.

A results step that records its metrics through the lineage (`ResultsLineage.write_results`,
or the IO manager's results metadata) has them in its record. Code ported from Data
Workspaces, or any script, may instead write `results.json` itself; its metrics are what a
person comparing snapshots wants to see, so a snapshot reads them from there. The file is the
user's output, read as untrusted input: a file that cannot be read as metrics is named in a
warning and the snapshot goes on without them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from dws_dagster.errors import DwsError
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import sanitize_parameters
from dws_dagster.workspace.refs import as_ref
from dws_dagster.workspace.versions import RESULTS_FILE

#: A larger `results.json` is not a metrics file (metrics are limited to a few kilobytes).
MAX_RESULTS_FILE_BYTES = 1 << 20
#: The fields Data Workspaces' `write_results` puts beside its `metrics`: not metrics.
_DESCRIPTION_FIELDS = frozenset(
    {"step", "start_time", "execution_time_seconds", "parameters", "run_description", "format"}
)


def snapshot_metrics(
    ws: Workspace,
    results_refs: Sequence[str],
    records: Mapping[str, dict[str, Any] | None],
    warnings: list[str],
) -> dict[str, Any] | None:
    """The metrics of the first results ref (in the resources' order) that has any: those its
    record holds, else those of a `results.json` in its folder. Problems go to `warnings`."""
    for ref in results_refs:
        metrics = (records.get(ref) or {}).get("metrics")
        if metrics is not None:
            return dict(metrics)
    for ref in results_refs:
        found = user_results_metrics(ws, ref, warnings)
        if found:
            return found
    return None


def user_results_metrics(ws: Workspace, ref: str, warnings: list[str]) -> dict[str, Any] | None:
    """Metrics from `results.json` in the folder of results ref `ref` (a local resource): its
    `metrics` object when it has one (Data Workspaces' layout), else its top-level numbers,
    booleans and texts. None when there is no such file or it holds no metrics."""
    parsed = as_ref(ref)
    if not ws.resource(parsed.name).is_local:
        return None
    path = ws.local_path(parsed) / RESULTS_FILE
    try:
        # Not followed out of the results folder: a link could expose any file's content in
        # the snapshot's index.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None  # the results ref is a file, not a folder
    except OSError as exc:
        warnings.append(
            f"results ref {ref}: {path} cannot be read ({exc.strerror or exc}) "
            "or is a symbolic link; its metrics are not shown"
        )
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None  # a folder or a pipe named results.json: not the user's results file
        if info.st_size > MAX_RESULTS_FILE_BYTES:
            warnings.append(
                f"results ref {ref}: {path} is {info.st_size} bytes, more than a "
                f"metrics file holds ({MAX_RESULTS_FILE_BYTES}); its metrics are "
                "not shown"
            )
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = orjson.loads(handle.read(MAX_RESULTS_FILE_BYTES + 1))
    except orjson.JSONDecodeError as exc:
        warnings.append(
            f"results ref {ref}: {path} is not valid JSON ({exc}); its metrics are not shown"
        )
        return None
    except OSError as exc:
        warnings.append(
            f"results ref {ref}: {path} cannot be read ({exc.strerror or exc}); "
            "its metrics are not shown"
        )
        return None
    finally:
        os.close(fd)
    return _metrics_in(data, ref, path, warnings)


def _metrics_in(
    data: Any, ref: str, path: os.PathLike[str] | str, warnings: list[str]
) -> dict[str, Any] | None:
    if not isinstance(data, dict):
        warnings.append(
            f"results ref {ref}: {path} is not a JSON object; its metrics are not shown"
        )
        return None
    if "metrics" in data:
        chosen = data["metrics"]
        if not isinstance(chosen, dict):
            warnings.append(
                f"results ref {ref}: 'metrics' in {path} is not an object; its "
                "metrics are not shown"
            )
            return None
    else:
        chosen = {
            name: value
            for name, value in data.items()
            if name not in _DESCRIPTION_FIELDS and isinstance(value, bool | int | float | str)
        }
    try:
        return sanitize_parameters(chosen, what="metric") or None
    except DwsError as exc:
        warnings.append(f"results ref {ref}: {path}: {exc}; its metrics are not shown")
        return None
