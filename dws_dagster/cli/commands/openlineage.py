"""`openlineage status|deliver|replay`: the outbox of OpenLineage events for catalogs.

The sensor queues events in the workspace store and delivers them with a backoff; these
commands show that outbox, deliver now, or send the archive again (to a new catalog). The
OpenLineage client is imported only when one of them runs.

The three are one module, as DVC keeps `remote add|modify|list` in one: they are the actions
of one verb, none a command alone, and they share the outbox and its transport.
"""

from __future__ import annotations

import argparse
from typing import Any

from dws_dagster.cli.command import Parents, Subparsers, add_command
from dws_dagster.cli.context import open_workspace
from dws_dagster.cli.output import print_json, progress_bar
from dws_dagster.errors import DwsError
from dws_dagster.workspace.definition import Workspace


def add_parser(subparsers: Subparsers, parents: Parents) -> None:
    ol_help = "OpenLineage events for catalogs: outbox status, deliver now, replay the archive"
    p = subparsers.add_parser("openlineage", help=ol_help, description=ol_help)
    ol = p.add_subparsers(dest="ol_command", metavar="ACTION", required=True)
    add_command(
        ol,
        parents,
        "status",
        cmd_ol_status,
        "pending and delivered events, last error, transport",
        formats=True,
    )
    q = add_command(
        ol,
        parents,
        "deliver",
        cmd_ol_deliver,
        "send pending events now (ignores the backoff wait)",
        formats=True,
    )
    q.add_argument(
        "--budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="start no event after this long (default: 60)",
    )
    q.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="give up on an event the catalog has not fully answered after this long, "
        "however slowly it answers; it stays pending (default: 30)",
    )
    q = add_command(
        ol,
        parents,
        "replay",
        cmd_ol_replay,
        "send archived events again, e.g. to a new catalog",
    )
    q.add_argument(
        "--since",
        metavar="WHEN",
        help="only events whose eventTime is at or after WHEN (ISO-8601 date or "
        "datetime; UTC unless it names a zone)",
    )
    q.add_argument("--dry-run", action="store_true", help="only count the events")


def _ol_transport(ws: Workspace) -> tuple[Any, str]:
    from dws_dagster.ol.transport.factory import make_transport

    return make_transport(ws)


def _when(value: Any) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")


def cmd_ol_status(args: argparse.Namespace) -> int:
    from dws_dagster.ol.outbox.durable import Outbox

    ws = open_workspace(args)
    try:
        transport, description = _ol_transport(ws)
        transport.close()
    except DwsError as exc:  # show the outbox anyway: it is what holds the events
        description = f"not usable: {exc}"
    outbox = Outbox(ws)
    status = outbox.status()
    if args.format == "json":
        print_json({"transport": description, **status.to_json()})
        return 0
    print(f"OpenLineage outbox (in the workspace store {status.store})")
    print(f"  transport:  {description}")
    oldest = f" (oldest event {status.oldest_pending_time})" if status.pending else ""
    print(f"  pending:    {status.pending}{oldest}")
    print(f"  delivered:  {status.delivered} (last at {_when(status.last_delivery_at)})")
    if status.attempts:
        print(
            f"  failing:    {status.attempts} attempt(s) in a row; next attempt at "
            f"{_when(status.next_attempt_at)}"
        )
    if status.last_error:
        print(f"  last error: {status.last_error} (at {_when(status.last_error_at)})")
    if status.deliverer:
        print(f"  delivering: {status.deliverer} (lease until {_when(status.lease_until)})")
    return 0


def cmd_ol_deliver(args: argparse.Namespace) -> int:
    from dws_dagster.ol.outbox.durable import Outbox

    ws = open_workspace(args)
    transport, description = _ol_transport(ws)
    try:
        report = Outbox(ws).deliver(
            transport,
            budget_seconds=args.budget,
            ignore_backoff=True,
            deadline_seconds=args.deadline,
        )
    finally:
        transport.close()
    if args.format == "json":
        print_json({"transport": description, **report.to_json()})
    elif report.busy:
        print(f"another process is delivering now; {report.pending} event(s) pending")
    elif report.paused:
        print(f"OpenLineage is disabled ({description}); {report.pending} event(s) pending")
    elif report.failed:
        print(
            f"sent {report.sent} event(s) to {description}, then: {report.last_error}; "
            f"{report.pending} pending, next attempt at {_when(report.next_attempt_at)}"
        )
    else:
        print(f"sent {report.sent} event(s) to {description}; {report.pending} pending")
    return 1 if report.failed else 0


def cmd_ol_replay(args: argparse.Namespace) -> int:
    from dws_dagster.ol.outbox.durable import Outbox
    from dws_dagster.ol.outbox.times import parse_time

    since = parse_time(args.since, what="--since") if args.since else None
    ws = open_workspace(args)
    outbox = Outbox(ws)
    total = outbox.count(since)
    scope = f" since {since.isoformat()}" if since else ""
    if args.dry_run:
        print(f"would replay {total} archived event(s){scope}")
        return 0
    transport, description = _ol_transport(ws)
    bar = progress_bar(total, "replaying", unit="event")
    try:
        sent = outbox.replay(transport, since, progress=lambda event: bar.update(1))
    finally:
        bar.close()
        transport.close()
    print(f"replayed {sent} archived event(s){scope} to {description}")
    return 0
