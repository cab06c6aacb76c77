"""`LineageBuilder`: a step's name, parameters, inputs and outputs declared in a chain, as
`dataworkspaces.lineage` declares them, then evaluated into the `Lineage` that checks and
records the step (`steps`)."""

from __future__ import annotations

import contextlib
import os
import sys
from argparse import Namespace
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dws_dagster.errors import LineageApiError
from dws_dagster.lineage_api.steps import Lineage, ResultsLineage, infer_step_name
from dws_dagster.replay.env import replay_workspace
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import (
    as_parameters,
)
from dws_dagster.workspace.redaction import (
    get_logger,
)
from dws_dagster.workspace.refs import ResourceRef, as_ref

log = get_logger("dws_dagster.lineage")

PathOrRef = str | os.PathLike[str] | ResourceRef


class LineageBuilder:
    """Declare a step's name, parameters, inputs and outputs, then `eval()` a Lineage.

    Every configuration method returns the builder, so calls chain.

    Examples:
        .. code-block:: python

            from dws_dagster.lineage import LineageBuilder  # was: from dataworkspaces.lineage

            builder = (
                LineageBuilder()
                .as_script_step()  # the step is the running script: its name, command line, code
                .with_parameters({"gamma": 0.01})
                .with_input_path("data/intermediate/clean")
                .as_results_step("results/experiment-1", run_description="baseline")
            )
            with builder.eval() as lineage:  # inputs versioned and checked here
                accuracy = 0.93  # your work
                lineage.write_results({"accuracy": accuracy})  # results/experiment-1/results.json

        From a notebook, name the step and its outputs by ref:

        .. code-block:: python

            builder = (
                LineageBuilder()
                .with_step_name("explore")
                .with_parameters({})
                .with_input_ref("source-data/trips")
                .with_output_ref("intermediate-data/explored")
            )
    """

    def __init__(self) -> None:
        self.step_name: str | None = None
        self.command_line: list[str] | None = None
        self.current_directory: str | None = None
        self.parameters: dict[str, Any] | None = None
        self.inputs: list[PathOrRef] | None = None
        self.no_inputs = False
        self.outputs: list[PathOrRef] = []
        self.code: list[PathOrRef] = []
        self.workspace_dir: str | None = None
        self.results_dir: str | None = None
        self.run_description: str | None = None
        self.run_id: str | None = None
        self.script_path: Path | None = None

    def as_script_step(self) -> LineageBuilder:
        """Name the step after the running script and record its command line and code."""
        self._set_step_name(infer_step_name())
        self.command_line = [sys.executable, *sys.argv]
        self.current_directory = os.getcwd()
        script = Path(sys.argv[0]).absolute()
        if script.is_file():
            self.script_path = script
        return self

    def with_step_name(self, step_name: str) -> LineageBuilder:
        self._set_step_name(step_name)
        return self

    def _set_step_name(self, step_name: str) -> None:
        if self.step_name is not None:
            raise LineageApiError(
                f"the step name is already set to {self.step_name!r}; set it once"
            )
        self.step_name = step_name

    def with_parameters(self, parameters: Mapping[str, Any] | Namespace) -> LineageBuilder:
        """The step's parameters: a dict of name -> value, or the `argparse.Namespace` of a
        script's parsed arguments (its `vars()`)."""
        if self.parameters is not None:
            raise LineageApiError("parameters are already set; call with_parameters once")
        self.parameters = dict(as_parameters(parameters))
        return self

    def _add_inputs(self, items: Iterable[PathOrRef]) -> LineageBuilder:
        if self.no_inputs:
            raise LineageApiError(
                "with_no_inputs() was called; a step cannot have both inputs and no inputs"
            )
        self.inputs = [*(self.inputs or []), *items]
        return self

    def with_input_path(self, path: str | os.PathLike[str]) -> LineageBuilder:
        return self._add_inputs([path])

    def with_input_paths(self, paths: Iterable[str | os.PathLike[str]]) -> LineageBuilder:
        return self._add_inputs(list(paths))

    def with_input_ref(self, ref: ResourceRef | str) -> LineageBuilder:
        return self._add_inputs([as_ref(ref)])

    def with_input_refs(self, refs: Iterable[ResourceRef | str]) -> LineageBuilder:
        return self._add_inputs([as_ref(ref) for ref in refs])

    def with_no_inputs(self) -> LineageBuilder:
        if self.inputs is not None:
            raise LineageApiError(
                "inputs were already given; a step cannot have both inputs and no inputs"
            )
        self.no_inputs = True
        return self

    def with_output_path(self, path: str | os.PathLike[str]) -> LineageBuilder:
        """Declare an output up front, so a conflict is refused before any work."""
        self.outputs.append(path)
        return self

    def with_output_ref(self, ref: ResourceRef | str) -> LineageBuilder:
        self.outputs.append(as_ref(ref))
        return self

    def with_code_path(self, path: str | os.PathLike[str]) -> LineageBuilder:
        """Record the version of code (a file or folder inside a resource) the step runs."""
        self.code.append(path)
        return self

    def with_code_ref(self, ref: ResourceRef | str) -> LineageBuilder:
        self.code.append(as_ref(ref))
        return self

    def with_workspace_directory(self, workspace_dir: str | os.PathLike[str]) -> LineageBuilder:
        self.workspace_dir = str(Workspace.find_root(workspace_dir))
        return self

    def with_run_id(self, run_id: str) -> LineageBuilder:
        """Tie the step's records to an orchestrator run."""
        self.run_id = run_id
        return self

    def as_results_step(
        self, results_dir: str | os.PathLike[str], run_description: str | None = None
    ) -> LineageBuilder:
        if self.results_dir is not None:
            raise LineageApiError("the results directory is already set; set it once")
        self.results_dir = os.fspath(results_dir)
        self.run_description = run_description
        return self

    def eval(self) -> Lineage:
        """Check the configuration and start the step's Lineage (inputs are checked now)."""
        missing = [
            what
            for what, value in (
                ("a step name (as_script_step() or with_step_name())", self.step_name),
                ("parameters (with_parameters())", self.parameters),
            )
            if value is None
        ]
        if not self.no_inputs and self.inputs is None:
            missing.append("inputs (with_input_path(), with_input_ref() or with_no_inputs())")
        if missing:
            raise LineageApiError(f"LineageBuilder needs {' and '.join(missing)} before eval()")
        assert self.step_name is not None
        assert self.parameters is not None
        code = list(self.code)
        script = self.script_path
        workspace_dir = self.workspace_dir or self.current_directory or os.getcwd()
        if script is not None and not code:
            ws = replay_workspace(Workspace.open(workspace_dir), f"step '{self.step_name}'")
            with contextlib.suppress(Exception):
                code.append(ws.ref_for_path(script))
        common: dict[str, Any] = {"code": code, "outputs": self.outputs, "run_id": self.run_id}
        if self.results_dir is not None:
            return ResultsLineage(
                self.step_name,
                None,
                self.parameters,
                self.inputs or [],
                self.results_dir,
                workspace_dir,
                self.run_description,
                self.command_line,
                self.current_directory,
                **common,
            )
        return Lineage(
            self.step_name,
            None,
            self.parameters,
            self.inputs or [],
            workspace_dir,
            self.command_line,
            self.current_directory,
            **common,
        )
