"""Snapshots of the whole workspace: take, diff, history, delete (`snapshots`), what each
captures and how data is retained (`retention`, `objects`, `remote`, `file_hashes`,
`snapshot_data`), restore (`restore`), freeing what no snapshot needs (`garbage`), and the
metrics a snapshot shows (`results_metrics`).

Import rule: part of `workspace`, so neither dagster nor pyspark; remote data is reached only
through the `remote.RemoteData` a caller passes in.
"""
