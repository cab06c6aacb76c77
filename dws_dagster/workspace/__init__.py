"""The Data Workspaces model: resources, refs, versions, the lineage store and snapshots.

This layer imports neither dagster nor pyspark, so scripts and the command line can use it alone.
"""
