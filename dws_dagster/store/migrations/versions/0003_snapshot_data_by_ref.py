"""Snapshot data rows looked up by ref: a write to remote data asks which of the ref's versions
snapshots reference before freeing the versions it replaced.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _schema() -> str | None:
    """The store's PostgreSQL schema (as in 0002: named explicitly, not left to translation)."""
    return context.config.attributes.get("schema")


def upgrade() -> None:
    op.create_index(
        op.f("ix_dws_snapshot_data_workspace_id_ref_version"),
        "dws_snapshot_data",
        ["workspace_id", "ref", "version"],
        schema=_schema(),
    )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_dws_snapshot_data_workspace_id_ref_version"),
        table_name="dws_snapshot_data",
        schema=_schema(),
    )
