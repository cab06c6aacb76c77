"""The files and folders a Spark Connect DataFrame reads by path, without column lineage: what
the IO manager records as a step's inputs when it derives no column lineage (the paths a
classic session's file relations would give, so an input is the same on either kind).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from dws_dagster.spark.connect.plan_tree import repeated
from dws_dagster.spark.lineage_model import PlanInput, PlanLineage
from dws_dagster.spark.plan_paths import client_path, format_name
from dws_dagster.spark.session_kind import is_connect


def connect_read_paths(df: DataFrame) -> PlanLineage | None:
    """On a Spark Connect DataFrame, the files and folders its plan reads by path (inputs
    only: no column lineage, `complete` false); None on a classic one.

    Read from the client's own plan (`df._plan`, the `spark.connect.Relation` protobuf sent to
    the server; no call to it): its `Read.DataSource` nodes hold the paths as the body gave
    them, as the classic plan's file relations hold them as root paths. Tables, and SQL text
    that reads files (FROM parquet.`path`), are not seen. Anything unexpected in the client's
    private plan gives None: the inputs loaded through the IO manager are recorded anyway."""
    if not is_connect(df):
        return None
    try:
        from google.protobuf.message import Message

        connect: Any = df  # pyspark.sql.connect.dataframe.DataFrame: its private plan
        root = connect._plan.to_proto(connect.sparkSession.client)
        found: dict[str, str | None] = {}
        pending: list[Message] = [root]
        while pending:
            message = pending.pop()
            if message.DESCRIPTOR.full_name == "spark.connect.Read.DataSource":
                for raw in message.paths:
                    found.setdefault(client_path(raw), format_name(message.format))
            for descriptor, value in message.ListFields():
                values = value if repeated(descriptor) else [value]
                pending.extend(item for item in values if isinstance(item, Message))
    except Exception:
        return None
    return PlanLineage(
        inputs=tuple(PlanInput(path, fmt, ()) for path, fmt in sorted(found.items())),
        columns={},
        dataset=(),
        complete=False,
    )
