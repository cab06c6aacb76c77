"""PySpark specifics: atomic DataFrame storage at a ref, content versions, plan lineage, and
which columns of two datasets differ (`column_diff`, for replay's verdicts).

- `storage`: atomic writes and reads at a location, with `row_version` (the content version of
  the rows, computed in the write pass), `version_marker` (the marker kept with the data) and
  `locations` (local paths, or Hadoop URIs through the driver's JVM); `range_write` (a range of
  partitions in one write), `row_files`, `write_stats` (row counts);
- `column_lineage`: column lineage from a DataFrame's plan, read by `plan` (the classic
  session's analyzed plan) or `connect/` (the client's plan on Spark Connect), both giving the
  types of `lineage_model` for the paths of `plan_paths`;
- `remote_data`: remote data through Hadoop filesystems; `session_kind`: classic or Spark
  Connect sessions and what differs between them.

Import rule: imports pyspark but never dagster, so it can be used and tested without an
orchestrator. `column_lineage` alone imports both plan walkers; neither imports the other.
"""
