"""The refs' status: `ref_rows` (one row a ref, and the data verification of
`status --verify`), `ref_checks` (the workspace's guarantees about one ref as verdicts, which
the dws asset checks report too) and `summary` (what `dws-dagster status` prints).

Import rule: as `views`.
"""
