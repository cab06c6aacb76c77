"""The workspace store's tables: lineage records, current refs, history, snapshots, outbox.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op

from dws_dagster.workspace.db.schema import metadata

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The first revision creates the tables as schema.py declares them; later revisions
    # alter them with explicit operations, so this one must not change once released.
    metadata.create_all(op.get_bind())


def downgrade() -> None:
    metadata.drop_all(op.get_bind())
