"""The example as a `dg` project: `dg check defs`, `dg list defs`, `dg dev` from the repository
root (`[tool.dg]` in pyproject.toml). `lineage/defs.yaml` wires the workspace, Spark, the IO
manager and the lineage sensor (`dws_dagster.WorkspaceComponent`); `pipeline.py` adds the
example's assets, jobs, schedules and executor. `example_project/definitions.py` builds the same
definitions in Python (`dg dev -w workspace.yaml`).
"""
