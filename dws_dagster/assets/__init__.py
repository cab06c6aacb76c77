"""The write path in Dagster: the Spark IO manager, ref bindings, definitions-time checks,
source-data assets, the workspace resource, and the metadata each materialization carries.

Import rule: imports dagster, pyspark (importing it starts no JVM: the session is the user's),
`spark`, `workspace` and `metadata_keys`; never `sensor`, `ol` or `cli`. Dagster internals only
through `dws_dagster._compat.dagster`.
"""
