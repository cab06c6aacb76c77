"""The example's assets, jobs, schedules and executor in the `dg` project; the resources and the
sensor come from `lineage/defs.yaml`. Loading sets up the workspace (`$DWS_EXAMPLE_WORKSPACE`,
default `example_workspace/`, the YAML's root too) and lands its data if they are missing."""

from dagster import Definitions, definitions

from example_project.project import pipeline_definitions
from example_project.setup_workspace import ensure_workspace


@definitions
def defs() -> Definitions:
    return pipeline_definitions(ensure_workspace().size)
