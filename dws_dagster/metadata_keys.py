"""The `dws/...` metadata keys: the contract between the writers of metadata (asset
definitions, the IO manager, source observations) and its readers (the IO manager's inputs,
the lineage sensor, the asset catalog). Every key is named here, once; nothing else spells one.

No Dagster import: the keys are plain strings, and reading this module costs nothing.
"""

from __future__ import annotations

# --------------------------------------------------------------- definition metadata
# Set on an asset by `dws_ref(...)` (bindings.py): where and how the asset is stored.

#: the workspace ref the asset is bound to (also on every materialization and observation)
REF = "dws/ref"
#: parquet, csv, json or orc (also on every materialization)
FORMAT = "dws/format"
WRITE_OPTIONS = "dws/write_options"
READ_OPTIONS = "dws/read_options"
PARTITION_BY = "dws/partition_by"
PARTITION_TEMPLATE = "dws/partition_template"
#: rows or files: how the IO manager versions what it writes
VERSIONING = "dws/versioning"

# ------------------------------------------------------------ asset check metadata
# Set by the user on an asset check (its spec's metadata, or a result's): read by the lineage
# sensor for the check's OpenLineage assertion.

#: the column of the checked asset the check is about (none: the data as a whole)
CHECK_COLUMN = "dws/column"

# ------------------------------------------------------------ materialization metadata
# Written by the IO manager (materialization.lineage_metadata and the table metadata); the
# lineage sensor rebuilds the lineage record from them (materialization.record_from_metadata).

VERSION = "dws/version"
#: [{"ref", "version", "asset"?}, ...]
INPUTS = "dws/inputs"
#: the transitive {ref: version} closure of the inputs, the output included
PROVENANCE = "dws/provenance"
#: the asset's run config, and `dagster/partition`
PARAMETERS = "dws/parameters"
CODE_VERSION = "dws/code_version"
GIT_COMMIT = "dws/git_commit"
STARTED = "dws/started_at"
FINISHED = "dws/finished_at"
WORKSPACE = "dws/workspace"
#: the column lineage from the Spark plan, in workspace terms (refs, kinds, subtypes)
COLUMN_LINEAGE = "dws/column_lineage"
#: the column lineage as a table open-source Dagster shows on the asset page (it shows
#: `dagster/column_lineage` only as JSON): output column, input asset, input column, kind. A
#: short key: the page's key column is as wide as its longest key, the table needs the width.
COLUMN_SOURCES = "dws/column_sources"
#: {input ref or location: [[column, Spark simple type, nullable], ...]} as Spark read them
INPUT_SCHEMAS = "dws/input_schemas"
#: the ref of a partitioned asset's root (its binding's ref, above the partition's subpath)
REF_ROOT = "dws/ref_root"
#: the writer's `keep_versions` for a remote ref (gc frees its kept versions by it)
KEEP_VERSIONS = "dws/keep_versions"
SIZE_BYTES = "dws/size_bytes"
#: on each partition of a range written in one step that read data by path: which of those
#: inputs are its own ("exact", from the files its rows came from), which are recorded with
#: every partition of the range ("every_partition"), and why ("reason")
INPUTS_BY_PATH = "dws/inputs_by_path"
#: a results asset's metrics, set by the asset body (`dws_metrics({...})`)
METRICS = "dws/metrics"
#: the snapshot a replay reproduces (`dws-dagster replay`): on a replayed materialization,
#: which is recorded in the replay's scratch workspace, so the lineage sensor leaves it out of
#: the workspace's; and the tag of the Dagster runs a replay launches (the UI lists it)
REPLAY_OF = "dws/replay_of"

# ------------------------------------------------------------- asset check metadata
# On the results of the dws asset checks (checks/asset_checks.py), beside `dws/ref` (the ref,
# or partition's ref, checked).

#: the version the lineage records for the ref (or the snapshot's, for `dws_reproduced`)
CHECK_RECORDED = "dws/recorded_version"
#: the version found: of the data on disk now, or that a replay wrote
CHECK_FOUND = "dws/found_version"
#: what to run when the check failed, one command a line
CHECK_TO_RUN = "dws/to_run"
#: what the check looked at: how the data was hashed, each input's versions, the replay
CHECK_DETAILS = "dws/check_details"

# ------------------------------------------------------------ observation metadata
# Written by `dws_source_asset` observations.

OBSERVED_AT = "dws/observed_at"

#: Every key this package writes or reads starts with this.
PREFIX = "dws/"
