"""Column lineage of a Spark Connect DataFrame, from the plan its client sends.

A Connect session has no analyzed plan in this process, and the protocol returns none: its
`AnalyzePlan` answers with schemas and explain text. What the client does have is its own plan
(`df._plan`, the `spark.connect.Relation` it sends), which `relations` walks; the root's
schema is the DataFrame's own, kept by the client, and the leaves' schemas are asked for in
parallel before the walk needs them. The same plan gives the same lineage on either kind of
session (`spark/plan.py` on a classic one).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from dws_dagster.spark.connect.plan_tree import schema_leaves
from dws_dagster.spark.connect.relations import RelationWalker
from dws_dagster.spark.lineage_model import ColumnSource, PlanLineage, plan_inputs, tidy


def connect_plan_lineage(df: DataFrame) -> PlanLineage:
    """Input files and column lineage of a Spark Connect DataFrame (AnalyzePlan requests only,
    no Spark job)."""
    connect: Any = df  # pyspark.sql.connect.dataframe.DataFrame: its private plan
    client = connect.sparkSession.client
    root = connect._plan.to_proto(client).root
    schema = df.schema  # the client keeps it: the root's schema costs no request here
    names = [f.name for f in schema.fields]
    walker = RelationWalker(client)
    walker.server.known(root, schema)
    walker.server.prefetch(list(schema_leaves(root)))
    out = walker.visit(root)
    columns: dict[str, tuple[ColumnSource, ...]]
    if [c.name for c in out.cols] == names:
        columns = {
            name: tidy(walker.lineage[col.key]) for col, name in zip(out.cols, names, strict=True)
        }
    else:
        walker.complete = False
        columns = dict.fromkeys(names, ())
    return PlanLineage(
        inputs=plan_inputs(walker.inputs, walker.types),
        columns=columns,
        dataset=tidy(walker.dataset),
        complete=walker.complete,
    )
