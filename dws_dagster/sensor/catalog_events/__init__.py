"""The OpenLineage events the lineage sensor builds from Dagster's: `asset_events` (one run of
an asset's catalog job per materialization, check verdict or failure), with what it says of
the datasets (`datasets`) and of the run (`facts`), handed to the pure builders of `ol`.

Import rule: as `sensor`.
"""
