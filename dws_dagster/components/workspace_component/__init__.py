"""`dws_dagster.WorkspaceComponent`: `component` (the component), `scaffolder` (the `defs.yaml`
`dg scaffold defs` writes), `model` (what the YAML may say, and its checks).

Import rule: as `dws_dagster.components`."""
