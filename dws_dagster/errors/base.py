"""The root of the hierarchy: one class to catch everything dws_dagster refuses."""

from __future__ import annotations


class DwsError(Exception):
    """Base class of every error dws_dagster raises on purpose.

    Examples:
        .. code-block:: python

            from dws_dagster import DwsError
            from dws_dagster.lineage import LineageBuilder

            builder = (
                LineageBuilder()
                .with_step_name("clean")
                .with_parameters({})
                .with_input_ref("source-data/trips")
                .with_output_ref("intermediate-data/clean")
            )
            try:
                with builder.eval():
                    pass  # the step's work
            except DwsError as exc:  # whatever dws_dagster refused
                print(f"refused: {exc}")  # names the ref, asset or file, and what to do
    """
