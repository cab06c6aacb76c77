"""The applications: the `dws-dagster` command line (`main`) and the demo it runs (`demo`).

Import rule: may import every other package, but imports Dagster and Spark only inside the
commands that need them, so `status`, `lineage` or `diff` start no JVM and load no Dagster.
"""
