"""Running a replay plan in its scratch workspace and judging, ref by ref, whether the snapshot's
results reproduced.

Steps run in dependency order, each at the code it ran (its commit checked out in the scratch
clone). How a step is run depends on its kind: script steps are run here, by their recorded
command line in their recorded folder; other kinds by a `StepRunner` the caller passes (the
Dagster layer runs assets as Dagster runs), so this module needs neither Dagster nor Spark.

A step whose output differs from the snapshot's is run a second time on the same inputs: if
the two replays disagree, the step is non-deterministic (a random seed not among its parameters,
the clock); if they agree, something it depends on changed (its environment, a library). Only
differing steps pay for the second run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dws_dagster.replay.env import REPLAY_WORKSPACE_ENV, in_scratch
from dws_dagster.replay.planning import SCRIPT, ReplayPlan, ReplayStep
from dws_dagster.replay.scratch import checkout, has_commit
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.gitinfo import git_toplevel
from dws_dagster.workspace.redaction import redact_text

REPRODUCED = "reproduced"
DIFFERS = "differs"
NON_DETERMINISTIC = "non-deterministic"
NOT_REPLAYABLE = "not replayable"
FAILED = "failed"
#: Store settings of the original workspace that must not reach a replayed step: the scratch
#: workspace has a store of its own.
_STORE_ENV = ("DWS_STORE_URL", "DWS_STORE_SCHEMA")

#: Runs one step in the scratch workspace; returns None, or why it failed. Raises
#: `StepNotReplayable` when it finds that the step cannot be run as it ran (its code changed).
StepRunner = Callable[[ReplayStep, Workspace], str | None]


class StepNotReplayable(Exception):
    """A runner found that a step cannot be run again as it ran; the message says why."""


@dataclass(frozen=True)
class RefVerdict:
    """One replayed ref: the version the snapshot recorded beside the one the replay made."""

    ref: str
    step: str
    outcome: str
    recorded: str | None
    reproduced: str | None = None
    detail: str | None = None
    #: The columns whose content differs from the recorded data's (added, removed or holding
    #: other values), where Spark could compare the two; None: not compared.
    columns: tuple[str, ...] | None = None


@dataclass
class ReplayReport:
    """Every ref the replay was asked for and every ref the steps behind them wrote."""

    plan: ReplayPlan
    scratch: Path
    verdicts: list[RefVerdict] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        return bool(self.verdicts) and all(v.outcome == REPRODUCED for v in self.verdicts)


def run_plan(
    plan: ReplayPlan,
    scratch: Workspace,
    runners: Mapping[str, StepRunner] | None = None,
    *,
    progress: Callable[[ReplayStep], None] | None = None,
) -> ReplayReport:
    """Run every step of `plan` in `scratch` (made by `prepare_scratch`) and judge its
    outputs; steps that cannot run are reported with the reason, never run otherwise."""
    chosen: dict[str, StepRunner] = {SCRIPT: run_script, **(runners or {})}
    try:
        return _run_plan(plan, scratch, chosen, progress)
    finally:
        for runner in chosen.values():
            close = getattr(runner, "close", None)
            if close is not None:
                close()  # a runner keeping a worker process stops it


def _run_plan(
    plan: ReplayPlan,
    scratch: Workspace,
    chosen: Mapping[str, StepRunner],
    progress: Callable[[ReplayStep], None] | None,
) -> ReplayReport:
    report = ReplayReport(plan, scratch.root)
    failed: dict[str, str] = {}
    clone = (scratch.replay_of or {}).get("clone")
    in_git = clone is not None and git_toplevel(Path(clone)) is not None
    for step in plan.steps:
        if progress is not None:
            progress(step)
        why = _why_not_now(step, chosen, failed, scratch, in_git)
        if why is not None:
            failed[step.key] = why
            report.verdicts += _every_output(step, NOT_REPLAYABLE, why)
            continue
        if in_git and step.git_commit is not None:
            checkout(scratch.root, step.git_commit)
        try:
            error = chosen[step.kind](step, scratch)
        except StepNotReplayable as exc:
            failed[step.key] = str(exc)
            report.verdicts += _every_output(step, NOT_REPLAYABLE, str(exc))
            continue
        if error is not None:
            failed[step.key] = f"it failed: {error}"
            report.verdicts += _every_output(step, FAILED, error)
            continue
        first = _written(scratch, step)
        if all(first[ref][0] == version for ref, version in step.outputs):
            report.verdicts += [
                RefVerdict(ref, step.key, REPRODUCED, version, version)
                for ref, version in step.outputs
            ]
            continue
        error = chosen[step.kind](step, scratch)  # again, on the same inputs
        second = _written(scratch, step) if error is None else {}
        for ref, version in step.outputs:
            made, rows = first[ref]  # the first replay is the one judged
            if made == version:
                outcome, detail = REPRODUCED, None
            elif error is None and second[ref][0] != made:
                outcome = NON_DETERMINISTIC
                detail = "two replays of the step on the same inputs wrote different data"
            else:
                outcome, detail = DIFFERS, None
            counted = _rows_said(step.rows.get(ref), rows)
            if outcome != REPRODUCED and counted:
                detail = f"{detail}; {counted}" if detail else counted
            report.verdicts.append(RefVerdict(ref, step.key, outcome, version, made, detail))
    return report


def _why_not_now(
    step: ReplayStep,
    runners: Mapping[str, StepRunner],
    failed: Mapping[str, str],
    scratch: Workspace,
    in_git: bool,
) -> str | None:
    if step.blocked is not None:
        return step.blocked
    names = sorted({ref.split("/", 1)[0] for ref, _ in step.outputs})
    gone = [name for name in names if name not in scratch.resources]
    if gone:
        return f"it writes to resource(s) {', '.join(gone)}, which the workspace no longer defines"
    remote = [name for name in names if not scratch.resources[name].is_local]
    if remote:
        # The scratch workspace shares remote resources with the original: writing there
        # would replace the original's data.
        return (
            f"it writes to remote resource(s) {', '.join(remote)}, which the scratch "
            "workspace shares with the workspace itself"
        )
    stuck = [key for key in step.after if key in failed]
    if stuck:
        return f"it reads what {', '.join(stuck)} wrote, which was not replayed"
    if step.kind not in runners:
        return (
            f"nothing to run {step.kind} steps was given to this replay (for Dagster assets: "
            "dws-dagster replay --definitions MODULE, the code location's definitions)"
        )
    if step.git_commit is not None:
        if not in_git:
            return (
                f"it ran at git commit {step.git_commit[:12]}, but the workspace is not a git "
                "repository now"
            )
        if not has_commit(scratch.root, step.git_commit):
            return f"its git commit {step.git_commit[:12]} is not in the repository"
    return None


def _rows_said(recorded: int | None, made: int | None) -> str | None:
    if recorded is None or made is None:
        return None
    if recorded == made:
        return f"the same {recorded} rows, different content"
    return f"{recorded} rows recorded, {made} reproduced"


def _every_output(step: ReplayStep, outcome: str, detail: str) -> list[RefVerdict]:
    """One verdict, the same for every output of `step` (none of them was written)."""
    return [
        RefVerdict(ref, step.key, outcome, version, detail=detail) for ref, version in step.outputs
    ]


def _written(scratch: Workspace, step: ReplayStep) -> dict[str, tuple[str | None, int | None]]:
    """What the scratch store recorded of each output: its version (None: nothing recorded)
    and its rows, where the writer counted them."""
    found: dict[str, tuple[str | None, int | None]] = {}
    for ref, _ in step.outputs:
        state = scratch.store.get(ref)
        record = (state.record if state is not None else None) or {}
        rows = (record.get("extra") or {}).get("rows")
        found[ref] = (record.get("version"), rows if isinstance(rows, int) else None)
    return found


def run_script(step: ReplayStep, scratch: Workspace) -> str | None:
    """Run a script step as it ran: its recorded command line, in its recorded folder of the
    scratch workspace, with the environment of this process but the original's store.

    The command line may name the replayed workspace or its repository by absolute paths
    (`--workspace $PWD`, `python $PWD/code/step.py`): each such path is given as the same
    path in the scratch workspace or clone, so the step runs the recorded commit's code and
    writes the scratch workspace; the lineage API, told the scratch workspace by
    `REPLAY_WORKSPACE_ENV`, opens it in place of the replayed one whatever else the step
    works out."""
    assert step.working_folder is not None  # the plan blocks steps without one
    folder = (scratch.root / step.working_folder).resolve()
    if not folder.is_relative_to(scratch.root.resolve()) or not folder.is_dir():
        return f"its folder {step.working_folder} is not a folder of the replay workspace"
    argv = [step.command_line[0], *(_in_scratch_arg(a, scratch) for a in step.command_line[1:])]
    if not Path(argv[0]).exists() and Path(argv[0]).name.startswith("python"):
        argv[0] = sys.executable  # the interpreter it ran with is gone: this one
    env = step_environment(scratch)
    env["PWD"] = str(folder)  # the shell's, which a step may read, is the workspace replayed
    return run_process(argv, folder, env, code=_code_root(scratch))


def _in_scratch_arg(arg: str, scratch: Workspace) -> str:
    """A command-line argument with a path into the replayed workspace (the whole argument,
    or the value of `--option=PATH`) made the same path in the scratch workspace."""
    option, equals, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    if not value or not os.path.isabs(value):
        return arg
    mapped = in_scratch(Path(value), scratch)
    if mapped == Path(value):
        return arg
    return f"{option}{equals}{mapped}"


def _code_root(scratch: Workspace) -> Path:
    """Where the replayed steps' own code is: the clone (or the scratch workspace)."""
    return Path((scratch.replay_of or {}).get("clone") or scratch.root)


def replay_environment() -> dict[str, str]:
    """This process's environment without the original workspace's store settings."""
    return {k: v for k, v in os.environ.items() if k not in _STORE_ENV}


def step_environment(scratch: Workspace) -> dict[str, str]:
    """The environment a replayed step runs in: this process's (`replay_environment`), with
    the scratch workspace named (`REPLAY_WORKSPACE_ENV`) and the module path leading to the
    code as the step's commit has it: the clone (or the scratch workspace) first, and each
    entry into the workspace replayed or its repository (`PYTHONPATH=$PWD`) made the same
    folder of the clone, so no module of today's checkout is imported."""
    env = replay_environment()
    env[REPLAY_WORKSPACE_ENV] = str(scratch.root)
    given = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]
    path = [str(_code_root(scratch)), *(str(in_scratch(Path(e), scratch)) for e in given)]
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def run_process(
    argv: list[str], cwd: Path, env: Mapping[str, str], *, code: Path | None = None
) -> str | None:
    """Run a replayed step's process; None, or why it failed (its own error, as
    `step_error` keeps it, with secrets redacted)."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=dict(env), capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return f"{argv[0]} could not be started: {exc.strerror or exc}"
    if done.returncode != 0:
        said = step_error(done.stderr or done.stdout, code or cwd)
        return f"exit code {done.returncode}{f': {redact_text(said)}' if said else ''}"
    return None


#: A frame line of a Python traceback.
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)')
_TRACEBACK = "Traceback (most recent call last):"


def step_error(said: str, code: Path) -> str:
    """What a failed step said, for its verdict: when it ends in a Python traceback, the
    error itself (the last exception's lines) and where the step's own code was when it
    was raised (its innermost frame under `code`, relative to it); the frames of the
    interpreter's and the installed libraries' files are dropped, as they name install
    paths and say nothing the user can act on. Otherwise its last three lines."""
    lines = [line.rstrip() for line in said.strip().splitlines()]
    starts = [number for number, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    if not starts:
        return " / ".join(line.strip() for line in lines[-3:] if line.strip())
    body = lines[starts[-1] + 1 :]
    where: tuple[str, str] | None = None
    at = 0
    while at < len(body) and (not body[at] or body[at][0].isspace()):
        frame = _FRAME.match(body[at])
        if frame is not None:
            mine = _under(Path(frame["file"]), code)
            if mine is not None:
                where = (mine, frame["line"])
        at += 1
    error = " / ".join(line.strip() for line in body[at:] if line.strip()) or "(no message)"
    return f"{error} (in {where[0]}, line {where[1]})" if where else error


def _under(file: Path, code: Path) -> str | None:
    """`file` relative to `code` when it is there, as a step's own code is."""
    if file.as_posix().startswith("<"):  # <frozen runpy>, <string>: not a file of the step
        return None
    if not file.is_absolute():
        return file.as_posix()
    for base in (code, code.resolve()):
        if file.is_relative_to(base):
            return file.relative_to(base).as_posix()
    return None
