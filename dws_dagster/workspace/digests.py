"""Compact keys for in-memory indexes that grow with history (the lineage store's index of past
records, the outbox's index of spooled events).

A 128-bit digest is one Python int (44 bytes) where the strings it stands for, in a tuple,
cost 200–300: the indexes of a long-lived sensor then grow by a few megabytes per 100,000
materializations instead of tens. At 128 bits, two keys colliding is not a practical concern
(about 10^-20 after 10^9 keys).
"""

from __future__ import annotations

import orjson
import xxhash

#: Journal positions are packed as segment << POSITION_BITS | byte offset.
POSITION_BITS = 48


def key_digest(*parts: str | None) -> int:
    """The digest of a tuple of strings (None distinct from every string)."""
    return xxhash.xxh3_128_intdigest(orjson.dumps(parts))


def pack_position(segment: int, offset: int) -> int:
    """One int for a (segment number, byte offset) pair."""
    return segment << POSITION_BITS | offset


def unpack_position(position: int) -> tuple[int, int]:
    return position >> POSITION_BITS, position & ((1 << POSITION_BITS) - 1)
