"""Finding relations in a Spark Connect client's plan (`spark.connect.Relation` protobuf
messages) without knowing every kind of node: through the messages' own field descriptors, so
that a node kind this package does not know still has its children walked (their reads are
inputs) and its leaves' schemas asked for ahead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def repeated(descriptor: Any) -> bool:
    """Whether a protobuf field holds a list (`is_repeated` in newer protobuf releases, which
    deprecate `label`)."""
    flag = getattr(descriptor, "is_repeated", None)
    if isinstance(flag, bool):
        return flag
    return bool(descriptor.label == descriptor.LABEL_REPEATED)


def child_relations(rel: Any) -> Iterator[Any]:
    """The relations directly under a node of a kind the walk does not know."""
    from google.protobuf.message import Message

    kind = rel.WhichOneof("rel_type")
    if kind is None:
        return
    node = getattr(rel, kind)
    pending: list[Message] = [node]
    while pending:
        message = pending.pop()
        for descriptor, value in message.ListFields():
            values = value if repeated(descriptor) else [value]
            for item in values:
                if not isinstance(item, Message):
                    continue
                if item.DESCRIPTOR.full_name == "spark.connect.Relation":
                    yield item
                else:
                    pending.append(item)


def schema_leaves(rel: Any) -> Iterator[Any]:
    """Nodes whose schema the walk will ask for in any case (reads and other leaves)."""
    kind = rel.WhichOneof("rel_type")
    children = list(child_relations(rel))
    if kind in ("read", "sql", "local_relation", "cached_local_relation"):
        yield rel
    for child in children:
        yield from schema_leaves(child)
