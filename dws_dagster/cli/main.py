"""`dws-dagster`: the workspace from the command line.

Only the workspace layer is imported here, never dagster or pyspark, so lineage and status
commands start fast.

No failure prints a traceback: each is one line on stderr and an exit code: 1 for a refusal
(`DwsError`) or a file the system would not read or write (named, with what to do), 2 for a
command line argparse rejects, 130 for Ctrl-C, and 70 (EX_SOFTWARE) for an internal error,
a bug to report; `DWS_DEBUG=1` in the environment prints its traceback too. `status --verify`
exits 3 when refs need attention (data changed outside steps, missing, failed or unknown
refs), after printing what to run; 0 when the data is what the lineage says.
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from dws_dagster.errors import DwsError, WorkspaceConfigError, WorkspaceNotFoundError
from dws_dagster.workspace.files import first_os_error, write_error, writing
from dws_dagster.workspace.snapshots.remote import LazyRemoteData, RemoteData
from dws_dagster.workspace.store.lineage_store import attention_note, gc_paused
from dws_dagster.workspace.versions import DataNotFoundError, short
from dws_dagster.workspace.workspace import (
    RESTORE_INTENT_FILE,
    ROLES,
    VERSIONING_MODES,
    WORKSPACE_DIR,
    RemoteDataError,
    Workspace,
)

Handler = Callable[[argparse.Namespace], int]

#: Exit codes besides 0, 1 (refused) and 2 (bad command line, from argparse).
#: `status --verify` found refs that need attention (drift, missing data, failed, unknown).
EXIT_ATTENTION = 3
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _open(args: argparse.Namespace) -> Workspace:
    """The workspace `--workspace DIR` names (DIR must be its root: the flag names THE
    workspace, so a wrong DIR is never silently replaced by one enclosing it), else the
    nearest one at or above the current folder."""
    if args.workspace is None:
        return Workspace.open()
    root = Path(args.workspace).absolute()
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise WorkspaceNotFoundError(
            f"--workspace {root} {what}: pass the root folder of a workspace (the one holding "
            f"{WORKSPACE_DIR}/), or create one with 'dws-dagster init {root}'"
        )
    try:
        return Workspace.open(root, search_parents=False)
    except WorkspaceNotFoundError:
        try:
            enclosing: Path | None = Workspace.find_root(root.parent)
        except WorkspaceNotFoundError:
            enclosing = None
        hint = (
            f"; it is inside the workspace at {enclosing}: pass --workspace {enclosing}"
            if enclosing is not None
            else f"; create one with 'dws-dagster init {root}'"
        )
        raise WorkspaceNotFoundError(
            f"--workspace {root} is not a workspace (no {WORKSPACE_DIR}/config.json){hint}"
        ) from None


def _progress(total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, disable=None, **kwargs
    )


# ---------------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.store.database import database_for
    from dws_dagster.workspace.store.settings import resolve, store_entry

    entry = None
    if args.store:
        entry = store_entry(
            args.store, password_env=args.store_password_env, schema=args.store_schema
        )
        # Reached before anything is written: a wrong URL or password leaves no workspace.
        root = Path(args.directory).absolute()
        database_for(resolve(root / ".dataworkspace", entry)).ensure_schema()
    elif args.store_password_env or args.store_schema:
        raise WorkspaceConfigError("--store-password-env and --store-schema go with --store URL")
    ws = Workspace.init(args.directory, name=args.name, store=entry)
    ws.store.workspace_id  # noqa: B018  (registers the workspace in its store now)
    print(f"initialised workspace '{ws.name}' in {ws.root}")
    print(f"lineage store: {ws.store.shown}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    ws = _open(args)
    resource = ws.add_resource(
        args.name,
        args.role,
        path=args.path,
        uri=args.uri,
        versioning=args.versioning,
        description=args.description or "",
    )
    print(f"added {resource.role} resource '{resource.name}' at {resource.location}")
    return 0


def _status_rows(ws: Workspace, verify: bool) -> list[dict[str, Any]]:
    from dws_dagster.workspace.views.status_report import source_rows

    rows = []
    items = ws.store.summaries()
    for item in items:
        ref, state = item.ref, item.state
        row: dict[str, Any] = {
            "ref": ref,
            "version": item.version,
            "status": item.status,
            "step": item.owner,
            "finished": item.finished,
        }
        if state is not None and state.attempt is not None:
            row["error"] = state.attempt.get("error")
        if state is not None:
            row["attention"] = attention_note(ref, state)
        rows.append(row)
    rows += source_rows(ws.store.read_without_lineage(), [item.ref for item in items])
    rows.sort(key=lambda row: row["ref"])
    if verify:
        bar = _progress(len(rows), "verifying")
        try:
            for row in rows:
                _verify(ws, row)
                bar.update(1)
        finally:
            bar.close()
    return rows


def _verify(ws: Workspace, row: dict[str, Any]) -> None:
    """`data`: whether the data of the row's ref is the version its lineage says (`matches`),
    another one (`changed`, with the version `found`), gone (`missing`), or could not be
    read (`unchecked`). Readers of source data that changed are looked up (`read_by`), to
    say what to re-run."""
    try:
        actual = ws.version_of(row["ref"])
    except DataNotFoundError:
        actual = None
    except (RemoteDataError, DwsError):
        actual = "unchecked"
    row["data"] = (
        "unchecked"
        if actual == "unchecked"
        else "missing"
        if actual is None
        else "matches"
        if actual == row["version"]
        else "changed"
    )
    if row["data"] == "changed":
        row["found"] = actual
        if row["step"] is None and "read_by" not in row:  # observed source data
            row["read_by"] = [
                {"ref": reader, "step": state.owner}
                for reader, state, _ in ws.store.readers(row["ref"])
            ]


def cmd_status(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.views.status_report import StatusReport

    ws = _open(args)
    if (ws.meta_dir / RESTORE_INTENT_FILE).exists():
        from dws_dagster.workspace.snapshots.restore import finish_interrupted_restore

        if finish_interrupted_restore(ws, _remote_data()):
            print(
                "finished a restore that was interrupted (see 'dws-dagster history')",
                file=sys.stderr,
            )
    rows = _status_rows(ws, args.verify)
    report = StatusReport(rows, verified=args.verify)
    code = EXIT_ATTENTION if args.verify and report.verdict != "clean" else 0
    resources = []
    for res in ws.resources.values():
        count = sum(1 for row in rows if row["ref"].split("/", 1)[0] == res.name)
        resources.append({**res.to_json(), "refs": count})
    if args.format == "json":
        _print_json(
            {
                "workspace": ws.name,
                "root": str(ws.root),
                "store": {"url": ws.store.shown, "from": ws.store_settings.origin},
                "resources": resources,
                "refs": rows,
                **report.to_json(),
                "exit_code": code,
            }
        )
        return code
    print(f"Workspace {ws.name} ({ws.root})")
    print(f"Lineage store: {ws.store.shown} (from {_origin(ws.store_settings.origin)})")
    print("\nResources:")
    if not resources:
        print("  (none: add one with 'dws-dagster add')")
    for shown in resources:
        print(
            f"  {shown['name']:<20} {shown['role']:<18} {shown.get('path') or shown.get('uri')}"
            f"  [{shown['refs']} ref{'s' if shown['refs'] != 1 else ''}]"
        )
    print("\nRefs:")
    for line in report.refs_lines(expand=args.expand):
        print(line)
    lines = report.lines(expand=args.expand)
    if lines:
        print()
    for line in lines:
        print(line)
    return code


def _origin(origin: str) -> str:
    return {
        "default": "the default",
        "config.json": ".dataworkspace/config.json",
        "DWS_STORE_URL": "$DWS_STORE_URL",
    }.get(origin, origin)


def cmd_lineage(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef
    from dws_dagster.workspace.snapshots.history import resolve_snapshot, snapshot_manifest
    from dws_dagster.workspace.views import render
    from dws_dagster.workspace.views.graph import SnapshotView, build_graph
    from dws_dagster.workspace.views.lineage_text import render_grouped_text

    ws = _open(args)
    ref = ws.check_ref(ResourceRef.parse(args.ref))
    roles = {name: res.role for name, res in ws.resources.items()}
    if args.snapshot:
        info = resolve_snapshot(ws, args.snapshot)
        view: Any = SnapshotView(snapshot_manifest(ws, info.hash), ws.store)
        graph = build_graph(view, ref, roles, snapshot=info.name)
    else:
        graph = build_graph(ws.store, ref, roles)
    renderers: dict[str, Callable[[Any], Any]] = {
        "text": render.render_text if args.expand else render_grouped_text,
        "dot": render.render_dot,
        "mermaid": render.render_mermaid,
        "html": render.render_html,
    }
    if args.format == "json":
        output = orjson.dumps(render.render_json(graph), option=orjson.OPT_INDENT_2).decode()
    else:
        output = renderers[args.format](graph)
    if args.output:
        with writing(args.output):
            Path(args.output).write_text(
                output + ("" if output.endswith("\n") else "\n"), encoding="utf-8"
            )
        print(f"wrote {args.format} lineage of {ref} to {args.output}")
    else:
        sys.stdout.write(output + ("" if output.endswith("\n") else "\n"))
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.retention import describe as describe_retention
    from dws_dagster.workspace.snapshots.snapshots import take_snapshot

    ws = _open(args)
    outcome = take_snapshot(ws, args.tag, args.message or "", remote=_remote_data())
    info = outcome.info
    if args.format == "json":
        # `created` is the snapshot's time (from `to_json`): whether this call took it is
        # `new_snapshot`.
        retention = outcome.retention
        _print_json(
            {
                **info.to_json(),
                "new_snapshot": outcome.created,
                "tag_added": outcome.tag_added,
                "warnings": outcome.warnings,
                "drift": outcome.drift,
                "retention": None if retention is None else vars(retention),
            }
        )
        return 0
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if outcome.created:
        tags = f" tagged {', '.join(info.tags)}" if info.tags else ""
        print(f"took snapshot {info.hash[:12]}{tags}")
        for entry in info.results:
            print(f"  archived results {entry['ref']} in {entry['folder']}/ (with lineage.json)")
        if info.metrics:
            print("  metrics: " + ", ".join(f"{k}={v}" for k, v in info.metrics.items()))
        if outcome.retention is not None:
            print(f"  data retained: {describe_retention(outcome.retention)}")
        for ref in outcome.drift:
            print(f"  drift: {ref} changed outside any step (recorded as found)")
    elif outcome.tag_added:
        print(f"nothing changed since snapshot {info.hash[:12]}; added tag {args.tag} to it")
    else:
        print(f"nothing changed since snapshot {info.name} ({info.hash[:12]}); nothing written")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.restore import restore_snapshot

    ws = _open(args)
    bar = _progress(None, "restoring", unit="ref")
    try:
        report = restore_snapshot(
            ws,
            args.snapshot,
            progress=lambda ref: bar.update(1),
            partial=args.partial,
            code=args.code,
            remote=_remote_data(),
        )
    finally:
        bar.close()
    if args.format == "json":
        _print_json(
            {
                "snapshot": report.info.to_json(),
                "lineage_restored": report.lineage_restored,
                "lineage_removed": report.lineage_removed,
                "data_unchanged": report.data_unchanged,
                "data_restored": report.data_restored,
                "not_restored": [{"ref": r, "reason": why} for r, why in report.not_restored],
                "code_left": [{"ref": r, "reason": why} for r, why in report.code_left],
            }
        )
        return 0
    print(
        f"restored snapshot {report.info.name} ({report.info.hash[:12]}): lineage of "
        f"{len(report.lineage_restored)} ref(s); data of {len(report.data_restored)} "
        f"brought back, {len(report.data_unchanged)} already as it was"
    )
    for ref in report.data_restored:
        print(f"  data restored:  {ref}")
    for ref in report.data_unchanged:
        print(f"  data unchanged: {ref}")
    for ref in report.lineage_removed:
        print(f"  lineage removed (not in snapshot): {ref}")
    for ref, why in report.not_restored:
        print(f"  NOT restored:   {ref}: marked unknown: {why}")
    for ref, why in report.code_left:
        print(f"  code left as is: {ref}: {why}")
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.garbage import collect_garbage

    ws = _open(args)
    report = collect_garbage(ws, dry_run=args.dry_run, remote=_remote_data())
    if args.format == "json":
        _print_json(
            {
                "dry_run": report.dry_run,
                "versions": [{"ref": r, "version": v} for r, v in report.versions],
                "objects": report.objects,
                "bytes_freed": report.bytes_freed,
                "still_linked": report.still_linked,
                "leftovers": [str(p) for p in report.leftovers],
                "unnamed_results_copies": [str(p) for p in report.results_copies],
                "remote_versions": [{"ref": r, "version": v} for r, v in report.remote_versions],
            }
        )
        return 0
    verb = "would free" if report.dry_run else "freed"
    print(
        f"{verb} {len(report.versions)} retained version(s) no snapshot references: "
        f"{report.objects} file(s), {_bytes(report.bytes_freed)}"
        + (
            f" ({report.still_linked} still hard-linked from the workspace free nothing)"
            if report.still_linked
            else ""
        )
    )
    for ref, version in report.versions[:20]:
        print(f"  {ref}@{version[:12]}")
    if len(report.versions) > 20:
        print(f"  ... and {len(report.versions) - 20} more")
    if report.leftovers:
        print(
            f"{'would remove' if report.dry_run else 'removed'} {len(report.leftovers)} "
            "leftover(s) of interrupted work"
        )
    for path in report.results_copies:
        print(
            f"not named by any snapshot (left by an interrupted snapshot?): {path}; delete "
            "it if it is not yours"
        )
    if report.remote_versions:
        print(
            f"{verb} {len(report.remote_versions)} kept remote version(s) no snapshot "
            "references (beyond each writer's keep_versions):"
        )
        for ref, version in report.remote_versions[:20]:
            print(f"  {ref}@{version[:12]}")
        if len(report.remote_versions) > 20:
            print(f"  ... and {len(report.remote_versions) - 20} more")
    return 0


def _remote_data() -> LazyRemoteData:
    """Remote data through Spark's Hadoop filesystems, started only if a remote ref needs it
    (this module imports no pyspark: commands over local data start no JVM)."""

    def hadoop() -> RemoteData:
        from dws_dagster.spark.remote_data import hadoop_data

        return hadoop_data()

    return LazyRemoteData(hadoop)


def _bytes(size: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} bytes"


def cmd_diff(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.diff import diff_lineage
    from dws_dagster.workspace.snapshots.history import CURRENT, resolve_snapshot
    from dws_dagster.workspace.views.diff_text import diff_text

    ws = _open(args)
    changes = diff_lineage(ws, args.a, args.b)
    if args.format == "json":
        _print_json([{"ref": c.ref, "kind": c.kind, "changes": c.changes} for c in changes])
        return 0
    if not changes:
        print(f"no differences between {args.a} and {args.b}")
        return 0

    def owners(name: str) -> list[tuple[str, str | None]]:
        return ws.store.owners(None if name == CURRENT else resolve_snapshot(ws, name).hash)

    for line in diff_text(changes, owners(args.a), owners(args.b), expand=args.expand):
        print(line)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.history import list_snapshots

    ws = _open(args)
    infos = list(reversed(list_snapshots(ws)))
    if args.format == "json":
        _print_json([info.to_json() for info in infos])
        return 0
    if not infos:
        print("no snapshots yet: take one with 'dws-dagster snapshot TAG'")
    for info in infos:
        tags = ",".join(info.tags) or "-"
        metrics = " ".join(f"{k}={v}" for k, v in (info.metrics or {}).items())
        print(
            f"{info.hash[:12]}  {info.created:<25}  {tags:<16}  {info.message}"
            f"{'  ' + metrics if metrics else ''}"
        )
    return 0


def cmd_delete_snapshot(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.snapshots.history import delete_snapshot

    ws = _open(args)
    done = delete_snapshot(ws, args.snapshot, remove_results=args.remove_results)
    info = done.info
    if done.removed_tag is not None:
        kept = " (its results copies stay with it)" if args.remove_results else ""
        print(
            f"removed tag {done.removed_tag} from snapshot {info.hash[:12]} (still tagged "
            f"{', '.join(info.tags)}){kept}"
        )
    else:
        print(f"deleted snapshot {info.name} ({info.hash[:12]})")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef

    ws = _open(args)
    ref = ws.check_ref(ResourceRef.parse(args.ref))
    if ws.store.forget(ref):
        print(f"forgot the lineage of {ref}; its data is untouched")
    else:
        print(f"{ref} has no lineage; nothing to forget")
    return 0


def cmd_observe(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef

    ws = _open(args)
    outcome = ws.store.observe_source(ResourceRef.parse(args.ref))
    if args.format == "json":
        _print_json(
            {
                "ref": outcome.ref,
                "version": outcome.version,
                "recorded": outcome.recorded,
                "was_unknown": outcome.was_unknown,
            }
        )
    elif outcome.recorded:
        cleared = "; it is no longer unknown" if outcome.was_unknown else ""
        print(
            f"recorded {outcome.ref}@{short(outcome.version)} as the lineage of that source "
            f"data{cleared}"
        )
    else:
        print(
            f"{outcome.ref}@{short(outcome.version)} is already its recorded lineage; "
            "nothing written"
        )
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    from dws_dagster.workspace.refs import ResourceRef
    from dws_dagster.workspace.versions import data_size

    ws = _open(args)
    ref = ws.check_ref(ResourceRef.parse(args.ref))
    path = ws.local_path(ref)
    # Files that are not data are told once, by the version below.
    total = data_size(path, on_skip=lambda message: None) if path.exists() else None
    bar = _progress(total, f"hashing {ref}", unit="B", unit_scale=True)
    try:
        version = ws.version_of(ref, progress=bar.update)
    finally:
        bar.close()
    state = ws.store.get(ref)
    recorded = state.version if state is not None else None
    if args.format == "json":
        _print_json({"ref": str(ref), "version": version, "recorded": recorded})
    else:
        note = (
            ""
            if recorded is None
            else (
                " (matches its lineage)" if recorded == version else f" (lineage says {recorded})"
            )
        )
        print(f"{ref}@{version}{note}")
    return 0


def _ol_transport(ws: Workspace) -> tuple[Any, str]:
    from dws_dagster.ol.transport import make_transport

    return make_transport(ws)


def _when(value: Any) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")


def cmd_ol_status(args: argparse.Namespace) -> int:
    from dws_dagster.ol.outbox import Outbox

    ws = _open(args)
    try:
        transport, description = _ol_transport(ws)
        transport.close()
    except DwsError as exc:  # show the outbox anyway: it is what holds the events
        description = f"not usable: {exc}"
    outbox = Outbox(ws)
    status = outbox.status()
    if args.format == "json":
        _print_json({"transport": description, **status.to_json()})
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
    from dws_dagster.ol.outbox import Outbox

    ws = _open(args)
    transport, description = _ol_transport(ws)
    try:
        report = Outbox(ws).deliver(transport, budget_seconds=args.budget, ignore_backoff=True)
    finally:
        transport.close()
    if args.format == "json":
        _print_json({"transport": description, **report.to_json()})
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
    from dws_dagster.ol.outbox import Outbox, parse_time

    since = parse_time(args.since, what="--since") if args.since else None
    ws = _open(args)
    outbox = Outbox(ws)
    total = outbox.count(since)
    scope = f" since {since.isoformat()}" if since else ""
    if args.dry_run:
        print(f"would replay {total} archived event(s){scope}")
        return 0
    transport, description = _ol_transport(ws)
    bar = _progress(total, "replaying", unit="event")
    try:
        sent = outbox.replay(transport, since, progress=lambda event: bar.update(1))
    finally:
        bar.close()
        transport.close()
    print(f"replayed {sent} archived event(s){scope} to {description}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from dws_dagster.cli.demo import run_demo

    return run_demo(
        Path(args.directory),
        small=args.small,
        months=args.months,
        trips_per_month=args.trips_per_month,
    )


# ------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace",
        "-w",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="workspace folder (default: search upward from the current one)",
    )
    fmt = argparse.ArgumentParser(add_help=False)
    fmt.add_argument("--format", choices=("text", "json"), default="text")

    parser = argparse.ArgumentParser(
        prog="dws-dagster",
        parents=[common],
        description="Data Workspaces lineage for Dagster and PySpark: resources, versions, "
        "lineage and snapshots.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(
        name: str, handler: Handler, help_text: str, *, formats: bool = False, group: Any = sub
    ) -> argparse.ArgumentParser:
        parents = [common, fmt] if formats else [common]
        command = group.add_parser(name, parents=parents, help=help_text, description=help_text)
        command.set_defaults(handler=handler)
        return command

    p = add("init", cmd_init, "create .dataworkspace/ in DIR (default: here)")
    p.add_argument("directory", nargs="?", default=".", metavar="DIR")
    p.add_argument("--name", help="workspace name (default: the folder's name)")
    p.add_argument(
        "--store",
        metavar="URL",
        help="a PostgreSQL store for the lineage (postgresql://user@host:port/db, "
        "no password; default: SQLite in .dataworkspace/)",
    )
    p.add_argument(
        "--store-password-env",
        metavar="VAR",
        help="environment variable holding the store's password",
    )
    p.add_argument(
        "--store-schema",
        metavar="NAME",
        help="PostgreSQL schema for the store's tables (default: the user's)",
    )

    p = add("add", cmd_add, "register a resource of the workspace")
    p.add_argument("name")
    p.add_argument("--role", required=True, choices=ROLES)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--path", help="local folder (stored relative to the workspace root)")
    where.add_argument("--uri", help="object-store or HDFS URI (s3a://, abfss://, hdfs://, ...)")
    p.add_argument(
        "--versioning",
        choices=VERSIONING_MODES,
        default="content",
        help="content: hash the bytes (default); listing: names, sizes and times",
    )
    p.add_argument("--description")

    p = add(
        "status",
        cmd_status,
        "resources, refs, versions, failed and unknown refs. The "
        "refs of a resource are every ref of it the lineage names: those a step wrote or "
        "that were observed, and those steps read that have no lineage of their own "
        "(source data read as found); code a step ran is recorded with the step, not as "
        "refs",
        formats=True,
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="re-hash the data of every ref and compare it with the version its "
        "lineage says (source data only read: the version read); then say "
        f"what needs attention and what to run. Exit code {EXIT_ATTENTION} "
        "when anything needs attention (drift, missing data, failed or "
        "unknown refs), 0 when nothing does",
    )
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref on its own line (by default the partitions one step "
        "wrote, or the files of one source folder, are one line)",
    )

    p = add("lineage", cmd_lineage, "upstream, downstream and last run of a ref")
    p.add_argument("ref", metavar="REF", help="RESOURCE or RESOURCE/SUBPATH")
    p.add_argument("--snapshot", metavar="S", help="from a snapshot instead of the current state")
    p.add_argument("--format", choices=("text", "json", "dot", "mermaid", "html"), default="text")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref on its own line (by default the partitions one step "
        "wrote, or the files of one source folder, are one line)",
    )

    p = add(
        "snapshot",
        cmd_snapshot,
        "snapshot the workspace: lineage, every ref's data (retained), code, results",
        formats=True,
    )
    p.add_argument("tag", nargs="?", metavar="TAG")
    p.add_argument("-m", "--message", default="")

    p = add(
        "restore",
        cmd_restore,
        "bring back a snapshot's lineage and data, or change nothing",
        formats=True,
    )
    p.add_argument("snapshot", metavar="TAG|HASH|PREFIX")
    p.add_argument(
        "--partial",
        action="store_true",
        help="when some refs' data cannot be brought back, restore the rest and mark "
        "those unknown (by default nothing is changed)",
    )
    p.add_argument(
        "--code",
        action="store_true",
        help="also put back the files of code resources kept in git (by default "
        "git's checkout is left alone and the commit to check out is named)",
    )

    p = add("gc", cmd_gc, "free retained data no snapshot references", formats=True)
    p.add_argument("--dry-run", action="store_true", help="report what would be freed")

    p = add("diff", cmd_diff, "what changed between two snapshots", formats=True)
    p.add_argument("a", metavar="A", help="snapshot tag, hash or prefix")
    p.add_argument(
        "b", metavar="B", nargs="?", default="current", help="snapshot, or 'current' (default)"
    )
    p.add_argument(
        "--expand",
        action="store_true",
        help="text: every ref and input on its own line (by default the partitions "
        "of one step that changed alike are one entry)",
    )

    add("history", cmd_history, "list snapshots, newest first", formats=True)

    p = add("delete-snapshot", cmd_delete_snapshot, "delete a snapshot")
    p.add_argument("snapshot", metavar="TAG|HASH|PREFIX")
    p.add_argument(
        "--remove-results", action="store_true", help="also delete the snapshot's results copies"
    )

    p = add("forget", cmd_forget, "drop a ref's lineage so another step may write it")
    p.add_argument("ref", metavar="REF")

    p = add(
        "observe",
        cmd_observe,
        "record source data's version now as its lineage (clears "
        "unknown after a partial restore); refs a step writes recover by re-running it",
        formats=True,
    )
    p.add_argument("ref", metavar="REF")

    p = add(
        "demo",
        cmd_demo,
        "run the example NYC taxi forecast (Dagster + Spark) end to end "
        "in DIR, then show its lineage and metrics",
    )
    p.add_argument("directory", nargs="?", default="dws-demo", metavar="DIR")
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--small", action="store_true", help="the smallest run: 15 days, 12 zones (about a minute)"
    )
    size.add_argument(
        "--months", type=int, metavar="N", help="months of synthetic data (default: 2)"
    )
    p.add_argument(
        "--trips-per-month",
        type=int,
        metavar="N",
        help="synthetic trips per month (default: 100000)",
    )

    p = add("version", cmd_version, "content version of a ref's data now", formats=True)
    p.add_argument("ref", metavar="REF")

    ol_help = "OpenLineage events for catalogs: outbox status, deliver now, replay the archive"
    p = sub.add_parser("openlineage", help=ol_help, description=ol_help)
    ol = p.add_subparsers(dest="ol_command", metavar="ACTION", required=True)

    def add_ol(
        name: str, handler: Handler, help_text: str, *, formats: bool = False
    ) -> argparse.ArgumentParser:
        return add(name, handler, help_text, formats=formats, group=ol)

    add_ol(
        "status", cmd_ol_status, "pending and delivered events, last error, transport", formats=True
    )
    q = add_ol(
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
        help="stop sending after this long (default: 60)",
    )
    q = add_ol("replay", cmd_ol_replay, "send archived events again, e.g. to a new catalog")
    q.add_argument(
        "--since",
        metavar="WHEN",
        help="only events whose eventTime is at or after WHEN (ISO-8601 date or "
        "datetime; UTC unless it names a zone)",
    )
    q.add_argument("--dry-run", action="store_true", help="only count the events")
    return parser


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Warnings (files skipped as not data, ...) as one `warning:` line, not Python's two."""
    print(f"warning: {_one_line(str(message))}", file=sys.stderr)


def _os_error_message(exc: OSError) -> str:
    """An OSError nobody converted, as one line naming the file and what to do."""
    exc = first_os_error(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) and exc.filename is not None:
        return str(write_error(exc.filename, exc))  # with the free space and what to do
    names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
    reason = exc.strerror or str(exc)
    advice = {
        errno.ENOSPC: "free space, then re-run",
        errno.EDQUOT: "free space, then re-run",
        errno.EROFS: "remount it read-write, then re-run",
        errno.EACCES: "fix its permissions, then re-run",
        errno.EPERM: "fix its permissions, then re-run",
        errno.ENOENT: "check the path",
        errno.ENOTDIR: "check the path",
        errno.EISDIR: "name a file, not a folder",
        errno.EEXIST: "move it away or choose another path",
    }.get(exc.errno or 0, "fix the cause, then re-run")
    return f"{names}: {reason}; {advice}" if names else f"{reason}; {advice}"


def _utf8_tolerant_output() -> None:
    """File names that are not UTF-8 (kept by Python as surrogate escapes) are written back as
    their bytes instead of failing the print."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="surrogateescape")
            except (ValueError, OSError):
                pass


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        _utf8_tolerant_output()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    # `--workspace` is accepted before and after the command; its action is shared by all the
    # parsers (parents=), so no parser may give it a default, or that default would override
    # a value given before the command.
    if not hasattr(args, "workspace"):
        args.workspace = None
    try:
        # A command lives for seconds and builds large acyclic structures from JSON; the
        # cyclic garbage collector would only walk them again and again.
        with gc_paused(), warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = int(args.handler(args))
        if argv is None:
            # Run as the command (arguments from sys.argv), the process exits next: freezing
            # spares it the full collection Python makes at exit (a third of the CPU time
            # of `lineage` over 100,000 refs). Frozen objects are still freed when unused.
            gc.freeze()
        return code
    except DwsError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file the system refused that no layer named: still the user's
        print(f"error: {_one_line(_os_error_message(exc))}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: one line, not a traceback, and a distinct exit code
        if os.environ.get("DWS_DEBUG"):
            traceback.print_exc()
        print(
            f"internal error: {type(exc).__name__}: {_one_line(str(exc))}; please report "
            "it (DWS_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _one_line(text: str) -> str:
    """A message on one line: a newline becomes a space, and any other character that is not
    printable (in a file name, a tag: a line separator, a terminal escape) is shown escaped."""
    text = text.replace("\n", " ")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
