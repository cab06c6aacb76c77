"""The write path in Dagster.

- `io_manager`: SparkWorkspaceIOManager, storing assets' DataFrames at workspace refs;
  what it does for each job lives beside it:
  `step_reads` (the inputs each running step has loaded), `input_versions` (the version of
  data read), `replaced_versions` (keeping and freeing the data a write replaces),
  `output_step` (one output's write and its lineage record) and `output_metadata` (table
  metadata and column lineage of what was written).
- `bindings`: an asset's `dws_ref` metadata, and its default ref without it.
- `partitions`: where each partition of a bound asset lives (shared with the sensor).
- `materialization`: the lineage metadata each materialization carries, and its decoding.
- `definitions_check`: the one-writer rule and known resources, checked at definitions time.
- `source_assets`, `resources`, `schema_drift`: source-data assets, the workspace resource,
  and the check that the partitions read together share one schema.

Import rule: imports dagster, `workspace`, `spark` (pyspark only in the modules the IO
manager uses; `bindings` and `partitions` never, so the sensor imports them without Spark;
`spark.column_lineage` inside functions, so that loading definitions starts no JVM) and
`metadata_keys`; never `sensor`, `ol` or `cli`. Dagster internals only through
`dws_dagster._compat.dagster`.
"""
