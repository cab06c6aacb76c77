"""The workspace store: the current lineage of every ref and its history (`LineageStore`, in
`lineage_store`, which hands each call to one object per job: `transactions`, `rows`,
`current`, `history`, `rules`, `writes`, `snapshot_tables`, `changes`, with its SQL in
`statements`, the values it hands out in `ref_state` and its explanations in `messages`), on a
database chosen by `settings` (SQLite by default, PostgreSQL across machines), with tables in
`schema` migrated by Alembic (`migrations/`), engines and transactions in `database`, and the
import of journal-format workspaces (`journal_format`, `journal_import`). `gc_pause` keeps the
garbage collector off the large structures reads build.

Import rule: `workspace` only; neither dagster nor pyspark, nor snapshots, replay or views.
"""
