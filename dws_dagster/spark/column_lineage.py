"""Column lineage of a DataFrame from its plan, on either kind of Spark session: the classic
session's analyzed plan (`spark/plan.py`) or the client's plan of a Spark Connect session
(`spark/connect/`). Both walkers give the same `PlanLineage` for the same plan; this is the
one place that picks between them, so neither imports the other.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from dws_dagster.spark.connect.client_plan import connect_plan_lineage
from dws_dagster.spark.lineage_model import PlanLineage
from dws_dagster.spark.plan import analyzed_plan_lineage
from dws_dagster.spark.session_kind import is_connect


def plan_lineage(df: DataFrame) -> PlanLineage:
    """Input files and column lineage of `df`, read from its plan (no Spark job)."""
    if is_connect(df):
        return connect_plan_lineage(df)
    return analyzed_plan_lineage(df)
