"""The Data Workspaces model: a workspace's definition and resources (`definition`,
`resources`), refs (`refs`), lineage records (`records`), content versions (`versions`),
durable file writes and swaps (`files`, `swap`, `trees`), where replaced remote data keeps its
versions and what reaches it (`remote_versions`), the schemas of files read from disk
(`formats`, `shapes`), secrets redaction (`redaction`) and git state (`gitinfo`).

Import rule: the standard library, pydantic and `dws_dagster.errors` only — neither dagster,
pyspark nor openlineage, and no other `dws_dagster` package: the store, snapshots, replay and
views are built on this model, never the other way round.
"""
