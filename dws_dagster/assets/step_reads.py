"""What each running step has loaded through the IO manager so far: `load_input` adds to it and
checks the step's inputs together (the one-version rule), `handle_output` records them with
each of the step's outputs.

Kept in the process (Dagster runs a step's inputs and outputs in one process), bounded so that
a long-lived process running many steps does not grow without end.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from dws_dagster.workspace.records import now_iso
from dws_dagster.workspace.refs import ResourceRef


@dataclass
class LoadedInput:
    """One input of a step: the upstream asset and the (ref, version) of each partition read."""

    asset: str
    refs: list[tuple[ResourceRef, str]]
    #: The partition key of each of `refs` (None: an unpartitioned asset), so a step writing
    #: a range of partitions records with each the upstream partitions it maps to.
    keys: list[str] | None = None


@dataclass
class StepReads:
    """What one step loaded so far: checked together, recorded with each of its outputs."""

    started: str = field(default_factory=now_iso)
    inputs: dict[str, LoadedInput] = field(default_factory=dict)


_READS: OrderedDict[tuple[str, str], StepReads] = OrderedDict()
_READS_LOCK = threading.Lock()
_MAX_TRACKED_STEPS = 4096


def step_reads(run_id: str, step_key: str) -> StepReads:
    """The reads of one step of one run, made on first use; the least recently used steps are
    forgotten beyond `_MAX_TRACKED_STEPS`."""
    with _READS_LOCK:
        key = (run_id, step_key)
        if key not in _READS:
            _READS[key] = StepReads()
            while len(_READS) > _MAX_TRACKED_STEPS:
                _READS.popitem(last=False)
        _READS.move_to_end(key)
        return _READS[key]
