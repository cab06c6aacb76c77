"""The applications: the `dws-dagster` command line and the demo it runs.

- `main`: the parser assembled from the command modules, and dispatch (`main`, the console
  script; `python -m dws_dagster.cli` runs it too), and its exit codes for failures;
- `command`: what a command module gives the parser, the options every command shares;
- `commands/`: one module per verb, its arguments, help and handler (its `__init__` lists
  them);
- `failures`: every failure as one line on stderr, never a traceback;
- `output`: JSON on stdout, progress bars on stderr, streams that print any file name;
- `context`: the workspace `--workspace` names, and remote data (Spark started on demand);
- `demo/`: the example project run end to end (for the `demo` command): `pipeline`, with its
  progress on stderr (`progress`) and what it prints when done (`final_report`).

Import rule: may import every other package, but imports Dagster and Spark only inside the
commands that need them, so `status`, `lineage` or `diff` start no JVM and load no Dagster.
"""
