"""PySpark specifics: atomic DataFrame storage at a ref, content versions, plan lineage, and
which columns of two datasets differ (`column_diff`, for replay's verdicts).

Imports pyspark but never dagster, so it can be used and tested without an orchestrator.
"""
