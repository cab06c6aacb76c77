"""One tick of a code location's sensors as the Dagster daemon evaluates it, in this process.

The daemon's sensor loop (`dagster._daemon.sensor.execute_sensor_iteration`) over an in-process
code location: the sensor is evaluated, and its tick (status, cursor, skip reason) is stored in
the instance's schedule storage exactly as `dagster-daemon` stores it, and as the UI reads it.
Dagster internals, used by tests only: an upgrade that moves them fails these tests loudly.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def tick_sensors(instance: Any, python_file: Path, attribute: str = "defs") -> dict[str, Any]:
    """Evaluate every running sensor of the Definitions `attribute` of `python_file` once, as
    the daemon does; returns {sensor name: its newest stored tick}."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster._daemon.sensor import execute_sensor_iteration

    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(
            python_file=str(python_file),
            attribute=attribute,
            working_directory=str(python_file.parent),
        )
    )
    logger = logging.getLogger("tests.support.sensor_ticks")
    with (
        create_test_daemon_workspace_context(
            InProcessWorkspaceLoadTarget(origin), instance
        ) as context,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        list(
            execute_sensor_iteration(
                context, logger, threadpool_executor=None, submit_threadpool_executor=pool
            )
        )
        ticks: dict[str, Any] = {}
        request = context.create_request_context()
        for entry in request.get_code_location_entries().values():
            assert entry.code_location is not None, entry.load_error
            for repository in entry.code_location.get_repositories().values():
                for sensor in repository.get_sensors():
                    found = instance.get_ticks(
                        sensor.get_remote_origin_id(), sensor.selector_id, limit=1
                    )
                    if found:
                        ticks[sensor.name] = found[0]
        return ticks
