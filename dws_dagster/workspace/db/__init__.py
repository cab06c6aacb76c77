"""The workspace store's database: settings (which database), schema (its tables, with Alembic
migrations), database (engines and transactions), and the import of journal-format workspaces.
Imports neither Dagster nor PySpark."""
