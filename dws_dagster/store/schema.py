"""The workspace store's tables (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Every table is prefixed `dws_` and keyed by workspace, so the store can live in the database
that holds Dagster's own storage, beside its tables, or in a schema of its own.

- `dws_records`: every lineage record ever written, content-addressed (`digest` of the JSON
  body), so applying a record twice stores it once and a snapshot refers to records instead of
  copying them. `dws_record_inputs` holds each record's inputs, indexed both ways: upstream and
  downstream lineage are queries, not walks over records held in memory.
- `dws_refs`: the current lineage of each ref (its writer, good record, failed attempt, and
  whether its data may be partial).
- `dws_operations`: the history, one row per change, in order.
- `dws_snapshots`, `dws_snapshot_tags`, `dws_snapshot_refs`: the snapshot index and each
  snapshot's manifest (a ref's state there, pointing at records).
- `dws_snapshot_data`: the data version of every ref a snapshot captured (drift included).
- `dws_data_versions`: the files of each retained data version, by content hash (the bytes
  are in `.dataworkspace/objects/`, see objects.py).
- `dws_ol_events`, `dws_ol_delivery`: the OpenLineage outbox and its delivery lease.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

#: Refs are compared and ranged bytewise (`ref > 'a/' AND ref < 'a0'` finds what lies inside
#: `a`): PostgreSQL's default collation follows the locale, so refs there use "C".
RefText = Text().with_variant(Text(collation="C"), "postgresql")
#: Ids that grow with history: 64 bits on PostgreSQL; on SQLite an INTEGER PRIMARY KEY is the
#: rowid (64 bits already), which BIGINT would not be.
RowId = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

workspaces = Table(
    "dws_workspaces",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", RefText, nullable=False, unique=True),
    Column("created", String(40), nullable=False),
    #: Bumped by every write to the workspace's lineage: the row writers lock (see database.py).
    Column("generation", BigInteger, nullable=False, server_default="0"),
    #: When the journal-format files under .dataworkspace/ were imported (None: nothing to).
    Column("imported", String(40), nullable=True),
)

records = Table(
    "dws_records",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), nullable=False),
    Column("ref", RefText, nullable=False),
    Column("version", Text, nullable=True),
    Column("run_id", Text, nullable=True),
    Column("end_time", String(40), nullable=True),
    #: A good materialization (False: a failed attempt), so `find_record` skips attempts.
    Column("good", Boolean, nullable=False),
    Column("digest", String(32), nullable=False),
    #: `records.identity_digest` of the body: snapshot hashes and diffs need no body.
    Column("identity", String(32), nullable=False),
    Column("body", Text, nullable=False),
    UniqueConstraint("workspace_id", "digest"),
    Index(None, "workspace_id", "ref", "version"),
)

record_inputs = Table(
    "dws_record_inputs",
    metadata,
    Column("record_id", RowId, ForeignKey("dws_records.id"), primary_key=True),
    Column("ref", RefText, primary_key=True),
    Column("version", Text, nullable=False),
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), nullable=False),
    Index(None, "workspace_id", "ref", "version"),
)

refs = Table(
    "dws_refs",
    metadata,
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), primary_key=True),
    Column("ref", RefText, primary_key=True),
    Column("owner", Text, nullable=True),
    Column("record_id", RowId, ForeignKey("dws_records.id"), nullable=True),
    Column("attempt_id", RowId, ForeignKey("dws_records.id"), nullable=True),
    Column("unknown", Boolean, nullable=False, server_default="0"),
    #: Downstream lineage joins the inputs of current records to their refs.
    Index(None, "workspace_id", "record_id"),
)

operations = Table(
    "dws_operations",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), nullable=False),
    Column("op", String(16), nullable=False),
    Column("ref", RefText, nullable=True),
    Column("record_id", RowId, ForeignKey("dws_records.id"), nullable=True),
    #: The operation's other fields as JSON (a claim's step, a reset's snapshot and unknowns).
    Column("detail", Text, nullable=True),
    Column("at", String(40), nullable=False),
    Index(None, "workspace_id", "id"),
)

snapshots = Table(
    "dws_snapshots",
    metadata,
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), primary_key=True),
    Column("hash", String(64), primary_key=True),
    #: Order of creation (history lists snapshots oldest first).
    Column("position", BigInteger, nullable=False),
    Column("message", Text, nullable=False, server_default=""),
    Column("created", String(40), nullable=False),
    Column("metrics", Text, nullable=True),
    Column("results", Text, nullable=False, server_default="[]"),
    #: Each resource's state beyond its data (a code resource's git commit and whether its
    #: tree was dirty), as JSON; None for snapshots taken before revision 0002.
    Column("resources", Text, nullable=True),
    Index(None, "workspace_id", "position"),
)

snapshot_tags = Table(
    "dws_snapshot_tags",
    metadata,
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), primary_key=True),
    Column("tag", Text, primary_key=True),
    Column("hash", String(64), nullable=False),
    Column("position", Integer, nullable=False),
    Index(None, "workspace_id", "hash"),
)

snapshot_refs = Table(
    "dws_snapshot_refs",
    metadata,
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), primary_key=True),
    Column("hash", String(64), primary_key=True),
    Column("ref", RefText, primary_key=True),
    Column("owner", Text, nullable=True),
    Column("record_id", RowId, ForeignKey("dws_records.id"), nullable=True),
    Column("attempt_id", RowId, ForeignKey("dws_records.id"), nullable=True),
    Column("unknown", Boolean, nullable=False, server_default="0"),
)

ol_events = Table(
    "dws_ol_events",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), nullable=False),
    Column("run_id", Text, nullable=False),
    Column("event_type", String(16), nullable=False),
    Column("event_time", String(40), nullable=False),
    Column("body", Text, nullable=False),
    Column("spooled", String(40), nullable=False),
    Column("pending", Boolean, nullable=False, server_default="1"),
    UniqueConstraint("workspace_id", "run_id", "event_type"),
    Index(None, "workspace_id", "pending", "id"),
    Index(None, "workspace_id", "event_time"),
)

ol_delivery = Table(
    "dws_ol_delivery",
    metadata,
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), primary_key=True),
    #: Who delivers now, and until when (seconds since the epoch): a lease, so a deliverer that
    #: died is replaced once it expires, and nobody holds a transaction while sending.
    Column("holder", Text, nullable=True),
    Column("lease_until", Float, nullable=False, server_default="0"),
    Column("delivered", BigInteger, nullable=False, server_default="0"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", String(40), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("last_error_at", String(40), nullable=True),
    Column("last_delivery_at", String(40), nullable=True),
)

snapshot_data = Table(
    "dws_snapshot_data",
    metadata,
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), primary_key=True),
    Column("hash", String(64), primary_key=True),
    Column("ref", RefText, primary_key=True),
    #: lineage (the data is the version its record says), drift (changed outside any step),
    #: missing, resource (a source-data resource nothing observed), code, remote (the record's
    #: version, not checkable from here).
    Column("kind", String(16), nullable=False),
    Column("version", Text, nullable=True),
    Index(None, "workspace_id", "ref", "version"),
)

data_versions = Table(
    "dws_data_versions",
    metadata,
    Column("workspace_id", Integer, ForeignKey("dws_workspaces.id"), primary_key=True),
    Column("ref", RefText, primary_key=True),
    Column("version", Text, primary_key=True),
    #: hardlink: the files were Spark's, replaced and never rewritten: linked back on restore.
    Column("link", Boolean, nullable=False, server_default="0"),
    #: JSON [[relative path, size, file hash, mtime ns, mode], ...]: the retained files.
    Column("files", Text, nullable=False),
    Column("created", String(40), nullable=False),
)
