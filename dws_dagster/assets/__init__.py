"""The write path in Dagster: the Spark IO manager, ref bindings, definitions-time checks,
source-data assets, the workspace resource, and the metadata each materialization carries.

Import rule: imports dagster, `workspace`, `spark` (inside the IO manager's methods, so that
loading definitions starts no JVM) and `metadata_keys`; never `sensor`, `ol` or `cli`.
Dagster internals only through `dws_dagster._compat.dagster`.
"""
