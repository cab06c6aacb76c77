"""Snapshots of the whole workspace, one job per module:

- `snapshots`: taking a snapshot (its hash, the data it retains, its index entry);
- `index`: the snapshot index: listing, finding one by tag or hash, checking tags, deleting;
- `diff`: what changed between two snapshots, or a snapshot and the workspace now;
- `results_archive`: the per-snapshot copies of results, each with its `lineage.json`;
- `results_metrics`: the metrics a snapshot shows (from the lineage or a `results.json`);
- `restore_plan`: restoring, steps 1 and 2: where each ref's version comes from, staged and
  checked, touching nothing the workspace reads;
- `restore`: restoring, step 3: the intent file and the swap into place, and finishing a
  restore a crash interrupted;
- `retention`, `objects`, `file_hashes`, `snapshot_data`: what each snapshot captures of the
  data and how it is retained (remote data's kept versions: `workspace.remote_versions`);
- `garbage`: freeing what no snapshot needs.

Import rule: `workspace` and `store`; neither dagster nor pyspark. Remote data is reached only
through the `RemoteData` (`workspace.remote_versions`) a caller passes in. Replaying a
snapshot is `replay`'s.
"""
