"""The read path in Dagster: the lineage sensor (`definition`) reads asset events from the
instance's event log (`stored_events`), learns each asset's bindings from the code location
(`asset_catalog`) and the facts of each run from the instance (`run_lookup`), applies the lineage
to the workspace store (`apply_lineage`) and hands the OpenLineage events it implies
(`openlineage_events`) to the outbox.

Import rule: imports dagster, `workspace`, `ol`, `metadata_keys` and the metadata decoding of
`assets.materialization`; never pyspark or `cli`. Dagster internals only through
`dws_dagster._compat.dagster`.
"""
