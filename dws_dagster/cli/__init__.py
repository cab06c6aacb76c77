"""The applications: the `dws-dagster` command line and the demo it runs.

- `main`: the parser and dispatch (`main`, the console script; `python -m dws_dagster.cli`
  runs it too), and its exit codes for failures;
- `failures`: every failure as one line on stderr, never a traceback;
- `output`: JSON on stdout, progress bars on stderr, streams that print any file name;
- `context`: the workspace `--workspace` names, and remote data (Spark started on demand);
- `workspace_commands`: `init`, `add`, `forget`, `observe`;
- `view_commands`: `status`, `lineage`, `diff`, `history`, `version` (read-only);
- `snapshot_commands`: `snapshot`, `restore`, `delete-snapshot`, `gc`;
- `openlineage_commands`: `openlineage status|deliver|replay`;
- `demo`: `demo`, the example project run end to end; `demo_progress`, its progress on
  stderr; `demo_report`, what it prints when done.

Import rule: may import every other package, but imports Dagster and Spark only inside the
commands that need them, so `status`, `lineage` or `diff` start no JVM and load no Dagster.
"""
