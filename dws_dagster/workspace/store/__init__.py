"""The workspace store: the current lineage of every ref and its history (`lineage_store`), on
a database chosen by `settings` (SQLite by default, PostgreSQL across machines), with tables in
`schema` migrated by Alembic (`migrations/`), engines and transactions in `database`, and the
import of journal-format workspaces (`journal_format`, `journal_import`).

Import rule: part of `workspace`, so neither dagster nor pyspark.
"""
