"""The workspace's guarantees as Dagster asset checks.

- `asset_checks`: `dws_asset_checks` (the checks of some assets) and `with_dws_checks` (of every
  asset a `SparkWorkspaceIOManager` stores, in one call): *data matches its recorded version*,
  *inputs consistent*, and *reproduced* where a replay of a snapshot replayed the asset. The
  verdicts themselves are the workspace layer's (`workspace/views/ref_checks.py`), the ones
  `dws-dagster status --verify` reports.

Import rule: imports dagster, `workspace`, `assets` (bindings and partitions; the IO manager
only inside `with_dws_checks`, which looks for it among the resources) and `_compat`; never
pyspark at import, `sensor`, `ol`, `spark` or `cli`.
"""
