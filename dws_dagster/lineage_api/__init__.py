"""The Data Workspaces lineage API for scripts and notebooks (`LineageBuilder` in `builder`,
`Lineage` and `ResultsLineage` in `steps`) and the declaration of a script's parameters
(`params`), drop-in compatible with `dataworkspaces.lineage` (re-exported as
`dws_dagster.lineage`).

Import rule: `workspace`, `store`, `snapshots` and `replay`'s environment; neither dagster nor
pyspark.
"""
