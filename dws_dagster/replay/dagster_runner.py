"""Replaying Dagster asset steps as Dagster runs: each recorded materialization is run again,
through the code location's own definitions, as a run on the user's Dagster instance (visible
in the UI, tagged with the snapshot), with its recorded partition and run config.

The runs execute in a worker process started in the scratch workspace: the definitions are
imported from the code as the step's commit has it (the scratch clone comes first on the
module path), and `WorkspaceResource` opens the scratch workspace (`DWS_REPLAY_WORKSPACE`), so
runs read the snapshot's data and write beside it, never into the workspace they replay. One
worker serves every step of one commit, so Spark starts once, as in a fresh run.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dws_dagster import metadata_keys as keys
from dws_dagster.replay.planning import ReplayStep
from dws_dagster.replay.run import (
    StepNotReplayable,
    step_environment,
    step_error,
)
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.redaction import redact_text


class DagsterRunner:
    """Runs Dagster asset steps for `run_plan`, in one worker process per commit: the
    definitions are imported and Spark started once for the steps a commit covers, not once
    per step. `definitions` names the code location's definitions as importable from the
    scratch workspace's root ("package.module" or "package.module:attribute", as `dg dev -m`
    or workspace.yaml's `python_module` name them)."""

    def __init__(self, definitions: str) -> None:
        self.definitions = definitions
        self._worker: subprocess.Popen[str] | None = None
        self._commit: str | None = None
        self._log = Path(os.devnull)
        self._code = Path.cwd()

    def __call__(self, step: ReplayStep, scratch: Workspace) -> str | None:
        assert scratch.replay_of is not None  # prepare_scratch marks it
        if (
            self._worker is None
            or self._commit != step.git_commit
            or self._worker.poll() is not None
        ):
            self.close()
            self._worker = self._start(scratch)
            self._commit = step.git_commit
        request = {
            "asset": step.name,
            "partition": step.partition,
            "config": step.run_config,
            "snapshot": scratch.replay_of["snapshot"],
            "code_version": step.code_version,
            # Without a commit, the code is today's: it must be the code version recorded.
            "check_code_version": step.git_commit is None,
        }
        worker = self._worker
        assert worker.stdin is not None
        assert worker.stdout is not None
        try:
            worker.stdin.write(json.dumps(request) + "\n")
            worker.stdin.flush()
            answer = worker.stdout.readline()
        except OSError:
            answer = ""
        if not answer:
            said = self._stopped()
            return f"the Dagster worker stopped{': ' + said if said else ''}"
        reply = json.loads(answer)
        if reply.get("not_replayable"):
            raise StepNotReplayable(str(reply["not_replayable"]))
        return None if reply.get("ok") else redact_text(str(reply.get("error")))

    def close(self) -> None:
        """Stop the worker (it finishes the step it runs)."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        assert worker.stdin is not None
        try:
            worker.stdin.close()
            worker.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            worker.kill()
            worker.wait()

    def _start(self, scratch: Workspace) -> subprocess.Popen[str]:
        # The code as the step's commit has it comes first: the clone's root, where the
        # repository's packages are (or the workspace's own root outside git).
        env = step_environment(scratch)
        code = (scratch.replay_of or {}).get("clone") or str(scratch.root)
        # What the runs print (Spark, Dagster's logs) goes to the scratch workspace's log.
        self._log = scratch.meta_dir / "dagster-replay.log"
        self._code = Path(code)
        with open(self._log, "a", encoding="utf-8") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "dws_dagster.replay.dagster_runner", self.definitions],
                cwd=scratch.root,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )

    def _stopped(self) -> str:
        worker = self._worker
        if worker is not None:
            worker.wait()
        self._worker = None
        try:
            said = self._log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            said = ""
        return redact_text(step_error(said, self._code))


def main(argv: Sequence[str] | None = None) -> int:
    """The worker: import the definitions, then for each request on stdin (one JSON line:
    asset, partition, config, snapshot) run that asset (partition) as a Dagster run on the
    instance and answer on stdout whether it succeeded."""
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print(
            "usage: python -m dws_dagster.replay.dagster_runner MODULE[:ATTRIBUTE]", file=sys.stderr
        )
        return 2
    from dagster import AssetKey, DagsterInstance

    sys.path.insert(0, os.getcwd())
    defs = _definitions(args[0])
    answers = sys.stdout
    sys.stdout = sys.stderr  # what the code prints must not mix with the answers
    with DagsterInstance.get() as instance:
        for line in sys.stdin:
            request = json.loads(line)
            key = AssetKey.from_user_string(request["asset"])
            changed = _code_changed(defs, key, request)
            if changed is not None:
                answers.write(json.dumps({"ok": False, "not_replayable": changed}) + "\n")
                answers.flush()
                continue
            error = _run(defs, instance, key, request)
            answers.write(json.dumps({"ok": error is None, "error": error}) + "\n")
            answers.flush()
    return 0


def _code_changed(defs: Any, key: Any, request: dict[str, Any]) -> str | None:
    """Why today's code is not the code the step ran, when no commit says which code it ran."""
    if not request.get("check_code_version"):
        return None
    recorded = request.get("code_version")
    try:
        current = defs.resolve_assets_def(key).code_versions_by_key.get(key)
    except Exception:  # not an asset of these definitions: the run reports it
        return None
    if recorded is None or current != recorded:
        return (
            f"no git commit was recorded and its code version is now {current!r}, not the "
            f"recorded {recorded!r}: the code it ran cannot be recovered"
        )
    return None


def _run(defs: Any, instance: Any, key: Any, request: dict[str, Any]) -> str | None:
    try:
        job = defs.resolve_implicit_job_def_def_for_assets([key])
        if job is None:
            return f"asset '{key.to_user_string()}' is not in the code location's definitions"
        op = defs.resolve_assets_def(key).node_def.name
        config = request.get("config") or {}
        result = job.execute_in_process(
            run_config={"ops": {op: {"config": config}}} if config else {},
            instance=instance,
            partition_key=request.get("partition"),
            asset_selection=[key],
            tags={keys.REPLAY_OF: request["snapshot"]},
            raise_on_error=False,
        )
    except Exception as exc:  # the code location's own error: reported, the worker goes on
        return f"{type(exc).__name__}: {exc}"
    if result.success:
        return None
    failures = [
        _root_cause(event.event_specific_data.error)
        for event in result.all_events
        if event.is_step_failure and event.event_specific_data is not None
    ]
    return "; ".join(failures) or "the run failed"


def _root_cause(error: Any) -> str:
    """The innermost error's message: Dagster wraps the asset's own error in its own."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    return str(getattr(error, "message", error)).strip()


def _definitions(target: str) -> Any:
    from dagster import Definitions

    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    if attribute:
        return getattr(module, attribute)
    found = [value for value in vars(module).values() if isinstance(value, Definitions)]
    if len(found) != 1:
        raise SystemExit(
            f"{module_name} holds {len(found)} Definitions; name one as {module_name}:NAME"
        )
    return found[0]


if __name__ == "__main__":
    sys.exit(main())
