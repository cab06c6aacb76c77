"""How the outbox names damage to its own rows: a row no spooler or deliverer could have
written (the database edited by hand, or restored from another version) is a
`WorkspaceConfigError` naming the row and how to recover, as for any damaged data of the
workspace (a caller's mistake is an `OutboxError`).
"""

from __future__ import annotations

from typing import Any

from dws_dagster.errors import WorkspaceConfigError

#: How to recover from a damaged row of `dws_ol_events`, said with every such damage found.
EVENT_ADVICE = (
    "delete that row of dws_ol_events (its event is then never sent), or restore the store "
    "from a backup"
)
#: How to recover from a damaged `dws_ol_delivery` row.
DELIVERY_ADVICE = (
    "delete the workspace's row of dws_ol_delivery (it is made again; only the count of "
    "delivered events and the last error are lost), or restore the store from a backup"
)


def damaged_event(shown: str, event_id: Any, problem: str) -> WorkspaceConfigError:
    """The error for a `dws_ol_events` row no spooler could have written."""
    return WorkspaceConfigError(
        f"workspace store {shown}: OpenLineage outbox event {event_id} (a row of "
        f"dws_ol_events) is damaged: {problem}; {EVENT_ADVICE}"
    )


def damaged_delivery(shown: str, ws_id: int, problem: str) -> WorkspaceConfigError:
    """The error for a `dws_ol_delivery` row no deliverer could have written."""
    return WorkspaceConfigError(
        f"workspace store {shown}: the OpenLineage outbox's delivery state (the row of "
        f"workspace {ws_id} in dws_ol_delivery) is damaged: {problem}; {DELIVERY_ADVICE}"
    )


def quoted(value: Any, chars: int = 40) -> str:
    """A damaged value as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= chars else text[: chars - 1] + "…"
