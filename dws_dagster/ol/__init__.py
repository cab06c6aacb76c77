"""OpenLineage for external catalogs: plain-data model, event builders, a durable outbox.

Named `ol` so it never shadows the `openlineage` client package it builds on. Imports no
Dagster and no Spark: the lineage sensor turns Dagster events into `model` objects.

- `model`: what the sensor knows about an asset's run, as plain data (and `EventBuildError`);
- `events`: the RunEvents of an asset's run (or of its checks' run), with its run and job
  facets; `dataset_facets`: their inputs and outputs (versions, partitions, schema, column
  lineage, what describes the asset, check verdicts, metrics); `run_events`: the RunEvents of
  the Dagster run itself; `facets`: what both share (producer, schema URLs, the facet's shape);
  `custom_facets`: the one facet of this package's own (`dws_metrics`), with its schema in
  `spec/`;
- `job_names`: the jobs' names, one per asset whichever Dagster job ran it;
- `naming`: a dataset's OpenLineage (namespace, name) from its location;
- `source_urls`: the URLs of an asset's source code (`sourceCodeLocation` facet);
- `spark_types`: nested schema fields parsed from Spark's type strings;
- `timestamps`: event times (naive refused) and the outbox's stored times (naive read as UTC);
- `outbox/`: the durable spool and its delivery (its `__init__` lists the modules);
- `transport/`: where events go (its `__init__` lists the modules).

Import rule: imports openlineage (public API; internals through `dws_dagster._compat`),
requests, sqlalchemy, `workspace/` and `errors`; the package's version from
`dws_dagster._version`, never from the package root; never dagster or pyspark.
"""
