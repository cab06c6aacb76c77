"""Dagster Components (`dg`) for dws_dagster, laid out as Dagster's own integrations lay theirs
out (`dagster_dbt.components`, `dagster_sling.components`): a folder per component with its
`component.py`, its `scaffolder.py` and what its YAML may say (`model.py`). The components are
exported by the top-level package, which the `dagster_dg_cli.registry_modules` entry point
names, so `dg list components` lists `dws_dagster.WorkspaceComponent`.

Import rule: everything dws_dagster offers Dagster users (`assets`, `sensor`, `checks`,
`workspace`), Dagster's public API, and its internals only through `_compat.dagster`.
"""
