"""OpenLineage for external catalogs: plain-data model, event builders, a durable outbox.

Named `ol` so it never shadows the `openlineage` client package it builds on. Imports no
Dagster and no Spark: the lineage sensor turns Dagster events into `model` objects.
"""
