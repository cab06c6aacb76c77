"""Column lineage on a Spark Connect session, from the plan its client sends (`lineage`), and
the paths such a plan reads (`read_paths`).

- `lineage`: the entry point; `relations` walks the plan's nodes, `expression_lineage`
  evaluates their expressions, `columns` lays out and names their columns, `server_schemas`
  asks the server what the plan does not say, `plan_tree` finds relations in the protobuf;
- `expressions`: the few node types expressions become, from protobuf (`proto_expressions`)
  or SQL text (`sql_parser`, with `sql_tokens`);
- `functions`: what Spark's built-in functions are to its analyzer, with their names in
  `function_registry`.

Import rule: imports pyspark (its `connect` modules and protobuf only inside the functions
that read a Connect plan, so a classic session needs no Connect client installed) and the
rest of `spark/` below the walkers (`lineage_model`, `plan_paths`, `session_kind`); never
`spark.plan` or `spark.column_lineage`, never dagster.
"""
