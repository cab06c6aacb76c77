"""Alembic environment of the workspace store: run by `Database.ensure_schema` with the
connection it opened (and locked), never from a command line of its own."""

from __future__ import annotations

from alembic import context

from dws_dagster.store.database import VERSION_TABLE
from dws_dagster.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    version_table_schema=context.config.attributes.get("schema"),
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
