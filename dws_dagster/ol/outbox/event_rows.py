"""One event as the outbox keeps it: the columns of its `dws_ol_events` row, taken from a
RunEvent that is checked before it is spooled (`event_row`), and the RunEvent read back from a
row, checked against the columns it was stored under before it is sent (`checked_event`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from dws_dagster.errors import OutboxError
from dws_dagster.ol.outbox.damaged_rows import damaged_event, quoted
from dws_dagster.ol.outbox.times import parse_time, time_key

#: `dws_ol_events.event_type` is a String(16): OpenLineage's types are at most 8 characters.
MAX_EVENT_TYPE_CHARS = 16

Key = tuple[str, str]


def event_key(event: Mapping[str, Any]) -> Key:
    """What makes two events the same for the outbox: (run.runId, eventType)."""
    run = event.get("run")
    return (
        str(run.get("runId")) if isinstance(run, Mapping) else "",
        str(event.get("eventType", "")),
    )


def describe_event(event: Mapping[str, Any]) -> str:
    """An event as error messages name it."""
    run_id, event_type = event_key(event)
    return f"run {run_id} {event_type} ({event.get('eventTime')})"


def key_columns(event: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The `run_id`, `event_type` and `event_time` columns an event is stored under, and the
    names of the fields that cannot give them (missing or invalid)."""
    columns: dict[str, str] = {}
    problems = []
    run: Any = event.get("run")
    run_id = run.get("runId") if isinstance(run, Mapping) else None
    if isinstance(run_id, str) and run_id:
        columns["run_id"] = run_id
    else:
        problems.append("run.runId")
    event_type = event.get("eventType")
    if isinstance(event_type, str) and event_type and len(event_type) <= MAX_EVENT_TYPE_CHARS:
        columns["event_type"] = event_type
    else:
        problems.append("eventType")
    when = event.get("eventTime")
    try:
        if not isinstance(when, str):
            raise OutboxError("not text")
        columns["event_time"] = time_key(parse_time(when))
    except (OutboxError, ValueError, OverflowError):
        problems.append("eventTime")
    return columns, problems


def event_row(event: Any, index: int = 0) -> dict[str, Any]:
    """Validate one event and give its `dws_ol_events` columns (no workspace, no spool time):
    `run_id`, `event_type`, `event_time` (see `time_key`) and `body` (JSON, sorted keys)."""
    if not isinstance(event, Mapping):
        raise OutboxError(
            f"event #{index} is a {type(event).__name__}, not an OpenLineage "
            "RunEvent dict; pass the dicts the event builders return"
        )
    columns, problems = key_columns(event)
    if problems:
        raise OutboxError(
            f"event #{index} cannot be spooled: missing or invalid {', '.join(problems)}; the "
            "outbox takes OpenLineage RunEvents with run.runId, an eventType (at most "
            f"{MAX_EVENT_TYPE_CHARS} characters) and an ISO-8601 eventTime"
        )
    try:
        body = orjson.dumps(dict(event), option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise OutboxError(
            f"event #{index} ({describe_event(event)}) is not JSON: {exc}; pass plain "
            "JSON data (strings, numbers, lists, dicts)"
        ) from None
    return {**columns, "body": body.decode()}


def checked_event(row: Sequence[Any], shown: str) -> dict[str, Any]:
    """The event of a `dws_ol_events` row (`EVENT_COLUMNS` and the body), checked like any file
    of the workspace: the database can be edited by hand, or restored from another version,
    and what is sent to a catalog must be the RunEvent that was spooled. A body that is not
    one, or that disagrees with the columns it was stored under, is damage
    (`WorkspaceConfigError` naming the row; `shown` names the store)."""
    event_id, run_id, event_type, event_time, body = row
    if type(body) is not str:
        raise damaged_event(shown, event_id, f"its body is not text ({quoted(body)})")
    try:
        event = orjson.loads(body)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        raise damaged_event(shown, event_id, f"its body is not a JSON object ({quoted(body)})")
    columns, problems = key_columns(event)
    if problems:
        raise damaged_event(
            shown,
            event_id,
            f"its body is not an OpenLineage RunEvent (missing or invalid {', '.join(problems)})",
        )
    stored = {"run_id": run_id, "event_type": event_type, "event_time": event_time}
    for name, value in stored.items():
        if value != columns[name]:
            raise damaged_event(
                shown,
                event_id,
                f"its {name} column {quoted(value)} is not its body's ({quoted(columns[name])})",
            )
    return event
