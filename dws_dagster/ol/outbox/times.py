"""The times the outbox reads and stores as text: what a user or the delivery row gives (ISO
8601, a date meaning its midnight, no zone meaning UTC), and each event's time as its row
keeps it, in a form whose text order is the instants' order.
"""

from __future__ import annotations

import datetime as dt

from dws_dagster.errors import OutboxError
from dws_dagster.ol.timestamps import assume_utc


def parse_time(text: str, *, what: str = "time") -> dt.datetime:
    """An aware datetime from ISO-8601 text: a date means its midnight, no zone means UTC."""
    try:
        value = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise OutboxError(
            f"{what}: {text!r} is not an ISO-8601 date or datetime; write it like 2026-05-01 or "
            "2026-05-01T12:00:00+00:00"
        ) from None
    return assume_utc(value)


def parse_time_or_none(text: str | None) -> dt.datetime | None:
    """A time of the delivery state (`iso_or_none` text), None staying None."""
    return None if text is None else parse_time(text)


def time_key(value: dt.datetime) -> str:
    """`value` as stored in `dws_ol_events.event_time`: UTC, fixed width, so that comparing
    the text compares the instants (`events(since)` filters in the database)."""
    return assume_utc(value).astimezone(dt.UTC).isoformat(timespec="microseconds")
