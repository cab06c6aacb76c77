"""What a Spark Connect walk asks the server: the schemas of sub-plans (`AnalyzePlan`
requests, no Spark job), each asked once per plan and those of the leaves in parallel (the
server analyzes them at once).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql.types import StructType

from dws_dagster.spark.connect.column_resolution import UnknownNode

#: Parallel schema requests for the leaves of one plan (the server analyzes them at once).
_SCHEMA_WORKERS = 4


class ServerSchemas:
    """The schemas of a plan's sub-plans, from the server of `client`, keyed by the sub-plan's
    serialized protobuf; None for a sub-plan the server did not analyze on its own."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.schemas: dict[bytes, StructType | None] = {}

    def known(self, rel: Any, schema: StructType) -> None:
        """`rel`'s schema, known without asking (the root's, which the client keeps)."""
        self.schemas[self.key(rel)] = schema

    def key(self, rel: Any) -> bytes:
        return bytes(rel.SerializeToString(deterministic=True))

    def _ask(self, rel: Any) -> StructType | None:
        from pyspark.sql.connect.proto import base_pb2

        plan = base_pb2.Plan()
        plan.root.CopyFrom(rel)
        try:
            schema = self.client.schema(plan)
        except Exception:  # a part of the plan the server does not analyze on its own
            return None
        return schema if isinstance(schema, StructType) else None

    def prefetch(self, rels: Sequence[Any]) -> None:
        """Schemas of `rels` in parallel requests (those not asked yet)."""
        wanted = {}
        for rel in rels:
            key = self.key(rel)
            if key not in self.schemas:
                wanted[key] = rel
        if len(wanted) == 1:
            ((key, rel),) = wanted.items()
            self.schemas[key] = self._ask(rel)
        elif wanted:
            with ThreadPoolExecutor(min(_SCHEMA_WORKERS, len(wanted))) as pool:
                for key, schema in zip(wanted, pool.map(self._ask, wanted.values()), strict=True):
                    self.schemas[key] = schema

    def schema(self, rel: Any) -> StructType:
        key = self.key(rel)
        if key not in self.schemas:
            self.schemas[key] = self._ask(rel)
        schema = self.schemas[key]
        if schema is None:
            raise UnknownNode("the server gave no schema for a part of the plan")
        return schema
