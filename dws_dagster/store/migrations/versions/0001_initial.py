"""The workspace store's tables: lineage records, current refs, history, snapshots, outbox.

Revision ID: 0001
Revises:

Explicit operations (not `metadata.create_all`): a later revision alters what this one
created, so this one must keep creating the tables as they were at 0001.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dws_workspaces",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column(
            "name", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False
        ),
        sa.Column("created", sa.String(length=40), nullable=False),
        sa.Column("generation", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("imported", sa.String(length=40), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dws_workspaces")),
        sa.UniqueConstraint("name", name=op.f("uq_dws_workspaces_name")),
    )
    op.create_table(
        "dws_ol_delivery",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.Float(), server_default="0", nullable=False),
        sa.Column("delivered", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.String(length=40), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", sa.String(length=40), nullable=True),
        sa.Column("last_delivery_at", sa.String(length=40), nullable=True),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_ol_delivery_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("workspace_id", name=op.f("pk_dws_ol_delivery")),
    )
    op.create_table(
        "dws_ol_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("event_type", sa.String(length=16), nullable=False),
        sa.Column("event_time", sa.String(length=40), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("spooled", sa.String(length=40), nullable=False),
        sa.Column("pending", sa.Boolean(), server_default="1", nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_ol_events_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dws_ol_events")),
        sa.UniqueConstraint(
            "workspace_id",
            "run_id",
            "event_type",
            name=op.f("uq_dws_ol_events_workspace_id_run_id_event_type"),
        ),
    )
    op.create_index(
        op.f("ix_dws_ol_events_workspace_id_event_time"),
        "dws_ol_events",
        ["workspace_id", "event_time"],
        unique=False,
    )
    op.create_index(
        op.f("ix_dws_ol_events_workspace_id_pending_id"),
        "dws_ol_events",
        ["workspace_id", "pending", "id"],
        unique=False,
    )
    op.create_table(
        "dws_records",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column(
            "ref", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False
        ),
        sa.Column("version", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("end_time", sa.String(length=40), nullable=True),
        sa.Column("good", sa.Boolean(), nullable=False),
        sa.Column("digest", sa.String(length=32), nullable=False),
        sa.Column("identity", sa.String(length=32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_records_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dws_records")),
        sa.UniqueConstraint(
            "workspace_id", "digest", name=op.f("uq_dws_records_workspace_id_digest")
        ),
    )
    op.create_index(
        op.f("ix_dws_records_workspace_id_ref_version"),
        "dws_records",
        ["workspace_id", "ref", "version"],
        unique=False,
    )
    op.create_table(
        "dws_snapshot_tags",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("tag", sa.Text(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_snapshot_tags_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("workspace_id", "tag", name=op.f("pk_dws_snapshot_tags")),
    )
    op.create_index(
        op.f("ix_dws_snapshot_tags_workspace_id_hash"),
        "dws_snapshot_tags",
        ["workspace_id", "hash"],
        unique=False,
    )
    op.create_table(
        "dws_snapshots",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("message", sa.Text(), server_default="", nullable=False),
        sa.Column("created", sa.String(length=40), nullable=False),
        sa.Column("metrics", sa.Text(), nullable=True),
        sa.Column("results", sa.Text(), server_default="[]", nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_snapshots_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("workspace_id", "hash", name=op.f("pk_dws_snapshots")),
    )
    op.create_index(
        op.f("ix_dws_snapshots_workspace_id_position"),
        "dws_snapshots",
        ["workspace_id", "position"],
        unique=False,
    )
    op.create_table(
        "dws_operations",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("op", sa.String(length=16), nullable=False),
        sa.Column(
            "ref", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=True
        ),
        sa.Column("record_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("at", sa.String(length=40), nullable=False),
        sa.ForeignKeyConstraint(
            ["record_id"], ["dws_records.id"], name=op.f("fk_dws_operations_record_id_dws_records")
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_operations_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dws_operations")),
    )
    op.create_index(
        op.f("ix_dws_operations_workspace_id_id"),
        "dws_operations",
        ["workspace_id", "id"],
        unique=False,
    )
    op.create_table(
        "dws_record_inputs",
        sa.Column(
            "record_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column(
            "ref", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False
        ),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["record_id"],
            ["dws_records.id"],
            name=op.f("fk_dws_record_inputs_record_id_dws_records"),
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_record_inputs_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("record_id", "ref", name=op.f("pk_dws_record_inputs")),
    )
    op.create_index(
        op.f("ix_dws_record_inputs_workspace_id_ref_version"),
        "dws_record_inputs",
        ["workspace_id", "ref", "version"],
        unique=False,
    )
    op.create_table(
        "dws_refs",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column(
            "ref", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False
        ),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("record_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column(
            "attempt_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("unknown", sa.Boolean(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["dws_records.id"], name=op.f("fk_dws_refs_attempt_id_dws_records")
        ),
        sa.ForeignKeyConstraint(
            ["record_id"], ["dws_records.id"], name=op.f("fk_dws_refs_record_id_dws_records")
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_refs_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("workspace_id", "ref", name=op.f("pk_dws_refs")),
    )
    op.create_index(
        op.f("ix_dws_refs_workspace_id_record_id"),
        "dws_refs",
        ["workspace_id", "record_id"],
        unique=False,
    )
    op.create_table(
        "dws_snapshot_refs",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column(
            "ref", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False
        ),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("record_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column(
            "attempt_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("unknown", sa.Boolean(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["dws_records.id"],
            name=op.f("fk_dws_snapshot_refs_attempt_id_dws_records"),
        ),
        sa.ForeignKeyConstraint(
            ["record_id"],
            ["dws_records.id"],
            name=op.f("fk_dws_snapshot_refs_record_id_dws_records"),
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["dws_workspaces.id"],
            name=op.f("fk_dws_snapshot_refs_workspace_id_dws_workspaces"),
        ),
        sa.PrimaryKeyConstraint("workspace_id", "hash", "ref", name=op.f("pk_dws_snapshot_refs")),
    )


def downgrade() -> None:
    op.drop_table("dws_snapshot_refs")
    op.drop_index(op.f("ix_dws_refs_workspace_id_record_id"), table_name="dws_refs")
    op.drop_table("dws_refs")
    op.drop_index(
        op.f("ix_dws_record_inputs_workspace_id_ref_version"), table_name="dws_record_inputs"
    )
    op.drop_table("dws_record_inputs")
    op.drop_index(op.f("ix_dws_operations_workspace_id_id"), table_name="dws_operations")
    op.drop_table("dws_operations")
    op.drop_index(op.f("ix_dws_snapshots_workspace_id_position"), table_name="dws_snapshots")
    op.drop_table("dws_snapshots")
    op.drop_index(op.f("ix_dws_snapshot_tags_workspace_id_hash"), table_name="dws_snapshot_tags")
    op.drop_table("dws_snapshot_tags")
    op.drop_index(op.f("ix_dws_records_workspace_id_ref_version"), table_name="dws_records")
    op.drop_table("dws_records")
    op.drop_index(op.f("ix_dws_ol_events_workspace_id_pending_id"), table_name="dws_ol_events")
    op.drop_index(op.f("ix_dws_ol_events_workspace_id_event_time"), table_name="dws_ol_events")
    op.drop_table("dws_ol_events")
    op.drop_table("dws_ol_delivery")
    op.drop_table("dws_workspaces")
