"""Replaying a snapshot, in one place: `plan` (the steps behind its results), `scratch` (the
scratch workspace they run in), `env` (what a replayed step sees), `run` (running them and
judging what reproduced), `compare` (the columns that differ, compared by a caller's
comparer), `record` (each replay's verdicts, kept for the lineage page) and `in_place`
(landing a replay through restore); `dagster_runner` replays Dagster asset steps as runs on
the user's instance.

Import rule: `workspace`, `store` and `snapshots`; neither dagster nor pyspark, except
`dagster_runner`, which only the `replay` command loads, and only for snapshots that hold
Dagster steps. Data is compared only by the comparer a caller passes in (Spark's lives in
`spark.column_diff`).
"""
