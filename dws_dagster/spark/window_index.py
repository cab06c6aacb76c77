"""Which time window of a range each row falls in, as SQL that costs each row a subtraction, a
division and at most one array lookup, however many windows the range has.

A range of partitions is written in one Spark pass, partitioned by each row's window index, so
this expression runs once per row of the whole backfill. A tree of comparisons (`CASE WHEN v <
start THEN … ELSE … END`, log2(n) deep) gives the same answer, but Spark generates its code as
one method per row whose size grows with the number of windows; past a few windows the JVM no
longer compiles that method, and the write ran at half its speed for a 60-day range. So the
windows are laid on a grid instead: the largest step that divides every bound's distance from
the first start (a day for days and months, an hour where daylight saving time shifts
midnight). A row's grid cell is `(value - first start) DIV step`, and each cell lies wholly in
one window or in none. Equal, adjacent windows are the grid itself (the cell is the index);
otherwise a literal array maps cells to windows.

The answer is the comparison tree's, cell by cell (`tree_index`), so windows that overlap or
are empty in wall-clock time (a daylight-saving change seen through TIMESTAMP_NTZ) get the
index they always got. A grid of more than `MAX_CELLS` cells falls back to the tree.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Literal

#: Column types a time window's bounds are compared with.
Kind = Literal["date", "timestamp", "timestamp_ntz"]
#: The largest cell-to-window array written into the plan: enough for 11 years of daily
#: windows in a daylight-saving time zone (an hourly grid), at about 1.7 s of planning for the
#: largest; a finer grid falls back to the tree.
MAX_CELLS = 100_000

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def window_index_sql(column: str, kind: Kind, windows: Sequence[tuple[object, object]]) -> str:
    """SQL of the index in `windows` ([start, end) pairs, sorted by start) of the window holding
    `column` (SQL of a column of type `kind`), null where none does. Bounds are `datetime.date`
    for "date", aware datetimes (instants) for "timestamp", naive ones (wall-clock times) for
    "timestamp_ntz"."""
    if not windows:
        return "CAST(NULL AS INT)"
    starts = [_units(kind, start) for start, _ in windows]
    ends = [_units(kind, end) for _, end in windows]
    origin = starts[0]
    offsets = [bound - origin for bound in (*starts, *ends)]
    step = math.gcd(*offsets)
    top = max(ends) - origin
    if step <= 0 or min(offsets) < 0 or top // step > MAX_CELLS:
        return _tree_sql(column, kind, windows)
    cells = [tree_index(origin + cell * step, starts, ends) for cell in range(top // step)]
    offset = _offset_sql(column, kind, windows[0][0])
    cell = f"CAST(({offset}) DIV {step} AS INT)"
    if cells == list(range(len(cells))):
        found = cell
    else:
        table = ", ".join("NULL" if i is None else str(i) for i in cells)
        found = f"element_at(array({table}), {cell} + 1)"
    return f"CASE WHEN ({offset}) >= 0 AND ({offset}) < {top} THEN {found} END"


def tree_index(value: int, starts: Sequence[int], ends: Sequence[int]) -> int | None:
    """What the comparison tree (`_tree_sql`) answers for `value`: a bisection on the starts,
    then the leaf's own bounds."""
    lo, hi = 0, len(starts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if value < starts[mid]:
            hi = mid
        else:
            lo = mid
    return lo if starts[lo] <= value < ends[lo] else None


def _units(kind: Kind, moment: object) -> int:
    """A bound as a whole number of the column's units: days, or microseconds since the epoch
    (of the instant for "timestamp", of the wall-clock time read as UTC for "timestamp_ntz")."""
    if kind == "date":
        assert isinstance(moment, dt.date)
        return moment.toordinal()
    assert isinstance(moment, dt.datetime)
    if kind == "timestamp_ntz":
        moment = moment.replace(tzinfo=dt.UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _literal(kind: Kind, moment: object) -> str:
    if kind == "date":
        assert isinstance(moment, dt.date)
        return f"DATE'{moment.isoformat()}'"
    assert isinstance(moment, dt.datetime)
    if kind == "timestamp":
        return f"TIMESTAMP'{moment.isoformat()}'"
    return f"TIMESTAMP_NTZ'{moment.isoformat(sep=' ')}'"


def _offset_sql(column: str, kind: Kind, origin: object) -> str:
    """SQL of the distance from `origin` to the column's value, in the column's units."""
    if kind == "date":
        return f"datediff({column}, {_literal(kind, origin)})"
    if kind == "timestamp":
        return f"unix_micros({column}) - {_units(kind, origin)}"
    return f"timestampdiff(MICROSECOND, {_literal(kind, origin)}, {column})"


def _tree_sql(column: str, kind: Kind, windows: Sequence[tuple[object, object]]) -> str:
    starts = [_literal(kind, start) for start, _ in windows]
    ends = [_literal(kind, end) for _, end in windows]

    def tree(lo: int, hi: int) -> str:
        if hi - lo == 1:
            return f"CASE WHEN {column} >= {starts[lo]} AND {column} < {ends[lo]} THEN {lo} END"
        mid = (lo + hi) // 2
        return f"CASE WHEN {column} < {starts[mid]} THEN {tree(lo, mid)} ELSE {tree(mid, hi)} END"

    return tree(0, len(windows))
