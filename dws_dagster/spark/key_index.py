"""Which of a range's partition keys each row's string column holds, as SQL that costs each row
one hash and a few array lookups, however many keys the range has.

Spark looks a value up in a literal map by comparing it with every key in turn, and this
expression runs once per row of a whole backfill: for a year of daily keys that added about a
sixth to the write. So the keys are spread over a table by Spark's own `xxhash64` (computed
here with the same algorithm and seed, so the table is built without asking Spark), and a row
compares its value only with the few keys of its cell. Few keys keep the plain map.
"""

from __future__ import annotations

from collections.abc import Sequence

import xxhash

from dws_dagster.spark.sql_quoting import string_literal

#: Up to this many keys, the literal map's scan is as cheap as a hash.
MAP_UP_TO = 8
#: Spark's `xxhash64` seed.
_SPARK_SEED = 42


def key_index_sql(column: str, keys: Sequence[str]) -> str:
    """SQL of the position in `keys` (distinct) of the value of `column` (SQL of a string
    column), null for a value that is none of them."""
    if len(keys) <= MAP_UP_TO:
        pairs = ", ".join(f"{string_literal(k)}, {i}" for i, k in enumerate(keys))
        return f"map({pairs})[{column}]" if keys else "CAST(NULL AS INT)"
    cells = 1 << (2 * len(keys) - 1).bit_length()  # a power of two, at least twice the keys
    table: list[list[int]] = [[] for _ in range(cells)]
    for i, key in enumerate(keys):
        table[spark_xxhash64(key) % cells].append(i)
    cell = f"CAST(pmod(xxhash64({column}), {cells}) AS INT) + 1"
    branches = []
    for depth in range(max(len(found) for found in table)):
        at_depth = [found[depth] if depth < len(found) else None for found in table]
        key_array = ", ".join("NULL" if i is None else string_literal(keys[i]) for i in at_depth)
        index_array = ", ".join("NULL" if i is None else str(i) for i in at_depth)
        branches.append(
            f"WHEN element_at(array({key_array}), {cell}) = {column} "
            f"THEN element_at(array({index_array}), {cell})"
        )
    return f"CASE {' '.join(branches)} END"


def spark_xxhash64(text: str) -> int:
    """Spark's `xxhash64` of a string: XXH64 of its UTF-8 bytes with seed 42, as a signed long."""
    value = xxhash.xxh64_intdigest(text.encode("utf-8"), seed=_SPARK_SEED)
    return value - (1 << 64) if value >= 1 << 63 else value
