"""The `dws-dagster` commands, one module per verb (as DVC's `dvc/commands/<verb>.py`): each
declares its arguments and help in `add_parser(subparsers, parents)` and holds its handler.

- set up and correct by hand: `init`, `add`, `forget`, `observe`;
- read-only views: `status`, `lineage`, `diff`, `history`, `version`;
- snapshots: `snapshot`, `restore`, `delete_snapshot` (`delete-snapshot`), `gc`, `replay`;
- catalogs: `openlineage` (`openlineage status|deliver|replay`, the actions of one verb);
- `demo`, the example project run end to end.

Import rule: as `cli/`: none imports dagster, pyspark or openlineage when imported; a command
imports what it needs when it runs.
"""
