"""The example's code location: `dg dev -w workspace.yaml` from the repository root.

Loading it sets up the workspace (`$DWS_EXAMPLE_WORKSPACE`, default `example_workspace/` at the
repository root) and lands its data if they are missing, then builds and checks the definitions
(`check_definitions`: a lineage conflict stops the code location from loading).
"""

from example_project.project import build_definitions

defs = build_definitions()
