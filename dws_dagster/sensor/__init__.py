"""The read path in Dagster: the lineage sensor reads asset events from the instance's event log
(`stored_events`), learns each asset's bindings from the code location (`asset_catalog`), applies
the lineage to the workspace store and hands OpenLineage events to the outbox (`events`).

Import rule: imports dagster, `workspace`, `ol`, `metadata_keys` and the metadata decoding of
`assets.materialization`; never pyspark or `cli`. Dagster internals only through
`dws_dagster._compat.dagster`.
"""
