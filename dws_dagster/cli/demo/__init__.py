"""The demo (`dws-dagster demo`): `pipeline` sets up the example workspace and runs the
NYC-taxi forecast through Dagster end to end, `progress` shows how far it got, and
`final_report` prints what it recorded and the commands to try next.

Import rule: as `cli`: Dagster and Spark only inside the functions that run the pipeline.
"""
