"""Example project: an hourly NYC yellow-taxi ride forecast as Dagster assets over Spark
DataFrames, with Data Workspaces lineage recorded by dws_dagster.

Modules: `generator` (synthetic TLC trips and weather), `setup_workspace` (the workspace and its
landed data), `assets`, `project` (definitions, jobs, schedules and an in-process runner) and
`definitions` (the code location `workspace.yaml` loads).
"""
