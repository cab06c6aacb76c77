"""Lineage sensor throughput and loss against the `dagster-openlineage` package's sensor.

A Dagster instance (SQLite) is filled by real runs: one multi-asset step per run materializes
`--assets-per-run` workspace-bound assets whose metadata is what SparkWorkspaceIOManager
records (dws/ref, dws/version, inputs, provenance, parameters, column schema and lineage, row
count...), so the lineage sensor does its full work: lineage store records and OpenLineage
events. No Spark: 10k materializations of Spark writes would take hours. The event log is
Dagster's consolidated SQLite storage: on the default run-sharded one the peer's sensor raises
on every tick (it queries step and run events across runs by storage id) and delivers nothing.
Each instance is built once per size and cached (`--cache`); each sensor measured runs on its
own copy, in its own subprocess, from cursor 0, by evaluating its SensorDefinition tick after
tick (`build_sensor_context` + `evaluate_tick`, as the daemon does) until a tick changes
nothing.

  peer          dagster-openlineage's `openlineage_sensor(include_asset_events=True)`, at its
                default `record_filter_limit=30`, installed with the project's Dagster version
                into a throwaway venv (`--cache`/peer-venv); events go to a file (OpenLineage
                client, file transport, append).
  peer, limit=0 the same sensor reading the whole log in one tick (its "no limit" setting):
                the best throughput it can give, lossless, memory growing with the backlog.
  dws           `lineage_sensor(batch_size=500, time_budget_seconds=20)`: workspace lineage
                store + durable outbox + file transport (`.dataworkspace/openlineage/events.jsonl`).

Each delivers a START and a COMPLETE event per materialization (the peer adds run and step
events; dws adds a START and an end event per Dagster run, counted too).
Reported per sensor: wall and CPU time to catch up, events delivered per second (and
per CPU second, steadier on a shared machine), asset events delivered against the 2 per
materialization expected, lost materializations (no COMPLETE event naming the Dagster run and
asset), and peak RSS of the sensor's process. The shipped peer delivers its 180 events in
about a second, so its rate is noisy on a shared machine: it runs `--peer-repeats` times (7)
and the run with the median events/s is reported, with the range. Target: ≥ 10× the peer's
events/s, 0 lost, peak RSS flat as the backlog grows.

    python bench/sensor_throughput.py --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PEER_PACKAGE = "dagster-openlineage==0.2.1"
PEER_DEFAULT_LIMIT = 30
#: Dagster's default time limit for one sensor evaluation (DEFAULT_SENSOR_GRPC_TIMEOUT).
DAGSTER_SENSOR_TIMEOUT_SECONDS = 60
RESOURCE_INTER = "inter"
RESOURCE_SRC = "src"
WORKSPACE_NAME = "bench"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
DAGSTER_YAML = """telemetry:
  enabled: false
event_log_storage:
  module: dagster._core.storage.event_log
  class: ConsolidatedSqliteEventLogStorage
  config:
    base_dir: {events}
"""


# ---------------------------------------------------------------------------- the assets


def asset_names(per_run: int) -> list[str]:
    return [f"t{index:04d}" for index in range(per_run)]


def build_definitions(per_run: int, sensors: list[Any] | None = None) -> Any:
    """One multi-asset of `per_run` workspace-bound assets (reading source asset `raw`), whose
    materializations carry the IO manager's metadata, and a job materializing all of them."""
    from dagster import (
        AssetSpec,
        DataVersion,
        Definitions,
        MaterializeResult,
        MetadataValue,
        define_asset_job,
        multi_asset,
    )

    from dws_dagster import dws_ref
    from dws_dagster.assets.materialization import column_lineage, column_schema, lineage_metadata
    from dws_dagster.workspace.records import LineageRecord, StepInfo, now_iso

    raw = AssetSpec("raw", metadata=dws_ref(RESOURCE_SRC, "raw"), description="Source rows.")
    specs = [
        AssetSpec(
            name,
            deps=[raw],
            metadata=dws_ref(RESOURCE_INTER, name),
            description=f"Bench table {name}.",
            owners=["team:bench"],
            code_version="1",
        )
        for name in asset_names(per_run)
    ]
    fields = [("id", "bigint", False), ("zone", "int", True), ("fare", "double", True)]

    @multi_asset(specs=specs, name="bench_tables")
    def bench_tables(context):  # a string annotation (future import) would not resolve
        started = now_iso()
        for spec in specs:
            name = spec.key.to_user_string()
            ref = f"{RESOURCE_INTER}/{name}"
            version = hashlib.sha256(f"{context.run.run_id}/{name}".encode()).hexdigest()[:32]
            record = LineageRecord(
                ref=ref,
                version=version,
                step=StepInfo(
                    name=name, kind="dagster-asset", run_id=context.run.run_id, code_version="1"
                ),
                parameters={"threshold": 3},
                inputs=((f"{RESOURCE_SRC}/raw", "v-raw"),),
                provenance={f"{RESOURCE_SRC}/raw": "v-raw", ref: version},
                start_time=started,
                end_time=now_iso(),
                extra={"format": "parquet", "rows": 10},
            )
            metadata = lineage_metadata(
                record,
                fmt="parquet",
                input_assets={f"{RESOURCE_SRC}/raw": "raw"},
                workspace=WORKSPACE_NAME,
            )
            metadata.update(
                {
                    "dagster/column_schema": column_schema(fields),
                    "dagster/row_count": MetadataValue.int(10),
                    "dagster/uri": MetadataValue.text(f"file:///bench/data/inter/{name}"),
                    "dws/size_bytes": MetadataValue.int(4096),
                    "dagster/column_lineage": column_lineage(
                        {"id": [("raw", "id")], "zone": [("raw", "zone")]}
                    ),
                    "dws/column_lineage": MetadataValue.json(
                        {
                            "columns": {
                                "id": [
                                    {
                                        "ref": f"{RESOURCE_SRC}/raw",
                                        "column": "id",
                                        "kind": "DIRECT",
                                        "subtype": "IDENTITY",
                                        "asset": "raw",
                                    }
                                ]
                            },
                            "dataset": [],
                            "complete": True,
                        }
                    ),
                }
            )
            yield MaterializeResult(
                asset_key=spec.key, metadata=metadata, data_version=DataVersion(version)
            )

    job = define_asset_job("bench_job", selection=[spec.key for spec in specs])
    return Definitions(assets=[raw, bench_tables], jobs=[job], sensors=sensors or [])


# ---------------------------------------------------------------------------- the instance


def make_home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    """A DAGSTER_HOME on SQLite, its event log in one database (Dagster's default, one database
    per run, cannot serve the peer's cross-run queries of step and run events: it raises).
    Rewritten after each copy, since the storage's folder is an absolute path."""
    (home / "dagster.yaml").write_text(DAGSTER_YAML.format(events=home / "events"))


def build_instance(entry: Path, size: int, per_run: int) -> dict[str, Any]:
    """Fill a fresh DAGSTER_HOME under `entry` with `size` materializations from real runs."""
    from dagster import DagsterEventType, DagsterInstance, EventRecordsFilter

    runs = -(-size // per_run)
    # Built in memory when the machine has /dev/shm (SQLite's fsyncs, not Dagster, would
    # otherwise dominate), then copied to the cache.
    shm = Path("/dev/shm")
    tmp = Path(
        tempfile.mkdtemp(prefix="dws-sensor-bench-build-", dir=shm if shm.is_dir() else None)
    )
    make_home(tmp / "home")
    defs = build_definitions(per_run)
    job = defs.resolve_job_def("bench_job")
    started = time.perf_counter()
    run_ids = []
    with DagsterInstance.from_config(str(tmp / "home")) as instance:
        for index in range(runs):
            result = job.execute_in_process(instance=instance, run_config=QUIET)
            if not result.success:
                raise SystemExit(f"bench run {index} failed")
            run_ids.append(result.run_id)
            if (index + 1) % max(1, runs // 10) == 0:
                print(
                    f"  generated {index + 1}/{runs} runs ({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
        records = instance.get_event_records(
            EventRecordsFilter(event_type=DagsterEventType.ASSET_MATERIALIZATION), limit=None
        )
        found = len(records)
    if found != runs * per_run:
        raise SystemExit(f"expected {runs * per_run} materializations, the instance has {found}")
    manifest = {
        "materializations": found,
        "runs": runs,
        "per_run": per_run,
        "run_ids": run_ids,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    shutil.rmtree(entry, ignore_errors=True)
    partial = entry.with_name(entry.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(tmp, partial)
    shutil.rmtree(tmp)
    os.replace(partial, entry)
    return manifest


def cached_instance(cache: Path, size: int, per_run: int) -> tuple[Path, dict[str, Any]]:
    entry = cache / f"instance-{size}x{per_run}"
    manifest_path = entry / "manifest.json"
    if manifest_path.is_file():
        return entry, json.loads(manifest_path.read_text())
    print(
        f"building an instance of {size} materializations ({per_run} per run) in {entry}",
        flush=True,
    )
    return entry, build_instance(entry, size, per_run)


# ---------------------------------------------------------------------------- the peer


def peer_python(venv: Path) -> Path:
    """The throwaway venv's python, with the project's Dagster and the peer package."""
    from dagster.version import __version__ as dagster_version

    python = venv / "bin" / "python"
    stamp = venv / f"installed-{dagster_version}-{PEER_PACKAGE}"
    if stamp.is_file():
        return python
    print(f"installing {PEER_PACKAGE} with dagster=={dagster_version} into {venv}", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"dagster=={dagster_version}", PEER_PACKAGE],
        check=True,
    )
    stamp.touch()
    return python


# ---------------------------------------------------------------------------- workers


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(extra)
    return env


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _catch_up(
    sensor_def: Any, instance: Any, context_kwargs: dict[str, Any], done: Any
) -> dict[str, Any]:
    """Evaluate ticks from cursor 0 until a tick leaves the cursor as it was and `done()`."""
    from dagster import build_sensor_context

    rss_start = _rss_kb()
    cursor = None
    ticks = 0
    longest = 0.0
    cpu = _cpu_seconds()
    started = time.perf_counter()
    while True:
        context = build_sensor_context(instance=instance, cursor=cursor, **context_kwargs)
        tick_started = time.perf_counter()
        data = sensor_def.evaluate_tick(context)
        longest = max(longest, time.perf_counter() - tick_started)
        ticks += 1
        if data.cursor == cursor and done():
            break
        cursor = data.cursor
    return {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": _cpu_seconds() - cpu,
        "ticks": ticks,
        "longest_tick_seconds": longest,
        "rss_start_kb": rss_start,
        "rss_peak_kb": _rss_kb(),
    }


def worker_dws(root: Path, per_run: int) -> dict[str, Any]:
    from dagster import DagsterInstance

    from dws_dagster import WorkspaceResource, lineage_sensor
    from dws_dagster.ol.outbox.durable import Outbox
    from dws_dagster.workspace.definition import Workspace

    ws = Workspace.init(root / "ws", name=WORKSPACE_NAME)
    ws.add_resource(RESOURCE_SRC, "source-data", path="data/src")
    ws.add_resource(RESOURCE_INTER, "intermediate-data", path="data/inter")
    sensor_def = lineage_sensor(
        workspace=WorkspaceResource(root=str(ws.root)), batch_size=500, time_budget_seconds=20
    )
    defs = build_definitions(per_run, sensors=[sensor_def])
    repository_def = defs.get_repository_def()
    with DagsterInstance.from_config(str(root / "home")) as instance:
        result = _catch_up(
            sensor_def,
            instance,
            {"repository_def": repository_def},
            lambda: Outbox(ws).status().pending == 0,
        )
    result["events_file"] = str(ws.meta_dir / "openlineage" / "events.jsonl")
    return result


def worker_peer(root: Path, limit: int) -> dict[str, Any]:
    events_file = root / "peer-events.jsonl"
    config = root / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {events_file}\n  append: true\n")
    os.environ["OPENLINEAGE_CONFIG"] = str(config)  # read when the peer module is imported
    import logging

    from dagster import DagsterInstance
    from dagster_openlineage import openlineage_sensor

    logging.getLogger("dagster_openlineage").setLevel(logging.ERROR)
    sensor_def = openlineage_sensor(include_asset_events=True, record_filter_limit=limit)
    with DagsterInstance.from_config(str(root / "home")) as instance:
        result = _catch_up(sensor_def, instance, {}, lambda: True)
    result["events_file"] = str(events_file)
    return result


# ---------------------------------------------------------------------------- measuring


def count_delivered(events_file: Path, assets: set[str]) -> dict[str, Any]:
    """Lines delivered, asset START/COMPLETE events, and the (Dagster run, asset) pairs that
    got a COMPLETE event (the Dagster run is the parent facet's run, else the event's run)."""
    from dws_dagster.ol.job_names import DAGSTER_JOB

    dws_prefix = f"{DAGSTER_JOB}."  # dws names an asset's job `dagster.<asset key>`
    lines = asset_events = 0
    completed: dict[tuple[str, str], int] = {}
    if events_file.is_file():
        with open(events_file, "rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                lines += 1
                event = json.loads(raw)
                name = (event.get("job") or {}).get("name")
                if isinstance(name, str) and name.startswith(dws_prefix):
                    name = name[len(dws_prefix) :]
                if name not in assets or event.get("eventType") not in ("START", "COMPLETE"):
                    continue
                asset_events += 1
                if event["eventType"] != "COMPLETE":
                    continue
                run = event.get("run") or {}
                parent = ((run.get("facets") or {}).get("parent") or {}).get("run") or {}
                key = (parent.get("runId") or run.get("runId"), name)
                completed[key] = completed.get(key, 0) + 1
    return {"lines": lines, "asset_events": asset_events, "completed": completed}


def measure(
    label: str,
    python: Path,
    worker: list[str],
    entry: Path,
    manifest: dict[str, Any],
    env: dict[str, str],
) -> dict[str, Any]:
    assets = set(asset_names(manifest["per_run"]))
    with tempfile.TemporaryDirectory(prefix="dws-sensor-bench-") as tmp:
        root = Path(tmp)
        shutil.copytree(entry / "home", root / "home")
        make_home(root / "home")
        done = subprocess.run(
            [str(python), str(Path(__file__).resolve()), "--worker", *worker, "--root", str(root)],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{label} worker failed:\n{done.stderr[-4000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        counted = count_delivered(Path(result["events_file"]), assets)
    expected = {(run_id, name) for run_id in manifest["run_ids"] for name in assets}
    completed = counted["completed"]
    result.update(
        label=label,
        lines=counted["lines"],
        asset_events=counted["asset_events"],
        lost=len(expected - completed.keys()),
        duplicates=sum(n - 1 for n in completed.values() if n > 1),
        events_per_second=counted["lines"] / result["seconds"],
        events_per_cpu_second=counted["lines"] / result["cpu_seconds"],
    )
    return result


def report(size_results: list[tuple[int, list[dict[str, Any]]]]) -> None:
    header = (
        f"{'materializations':>16} {'sensor':<14} {'wall s':>8} {'CPU s':>7} "
        f"{'ticks':>6} {'longest':>8} {'events':>8} {'asset ev':>9} {'expected':>9} "
        f"{'lost':>7} "
        f"{'events/s':>9} {'ev/CPU s':>9} {'peak RSS MB':>11} {'start MB':>8}"
    )
    print(header)
    for size, results in size_results:
        for r in results:
            print(
                f"{size:>16} {r['label']:<14} {r['seconds']:>8.1f} {r['cpu_seconds']:>7.1f} "
                f"{r['ticks']:>6} {r['longest_tick_seconds']:>8.1f} {r['lines']:>8} "
                f"{r['asset_events']:>9} {2 * size:>9} "
                f"{r['lost']:>7} {r['events_per_second']:>9.0f} "
                f"{r['events_per_cpu_second']:>9.0f} {r['rss_peak_kb'] / 1024:>11.0f} "
                f"{r['rss_start_kb'] / 1024:>8.0f}"
            )
    print()
    for size, results in size_results:
        by = {r["label"]: r for r in results}
        ours = by["dws"]
        for other in ("dws (journal)", "dws (postgres)"):
            if other in by:
                print(
                    f"{size:>7} materializations: dws (SQLite store) events/s ÷ {other} = "
                    f"{ours['events_per_second'] / by[other]['events_per_second']:.2f}× "
                    f"(per CPU second: "
                    f"{ours['events_per_cpu_second'] / by[other]['events_per_cpu_second']:.2f}"
                    f"×); peak RSS {ours['rss_peak_kb'] / by[other]['rss_peak_kb']:.2f}×"
                )
        for peer in ("peer", "peer, limit=0"):
            if peer in by:
                print(
                    f"{size:>7} materializations: dws events/s ÷ {peer} events/s = "
                    f"{ours['events_per_second'] / by[peer]['events_per_second']:.1f}× "
                    f"(per CPU second: "
                    f"{ours['events_per_cpu_second'] / by[peer]['events_per_cpu_second']:.1f}×)"
                    f"; "
                    f"lost: dws {ours['lost']}, {peer} {by[peer]['lost']} "
                    f"(of {size}); duplicates: dws {ours['duplicates']}"
                )
    for size, results in size_results:
        for r in results:
            if r.get("rate_range") and r["rate_range"][0] != r["rate_range"][1]:
                low, high = r["rate_range"]
                print(
                    f"{size:>7} materializations: {r['label']}'s events/s is the median of "
                    f"runs from {low:.0f} to {high:.0f}"
                )
    for size, results in size_results:
        for r in results:
            if r["longest_tick_seconds"] > DAGSTER_SENSOR_TIMEOUT_SECONDS:
                print(
                    f"{size:>7} materializations: {r['label']}'s longest tick took "
                    f"{r['longest_tick_seconds']:.0f} s, over the "
                    f"{DAGSTER_SENSOR_TIMEOUT_SECONDS} s Dagster gives a sensor tick by "
                    "default: under the daemon that tick times out and its cursor never "
                    "moves"
                )
    labels = (
        [r["label"] for r in size_results[0][1] if r["label"].startswith("dws")]
        if size_results
        else []
    )
    for label in labels:
        peaks = {
            size: next(r for r in results if r["label"] == label)["rss_peak_kb"]
            for size, results in size_results
        }
        if len(peaks) > 1:
            sizes = sorted(peaks)
            print(
                f"{label} peak RSS {sizes[-1]} ÷ {sizes[0]} materializations = "
                f"{peaks[sizes[-1]] / peaks[sizes[0]]:.2f}×"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="10000,100000", help="materializations per instance, comma-separated"
    )
    parser.add_argument("--assets-per-run", type=int, default=100)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "dws-bench" / "sensor-throughput",
        help="where generated instances and the peer's venv are kept",
    )
    parser.add_argument("--peer-venv", type=Path, default=None)
    parser.add_argument(
        "--skip-unlimited-peer",
        action="store_true",
        help="do not run the peer with record_filter_limit=0",
    )
    parser.add_argument(
        "--peer-repeats",
        type=int,
        default=7,
        help="runs of the shipped peer per size (about a second each, so its "
        "rate is noisy): the median by events/s is reported",
    )
    parser.add_argument(
        "--build-only", action="store_true", help="build (and cache) the instances, measure nothing"
    )
    parser.add_argument(
        "--skip-peer",
        action="store_true",
        help="measure dws_dagster only (its stores side by side)",
    )
    parser.add_argument(
        "--journal-rev",
        default="60b9e85",
        help="also measure dws_dagster at this commit (the journal store); '' to skip",
    )
    parser.add_argument("--postgres-url", help="also measure dws on a PostgreSQL store")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        kind, value = args.worker[0], int(args.worker[1])
        result = worker_dws(args.root, value) if kind == "dws" else worker_peer(args.root, value)
        print(json.dumps(result))
        return

    args.cache.mkdir(parents=True, exist_ok=True)
    if args.build_only:
        for size in [int(s) for s in args.sizes.split(",")]:
            cached_instance(args.cache, size, args.assets_per_run)
        return
    peer = None if args.skip_peer else peer_python(args.peer_venv or args.cache / "peer-venv")
    journal = journal_tree(args.journal_rev, args.cache) if args.journal_rev else None
    size_results = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            size_results.append(measure_size(args, size, peer, journal))
    finally:
        if journal is not None:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(journal)], check=False
            )
    print()
    report(size_results)


REPO = Path(__file__).resolve().parent.parent


def journal_tree(rev: str, cache: Path) -> Path:
    """A checkout of `rev` (dws_dagster with the journal store), as a git worktree."""
    tree = cache / f"journal-tree-{rev}"
    if tree.exists():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False
        )
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return tree


def measure_size(
    args: argparse.Namespace, size: int, peer: Path | None, journal: Path | None
) -> tuple[int, list[dict[str, Any]]]:
    entry, manifest = cached_instance(args.cache, size, args.assets_per_run)
    dws_worker = ["dws", str(manifest["per_run"])]
    runs: list[tuple[str, Path, list[str], dict[str, str]]] = []
    if peer is not None:
        runs.append(("peer", peer, ["peer", str(PEER_DEFAULT_LIMIT)], _clean_env()))
        if not args.skip_unlimited_peer:
            runs.append(("peer, limit=0", peer, ["peer", "0"], _clean_env()))
    if journal is not None:
        runs.append(
            ("dws (journal)", Path(sys.executable), dws_worker, _clean_env(PYTHONPATH=str(journal)))
        )
    runs.append(("dws", Path(sys.executable), dws_worker, _clean_env(PYTHONPATH=str(REPO))))
    if args.postgres_url:
        runs.append(
            (
                "dws (postgres)",
                Path(sys.executable),
                dws_worker,
                _clean_env(
                    PYTHONPATH=str(REPO),
                    DWS_STORE_URL=args.postgres_url,
                    DWS_STORE_SCHEMA=f"bench_{os.getpid()}_{size}",
                ),
            )
        )
    results = []
    for label, python, worker, env in runs:
        repeats = max(1, args.peer_repeats) if label == "peer" else 1
        print(
            f"measuring {label} on {manifest['materializations']} materializations"
            f"{f' ({repeats} runs)' if repeats > 1 else ''} ...",
            flush=True,
        )
        runs_of = [measure(label, python, worker, entry, manifest, env) for _ in range(repeats)]
        runs_of.sort(key=lambda r: r["events_per_second"])
        chosen = runs_of[len(runs_of) // 2]
        chosen["rate_range"] = (runs_of[0]["events_per_second"], runs_of[-1]["events_per_second"])
        results.append(chosen)
    return manifest["materializations"], results


if __name__ == "__main__":
    main()
