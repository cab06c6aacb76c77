"""The read path in Dagster: the lineage sensor (`lineage_sensor`: ticks, cursor, time budget)
reads asset and run events from the instance's event log in storage order (`event_reader`,
decoding stored JSON itself where it can: `stored_events`), learns each asset's bindings from the
code location (`asset_catalog`) and the facts of each run from the instance (`run_lookup`),
applies the lineage to the workspace store (`apply_lineage`; what a check evaluation judged:
`check_verdicts`) and hands the OpenLineage events it implies (`catalog_events/`:
`asset_events`, with their datasets in `datasets` and the run and job facts in `facts`) to
the outbox.

Import rule: imports dagster, `workspace`, `ol`, `metadata_keys`, and of `assets` only what
needs no Spark (`bindings`, `partitions`, `materialization`); never pyspark, the IO manager or
`cli`. Dagster internals only through `dws_dagster._compat.dagster`.
"""
