"""PySpark specifics: atomic DataFrame storage at a ref, content versions, plan lineage.

Imports pyspark but never dagster, so it can be used and tested without an orchestrator.
"""
