"""Snapshots capture every resource's data: the data version of each ref a snapshot holds
(drift included), each resource's state beyond its data, and the files of retained versions.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_REF_TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _schema() -> str | None:
    """The store's PostgreSQL schema: ALTER TABLE names its table itself, which the engine's
    schema translation (enough for CREATE TABLE) does not reach."""
    return context.config.attributes.get("schema")


def upgrade() -> None:
    with op.batch_alter_table("dws_snapshots", schema=_schema()) as batch:
        batch.add_column(sa.Column("resources", sa.Text(), nullable=True))
    op.create_table(
        "dws_snapshot_data",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("ref", _REF_TEXT, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_snapshot_data_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("workspace_id", "hash", "ref", name=op.f("pk_dws_snapshot_data")),
    )
    op.create_table(
        "dws_data_versions",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("ref", _REF_TEXT, nullable=False),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("link", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("files", sa.Text(), nullable=False),
        sa.Column("created", sa.String(length=40), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_data_versions_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint(
            "workspace_id", "ref", "version", name=op.f("pk_dws_data_versions")
        ),
    )


def downgrade() -> None:
    op.drop_table("dws_data_versions")
    op.drop_table("dws_snapshot_data")
    with op.batch_alter_table("dws_snapshots", schema=_schema()) as batch:
        batch.drop_column("resources")
