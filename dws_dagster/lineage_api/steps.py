"""The Data Workspaces lineage API for scripts and notebooks: `Lineage` and `ResultsLineage`,
the steps a `LineageBuilder` (`builder`) evaluates into.

Same names and behaviour as `dataworkspaces.lineage`, so existing code runs by changing its
import, writing to the same store that Dagster assets write to. Checks happen before the step's
work: inputs are versioned and checked for mixed versions (the one-version rule) and unknown
state when they are declared, outputs are claimed against other steps (the one-writer rule)
when they are declared.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from dws_dagster.errors import DataNotFoundError, InvalidParameterError, LineageApiError
from dws_dagster.replay.env import in_scratch, replay_workspace
from dws_dagster.snapshots.results_metrics import RESULTS_FILE
from dws_dagster.store.lineage_store import LineageStore
from dws_dagster.workspace.definition import RemoteDataError, Workspace
from dws_dagster.workspace.files import atomic_write_bytes
from dws_dagster.workspace.gitinfo import git_commit
from dws_dagster.workspace.records import (
    LineageRecord,
    StepInfo,
    as_parameters,
    now_iso,
    sanitize_parameters,
)
from dws_dagster.workspace.redaction import (
    get_logger,
    redact_command_line,
    redact_text,
    secret_values,
)
from dws_dagster.workspace.refs import ResourceRef, as_ref
from dws_dagster.workspace.versions import RUN_TIMING_KEYS, VERSION_LEAVES_OUT

log = get_logger("dws_dagster.lineage")

PathOrRef = str | os.PathLike[str] | ResourceRef


def kept_store(workspace: Workspace) -> LineageStore:
    """The lineage store of `workspace`: every read goes to the database, so a store object
    holds nothing that could go stale, and a step needs no store kept from an earlier one."""
    return workspace.store


def infer_step_name() -> str:
    """The running script's file name without its extension.

    Examples:
        .. code-block:: python

            # train.py, run as `python train.py`
            from dws_dagster.lineage import infer_step_name

            assert infer_step_name() == "train"  # the step LineageBuilder().as_script_step() names
    """
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    name = Path(argv0).stem
    if not name or name in ("-c", "ipykernel_launcher", "__main__"):
        raise LineageApiError(
            "cannot infer a step name here (not running a script); use "
            "LineageBuilder().with_step_name('NAME')"
        )
    return name


class Lineage(contextlib.AbstractContextManager["Lineage"]):
    """Tracks one execution of a step; use as a context manager (see LineageBuilder).

    On leaving the `with` block normally the outputs are recorded (`complete()`); on an
    exception the attempt is recorded as failed (`abort()`) and the exception propagates.

    Examples:
        .. code-block:: python

            from pathlib import Path

            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("clean")
                .with_parameters({"min_trips": 10})
                .with_input_ref("source-data/trips")
            )
            with builder.eval() as lineage:  # a Lineage: the inputs are versioned and checked now
                out = Path("data/intermediate/clean")
                lineage.add_output_path(out)  # claimed now: a ref another step writes is refused
                out.mkdir(parents=True, exist_ok=True)
                (out / "part-0.json").write_text('{"zone": 1, "trips": 12}')
            # Leaving the block recorded the output's version; an exception would have recorded a
            # failed attempt instead, and propagated.
    """

    def __init__(
        self,
        step_name: str,
        start_time: dt.datetime | None,
        parameters: Mapping[str, Any],
        inputs: Iterable[PathOrRef],
        workspace_dir: str | os.PathLike[str] | None,
        command_line: list[str] | None = None,
        current_directory: str | os.PathLike[str] | None = None,
        *,
        code: Iterable[PathOrRef] = (),
        outputs: Iterable[PathOrRef] = (),
        run_id: str | None = None,
    ) -> None:
        if not isinstance(step_name, str) or not step_name.strip():
            raise LineageApiError(f"step name must be a non-empty string, got {step_name!r}")
        self.step_name = step_name.strip()
        # In a replay, the workspace replayed is never written: its scratch workspace instead.
        self.workspace = replay_workspace(Workspace.open(workspace_dir), f"step '{self.step_name}'")
        self.store = kept_store(self.workspace)
        self.current_directory = self._here(Path(current_directory or os.getcwd()))
        self.start_time = start_time or dt.datetime.now(dt.UTC)
        if self.start_time.tzinfo is None:
            self.start_time = self.start_time.astimezone()
        self.parameters = sanitize_parameters(parameters)
        #: values of credential parameters and flags: removed from this step's error texts
        self._secrets = secret_values(as_parameters(parameters))
        self.command_line = tuple(
            redact_command_line(command_line or (), self._secrets, found=self._secrets)
        )
        self.run_id = run_id
        self.in_progress = True
        self.metrics: dict[str, Any] | None = None
        self._inputs: dict[ResourceRef, str] = {}
        self._outputs: list[ResourceRef] = []
        self._provenance: dict[str, str] = {}
        self._code = tuple(
            (str(ref), self._version_of(ref, role="code"))
            for ref in (self._resolve(item) for item in code)
        )
        declared = [self._resolve(item) for item in outputs]
        self._begin(inputs=[self._resolve(item) for item in inputs], outputs=declared)

    # ------------------------------------------------------------------ helpers

    def _resolve(self, item: PathOrRef) -> ResourceRef:
        if isinstance(item, str | os.PathLike) and not isinstance(item, ResourceRef):
            path = Path(item)
            if not path.is_absolute():
                path = self.current_directory / path
            return self.workspace.ref_for_path(self._here(path))
        return self.workspace.check_ref(as_ref(item))

    def _here(self, path: Path) -> Path:
        """`path` as this step's workspace has it: in a replay's scratch workspace, a path into
        the workspace replayed is the same path in the scratch one."""
        return path if self.workspace.replay_of is None else in_scratch(path, self.workspace)

    def _version_of(self, ref: ResourceRef, *, role: str) -> str:
        resource = self.workspace.resource(ref.name)
        if not resource.is_local:
            state = self.store.get(ref)
            if state is None or state.version is None:
                raise DataNotFoundError(
                    f"{role} ref {ref} is in remote resource '{ref.name}' and has no recorded "
                    "version; materialize it through the Spark IO manager first"
                )
            return state.version
        try:
            return self.workspace.version_of(ref)
        except DataNotFoundError as exc:
            raise DataNotFoundError(f"step '{self.step_name}': {role} {exc}") from None

    def _begin(
        self, *, inputs: Sequence[ResourceRef] = (), outputs: Sequence[ResourceRef] = ()
    ) -> None:
        """Check new outputs and inputs, then claim and observe them: all or nothing.

        Each output must be writable (no symlink out of its resource), each input must have
        data to version; the store then checks them against the lineage (other steps' refs,
        unknown inputs, mixed versions) and claims the outputs and observes the source inputs
        in one append under its lock. A refusal for any one of them raises before anything is
        written, so a refused step leaves no claim to block the steps that write its other
        outputs.
        """
        claims: list[ResourceRef] = []
        for ref in outputs:
            resolved = self.workspace.check_writable(ref)
            if any(out.covers_or_equals(resolved) for out in [*self._outputs, *claims]):
                continue
            claims = [out for out in claims if not resolved.covers_or_equals(out)] + [resolved]
        read = {ref: self._version_of(ref, role="input") for ref in inputs}
        candidate = {**self._inputs, **read}
        check = self.store.begin_step(
            self.step_name,
            claims=claims,
            inputs=list(candidate.items()) if read else (),
            observe=list(read.items()),
            outputs=self._outputs,
        )
        for message in check.warnings:
            warnings.warn(f"step '{self.step_name}': {message}", stacklevel=3)
        if read:
            self._inputs, self._provenance = candidate, check.provenance
        self._outputs = [
            out for out in self._outputs if not any(ref.covers_or_equals(out) for ref in claims)
        ] + claims

    def _check_open(self, action: str) -> None:
        if not self.in_progress:
            raise LineageApiError(
                f"step '{self.step_name}': cannot {action} after complete() or abort()"
            )

    # --------------------------------------------------------------- public API

    def add_input_path(self, path: str | os.PathLike[str]) -> None:
        """Resolve a local path to its ref and add it as an input (checked now)."""
        self._check_open("add an input")
        self._begin(inputs=[self._resolve(path)])

    def add_input_ref(self, ref: ResourceRef | str) -> None:
        """Add a ref as an input (versioned and checked now)."""
        self._check_open("add an input")
        self._begin(inputs=[self._resolve(as_ref(ref))])

    def add_output_path(self, path: str | os.PathLike[str]) -> None:
        """Resolve a local path to its ref and claim it as an output before it is written."""
        self.add_output_ref(self._resolve(path))

    def add_output_ref(self, ref: ResourceRef | str) -> None:
        """Claim a ref as an output; refused at once if another step writes it (the one-writer
        rule)."""
        self._check_open("add an output")
        self._begin(outputs=[as_ref(ref)])

    def add_param(self, name: str, value: Any) -> None:
        """Add one parameter to the step's lineage."""
        self._check_open("add a parameter")
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(
                f"step '{self.step_name}': parameter names must be non-empty strings, got {name!r}"
            )
        self.parameters = {**self.parameters, **sanitize_parameters({name: value})}
        self._secrets |= secret_values({name: value})

    @property
    def inputs(self) -> dict[ResourceRef, str]:
        """Inputs with the versions read."""
        return dict(self._inputs)

    @property
    def outputs(self) -> list[ResourceRef]:
        return list(self._outputs)

    def _step_info(self) -> StepInfo:
        return StepInfo(
            name=self.step_name,
            kind="script",
            run_id=self.run_id,
            git_commit=git_commit(self.workspace.root),
            code=self._code,
            command_line=self.command_line,
            working_folder=self._working_folder() if self.command_line else None,
        )

    def _working_folder(self) -> str | None:
        """The folder the step runs in, relative to the workspace root; None outside it."""
        try:
            inside = self.current_directory.resolve().relative_to(self.workspace.root.resolve())
        except ValueError:
            return None
        return inside.as_posix()

    def _record(
        self, ref: ResourceRef, version: str | None, status: str, *, error: str | None = None
    ) -> LineageRecord:
        return LineageRecord(
            ref=str(ref),
            version=version,
            status=status,
            step=self._step_info(),
            parameters=self.parameters,
            inputs=tuple(sorted((str(r), v) for r, v in self._inputs.items())),
            provenance={r: v for r, v in self._provenance.items() if not as_ref(r).overlaps(ref)},
            start_time=self.start_time.isoformat(timespec="microseconds"),
            end_time=now_iso(),
            metrics=self.metrics if status == "ok" else None,
            error=error,
        )

    def complete(self) -> None:
        """Record every output at the version its data has now."""
        if not self.in_progress:
            print(
                f"WARNING: Lineage.complete() called after complete() or abort() for step "
                f"'{self.step_name}'",
                file=sys.stderr,
            )
            return
        try:
            records = [
                self._record(ref, self._version_of(ref, role="output"), "ok")
                for ref in self._outputs
            ]
            self.store.commit(records)
        except BaseException as exc:
            self.abort(exc)
            raise
        self.in_progress = False

    def abort(self, error: BaseException | str | None = None) -> None:
        """Record a failed attempt; outputs whose data changed are marked unknown."""
        if not self.in_progress:
            print(
                f"WARNING: Lineage.abort() called after complete() or abort() for step "
                f"'{self.step_name}'",
                file=sys.stderr,
            )
            return
        self.in_progress = False
        message = (
            None
            if error is None
            else redact_text(
                error if isinstance(error, str) else f"{type(error).__name__}: {error}",
                self._secrets,
            )
        )
        records, unknown = [], []
        for ref in self._outputs:
            state = self.store.get(ref)
            good = state.version if state is not None else None
            now, verified = None, True
            try:
                now = self.workspace.version_of(ref)
            except DataNotFoundError:
                pass
            except RemoteDataError:  # cannot be checked from here: assume the worst
                verified = False
            if now != good or not verified:
                unknown.append(str(ref))
            records.append(self._record(ref, now, "failed", error=message))
        self.store.fail(records, unknown)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.complete()
        elif self.in_progress:
            self.abort(exc_val)


class ResultsLineage(Lineage):
    """Lineage of a results step: its results directory is an output, and `write_results`
    leaves `results.json` there (`lineage.json` is added beside it at each snapshot).

    Examples:
        .. code-block:: python

            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("evaluate")
                .with_parameters({"model": "ridge"})
                .with_input_ref("intermediate-data/clean")
                .as_results_step("results/ridge", run_description="baseline")
            )
            with builder.eval() as lineage:  # a ResultsLineage
                lineage.write_results({"mae": 1.7, "rmse": 2.4})  # results/ridge/results.json
    """

    def __init__(
        self,
        step_name: str,
        start_time: dt.datetime | None,
        parameters: Mapping[str, Any],
        inputs: Iterable[PathOrRef],
        results_dir: str | os.PathLike[str],
        workspace_dir: str | os.PathLike[str] | None,
        run_description: str | None = None,
        command_line: list[str] | None = None,
        current_directory: str | os.PathLike[str] | None = None,
        *,
        code: Iterable[PathOrRef] = (),
        outputs: Iterable[PathOrRef] = (),
        run_id: str | None = None,
    ) -> None:
        self.run_description = run_description
        base = Path(current_directory or os.getcwd())
        self.results_dir = (
            Path(results_dir) if Path(results_dir).is_absolute() else base / results_dir
        )
        super().__init__(
            step_name,
            start_time,
            parameters,
            inputs,
            workspace_dir,
            command_line,
            current_directory,
            code=code,
            outputs=[*outputs, self.results_dir],
            run_id=run_id,
        )
        self.results_dir = self._here(self.results_dir)
        self.results_ref = self.workspace.ref_for_path(self.results_dir)
        if self.workspace.resource(self.results_ref.name).role != "results":
            warnings.warn(
                f"step '{self.step_name}': results directory {self.results_dir} is "
                f"in resource '{self.results_ref.name}', whose role is not 'results'; "
                "snapshots will not archive it",
                stacklevel=3,
            )

    def write_results(self, metrics: Mapping[str, Any]) -> None:
        """Write `results.json` (step, start time, execution time, parameters, run
        description and metrics, as Data Workspaces writes it) into the results directory.
        It says that its version leaves out the start and execution times: they say when the
        step ran, not what it wrote, so a step run again (a replay) has the same version."""
        self._check_open("write results")
        clean = sanitize_parameters(metrics, what="metric")
        elapsed = (dt.datetime.now(dt.UTC) - self.start_time).total_seconds()
        data = {
            "step": self.step_name,
            "start_time": self.start_time.isoformat(),
            "execution_time_seconds": elapsed,
            "parameters": self.parameters,
            "run_description": None
            if self.run_description is None
            else redact_text(self.run_description, self._secrets),
            "metrics": clean,
            VERSION_LEAVES_OUT: list(RUN_TIMING_KEYS),
        }
        self.results_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(
            self.results_dir / RESULTS_FILE, json.dumps(data, indent=2).encode() + b"\n"
        )
        self.metrics = clean
        log.info("wrote results to %s", self.results_ref.child(RESULTS_FILE))
