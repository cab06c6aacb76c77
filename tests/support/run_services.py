"""What a test run makes once and shares between its processes: the Spark Connect server, the
PostgreSQL server, the example's demo, the scaffolded `dg` project.

The suite runs in pytest-xdist workers (see `pytest_xdist_auto_num_workers` in
tests/conftest.py); each worker is a process of its own, so a session-scoped fixture alone
would start a server, or build a demo, once per worker. Here the first worker that needs a
thing makes it under a file lock in the run's folder and writes down how to reach it (a small
JSON file); the others read that. The run's folder belongs to the controller (the one pytest
process without xdist): it makes the folder before any worker starts, and at the very end,
once every worker is done, it stops the servers by their PIDs and deletes the folder. A thing
that failed to be made is written down as the failure, so that no other worker spends minutes
failing again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

#: The key under which the controller hands its run folder to each worker.
WORKER_INPUT_KEY = "dws_run_folder"
_FOLDER_ATTRIBUTE = "_dws_run_folder"


class MadeBefore(Exception):
    """Making the thing failed in the process that tried first; the message says why."""


def make_run_folder(config: pytest.Config) -> Path:
    """The controller's folder for the run (the only process when xdist is off)."""
    folder = Path(tempfile.mkdtemp(prefix="dws-test-run-"))
    setattr(config, _FOLDER_ATTRIBUTE, folder)
    return folder


def run_folder(config: pytest.Config) -> Path:
    """The run's shared folder, as this process (controller or worker) knows it."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:
        return Path(worker_input[WORKER_INPUT_KEY])
    folder = getattr(config, _FOLDER_ATTRIBUTE, None)
    if folder is None:
        raise RuntimeError("the test run's folder was not made (tests/conftest.py makes it)")
    return Path(folder)


def is_controller(config: pytest.Config) -> bool:
    return getattr(config, "workerinput", None) is None


def made_once(
    config: pytest.Config, name: str, make: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """What `make(folder)` returned when the first process of the run called it, `folder`
    being `name`'s own folder in the run's folder; raises `MadeBefore` if that call failed."""
    root = run_folder(config)
    record = root / f"{name}.json"
    with FileLock(str(root / f"{name}.lock")):
        if not record.exists():
            folder = root / name
            folder.mkdir()
            try:
                made: dict[str, Any] = {"made": make(folder)}
            except BaseException as exc:
                made = {"failed": f"{type(exc).__name__}: {exc}"}
                record.write_text(json.dumps(made), encoding="utf-8")
                raise
            record.write_text(json.dumps(made), encoding="utf-8")
            return made["made"]
        made = json.loads(record.read_text(encoding="utf-8"))
    if "failed" in made:
        raise MadeBefore(f"{name}: {made['failed']}")
    return made["made"]


def made_so_far(config: pytest.Config, name: str) -> dict[str, Any] | None:
    """What `made_once` made for `name` in this run, if anything (for the controller's
    clean-up)."""
    record = run_folder(config) / f"{name}.json"
    if not record.exists():
        return None
    made = json.loads(record.read_text(encoding="utf-8"))
    return made.get("made")


def remove_run_folder(config: pytest.Config) -> None:
    folder = getattr(config, _FOLDER_ATTRIBUTE, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
