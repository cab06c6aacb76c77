"""Keeping Python's cyclic garbage collector off the large structures the store builds.

Reading the lineage builds many small objects at once (parsed JSON records, rows), and the
sensor keeps batches of Dagster records alive across a tick. Each collection of the cyclic
collector walks every tracked object, so long reads and long ticks spend their time walking
objects that form no cycles. Here, in one place, are the two ways the package spares them:
pausing the collector around one read, and freezing what survived so far during a long pass.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building large acyclic structures (parsed
    JSON, rows): each of its collections walks the objects built so far, so the cost of a read
    would grow faster than its size. Parsed JSON forms no reference cycles, so pausing leaves
    no garbage behind.

    On resuming, what was built goes straight to the oldest generation (`gc.freeze()` then
    `gc.unfreeze()`, when nothing else is frozen) rather than being walked by the next young
    collection.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


class GcSparesOlderObjects:
    """Keeps what exists on entry, and what survives each batch of a long pass
    (`spare_survivors()`), out of the cyclic garbage collector's collections until exit
    (`gc.freeze()`; `gc.unfreeze()` on exit). Does nothing when the collector is off or
    something else froze objects.

    The lineage sensor's tick keeps batches of Dagster records alive for a while, which
    promoted them to the oldest generation, so a full collection came every other batch and
    walked the whole process (Dagster's definitions among them). Freezing is a constant-time
    list splice; young collections still run, so cycles made and dropped within a batch are
    freed as before, and frozen objects are still freed by reference counting.
    """

    def __init__(self) -> None:
        self._owned = False

    def __enter__(self) -> GcSparesOlderObjects:
        self._owned = gc.isenabled() and not gc.get_freeze_count()
        if self._owned:
            gc.freeze()
        return self

    def spare_survivors(self) -> None:
        """Spare what exists now too (call between batches)."""
        if self._owned:
            gc.freeze()

    def __exit__(self, *_exc: object) -> None:
        if self._owned:
            gc.unfreeze()
            self._owned = False
