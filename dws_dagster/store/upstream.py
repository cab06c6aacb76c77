"""Reading the lineage upstream of a ref: the read access every state of the lineage offers
(`LineageView`: the current lineage is a `LineageStore`, a snapshot's a `SnapshotView`), and
the records behind a ref's current version, which both a snapshot's `lineage.json` and the
views walk."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from dws_dagster.store.ref_state import RefState
from dws_dagster.workspace.refs import ResourceRef

if TYPE_CHECKING:
    from dws_dagster.store.lineage_store import LineageStore


class LineageView(Protocol):
    """Read access to one state of the lineage (current, or a snapshot's)."""

    def get(self, ref: ResourceRef | str) -> RefState | None: ...

    def items(self) -> list[tuple[str, RefState]]: ...

    def find_record(self, ref: ResourceRef | str, version: str) -> dict[str, Any] | None: ...

    def readers(self, ref: str) -> list[tuple[str, RefState, dict[str, str]]]:
        """(ref, state, input read) of current records that read `ref` or a ref overlapping
        it."""
        ...

    def ref_history(self, refs: Sequence[str], most: int) -> dict[str, list[dict[str, Any]]]:
        """Up to `most` records of each of `refs` (good and failed), newest first."""
        ...


def upstream_records(
    view: LineageView,
    ref: ResourceRef | str,
    known: Mapping[tuple[str, str], dict[str, Any] | None] | None = None,
) -> list[dict[str, Any]]:
    """Every record behind the current version of `ref` (itself first), for `lineage.json`.
    `known`: records already looked up (`prefetch_upstream`), by (ref, version)."""
    state = view.get(ref)
    if state is None or state.record is None:
        return []
    found: dict[tuple[str, str | None], dict[str, Any]] = {}
    pending = [state.record]
    while pending:
        record = pending.pop()
        key = (record["ref"], record.get("version"))
        if key in found:
            continue
        found[key] = record
        for item in record.get("inputs", ()):
            pair = (item["ref"], item["version"])
            upstream = (
                known[pair] if known is not None and pair in known else view.find_record(*pair)
            )
            if upstream is not None:
                pending.append(upstream)
    return list(found.values())


def prefetch_upstream(
    store: LineageStore, refs: Iterable[str]
) -> dict[tuple[str, str], dict[str, Any] | None]:
    """The records behind the current versions of `refs`, by (ref, version), read a level of
    the graph at a time (None: no record): `upstream_records` of many refs then asks the
    database a few times instead of once per record."""
    known: dict[tuple[str, str], dict[str, Any] | None] = {}
    records = [
        state.record
        for state in store.states_in(None, list(refs)).values()
        if state.record is not None
    ]
    while records:
        wanted = list(
            dict.fromkeys(
                (item["ref"], item["version"])
                for record in records
                for item in record.get("inputs", ())
                if (item["ref"], item["version"]) not in known
            )
        )
        if not wanted:
            break
        found = store.find_records(wanted)
        for pair in wanted:
            known[pair] = found.get(pair)
        records = list(found.values())
    return known
