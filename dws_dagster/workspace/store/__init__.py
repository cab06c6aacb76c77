"""The workspace store: the current lineage of every ref and its history (`LineageStore`, in
`lineage_store`, put together from one module per job: `transactions`, `rows`, `current`,
`history`, `rules`, `writes`, `snapshot_tables`, with its SQL in `statements`, the values it
hands out in `ref_state` and its explanations in `messages`), on a database chosen by
`settings` (SQLite by default, PostgreSQL across machines), with tables in `schema` migrated
by Alembic (`migrations/`), engines and transactions in `database`. `gc_pause` keeps the
garbage collector off the large structures reads build.

Import rule: part of `workspace`, so neither dagster nor pyspark.
"""
