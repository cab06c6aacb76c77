"""Datetimes of OpenLineage events and of the outbox's rows, in one place.

Two policies for a datetime without a time zone, named apart so that neither is mistaken for
the other:

- the event builders refuse one (`require_aware`, `iso_utc`): a run id and an `eventTime`
  must not depend on the zone of the machine that built them, so the caller is told which
  field to fix;
- the outbox reads one as UTC (`assume_utc`): it parses times that people type (`--since`)
  and that it wrote itself, where UTC is the only sensible reading.
"""

from __future__ import annotations

import datetime as dt

from dws_dagster.errors import EventBuildError

__all__ = ["assume_utc", "iso_or_none", "iso_utc", "require_aware", "utc_now"]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def require_aware(value: dt.datetime, what: str) -> dt.datetime:
    """`value` itself, refused (EventBuildError naming `what`) unless an aware datetime."""
    if not isinstance(value, dt.datetime):
        raise EventBuildError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise EventBuildError(
            f"{what} ({value.isoformat()}) has no time zone; give an aware datetime "
            "(e.g. datetime.fromtimestamp(ts, tz=timezone.utc)) so ids and times do not "
            "depend on the machine's zone"
        )
    return value


def iso_utc(value: dt.datetime, what: str) -> str:
    """An event's time as RFC 3339 in UTC, as the spec's `date-time` format wants; a naive
    `value` is refused (see `require_aware`)."""
    return require_aware(value, what).astimezone(dt.UTC).isoformat()


def assume_utc(value: dt.datetime) -> dt.datetime:
    """`value`, read as UTC when it has no time zone."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def iso_or_none(value: dt.datetime | None) -> str | None:
    """ISO-8601 text to the microsecond, in `value`'s own zone; None stays None (an optional
    time of the outbox's state or reports)."""
    return None if value is None else value.isoformat(timespec="microseconds")
