"""The lineage store at scale: snapshot, restore, diff, lineage and status at N refs, on the
database store (SQLite, and PostgreSQL when `--postgres-url` is given) side by side with the
journal store of an earlier commit (`--journal-rev`, checked out into a temporary git worktree),
each measured in its own process with its own code.

For each size (default 10,000 and 100,000 refs) a workspace is built the way a pipeline fills
it: every ref holds a small data file, and its lineage record (step, run id, code version,
parameters, inputs, provenance from `LineageStore.check_inputs`) is committed through the
store API in the DAG's order. Refs come in groups of ten, one chain of partitioned assets:

    source/gN/landed -> staging -> clean -> daily -> weekly -> features (daily, weekly)
      -> train, test -> model -> predictions (test, model), or results/gN/score every 10th group

so 1 % of the refs are results (archived, with lineage.json, by every snapshot). Between two
snapshots 1 % of the refs are rewritten (the old data kept as a version, as the IO manager's
`keep_versions` does), so the timed snapshot is a new one and restore has data to bring back.

Each operation runs as a user runs it: a new `dws-dagster` process (its interpreter start is
measured alone as `python -c pass`); `lineage` also in-process (`dws_dagster.cli.main.main`, a fresh
`Workspace`, output to /dev/null), with the process's peak RSS. Wall and CPU time are both
shown: the machine is shared, so CPU time is the steadier figure (a PostgreSQL server's CPU is
not counted: compare its wall times). Floor in the same run: a process that only walks the
resources and reads every data file, as restore must to check what each ref holds now.
Targets (issue 19): lineage in-process <= 50 ms at 100,000 refs and growing <= 1.5x from 10,000;
snapshot <= 2 s at 100,000. Issue 20: a snapshot retains every ref's data: at 10,000 refs it
takes <= 1 s, the retained objects grow by the changed data only (0 bytes beyond it), and a
restore costs in proportion to the data it brings back (shown beside a process reading that
data once; it also checks every ref's data with the stat-keyed hash cache).

    python bench/store_scale.py --sizes 10000 100000 --repeats 3 [--postgres-url URL]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from dws_dagster.cli import main as cli
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.records import LineageRecord, StepInfo, now_iso
from dws_dagster.workspace.swap import kept_version_path, staging_path, swap_into_place

GROUP = 10
#: (name, inputs as indexes into the group) in DAG order; index 0 is observed source data.
CHAIN: list[tuple[str, tuple[int, ...]]] = [
    ("landed", ()),
    ("staging", (0,)),
    ("clean", (1,)),
    ("daily", (2,)),
    ("weekly", (3,)),
    ("features", (3, 4)),
    ("train", (5,)),
    ("test", (5,)),
    ("model", (6,)),
    ("predictions", (7, 8)),
]


def ref_of(group: int, index: int) -> str:
    if index == 0:
        return f"source/g{group:06d}/landed"
    if index == GROUP - 1 and group % 10 == 0:
        return f"results/g{group:06d}/score"
    return f"inter/g{group:06d}/{CHAIN[index][0]}"


def write_data(ws: Workspace, ref: str, body: bytes) -> None:
    folder = ws.local_path(ref)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-00000.csv").write_bytes(body)


def record_for(ws: Workspace, group: int, index: int, run_id: str, seed: str) -> LineageRecord:
    ref = ref_of(group, index)
    version = ws.version_of(ref)
    if index == 0:
        return LineageRecord(
            ref=ref,
            version=version,
            step=StepInfo(name="observation", kind="observation"),
            start_time=now_iso(),
            end_time=now_iso(),
        )
    inputs = [
        (ref_of(group, i), ws.store.get(ref_of(group, i)).version)  # type: ignore[union-attr]
        for i in CHAIN[index][1]
    ]
    step = f"{CHAIN[index][0]}_asset" if index != GROUP - 1 or group % 10 else "score_asset"
    check = ws.store.check_inputs(step, inputs, outputs=[ref])
    metrics = {"mae": 1.5, "rmse": 2.25} if ref.startswith("results/") else None
    return LineageRecord(
        ref=ref,
        version=version,
        step=StepInfo(
            name=step,
            kind="dagster-asset",
            run_id=run_id,
            partition=f"g{group:06d}",
            code_version="3",
        ),
        parameters={"seed": seed, "window_days": 7, "dagster/partition": f"g{group:06d}"},
        inputs=tuple(inputs),
        provenance=check.provenance,
        start_time=now_iso(),
        end_time=now_iso(),
        metrics=metrics,
    )


def build(root: Path, refs: int) -> Workspace:
    ws = Workspace.init(root)
    ws.add_resource("source", "source-data", path="source")
    ws.add_resource("inter", "intermediate-data", path="inter")
    ws.add_resource("results", "results", path="results")
    groups = refs // GROUP
    batch = 100
    for first in range(0, groups, batch):
        members = range(first, min(first + batch, groups))
        run_id = str(uuid.uuid4())
        for index in range(GROUP):
            for group in members:
                write_data(ws, ref_of(group, index), f"g,{group},{index},v0\n".encode() * 4)
            ws.store.commit([record_for(ws, group, index, run_id, "v0") for group in members])
    return ws


def rewrite(ws: Workspace, count: int, round_: int) -> list[str]:
    """Rematerialize `count` refs spread over the workspace, keeping the old data as a kept
    version (what `keep_versions` does); returns the refs rewritten."""
    groups = len(ws.store.items()) // GROUP
    run_id = str(uuid.uuid4())
    records = []
    for n in range(count):
        group = (n * 7919 + round_) % groups
        ref = ref_of(group, 1 + n % (GROUP - 1))
        parsed = ws.check_ref(ref)
        target = ws.local_path(parsed)
        old = ws.version_of(parsed)
        staging = staging_path(target)
        staging.mkdir(parents=True)
        (staging / "part-00000.csv").write_bytes(f"{ref},round {round_}\n".encode() * 4)
        keep = kept_version_path(ws.resource_root(parsed.name), parsed.subpath, old)
        swap_into_place(staging, target, keep_old_as=keep)
        index = next(i for i in range(GROUP) if ref_of(group, i) == ref)
        records.append(record_for(ws, group, index, run_id, f"v{round_}"))
    ws.store.commit(records)
    return [record.ref for record in records]


def disk_bytes(folder: Path) -> tuple[int, int]:
    """(bytes of the files, bytes of disk blocks they take) under `folder`: the retained
    objects, hard links counted once."""
    seen: set[tuple[int, int]] = set()
    size = blocks = 0
    for path in folder.rglob("*") if folder.is_dir() else ():
        info = path.lstat()
        if path.is_file() and (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            size += info.st_size
            blocks += info.st_blocks * 512
    return size, blocks


def data_bytes(ws: Workspace, refs: list[str]) -> int:
    return sum(
        p.stat().st_size for ref in refs for p in ws.local_path(ref).rglob("*") if p.is_file()
    )


class Timer:
    """Wall and CPU seconds of each operation: the machine is shared, so CPU time (this
    process's, or its children's for a command run as a process) is the steadier figure."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def add(self, name: str, func: Callable[[], object]) -> None:
        before = _cpu()
        start = time.perf_counter()
        func()
        self.wall.setdefault(name, []).append(time.perf_counter() - start)
        self.cpu.setdefault(name, []).append(_cpu() - before)

    def medians(self) -> dict[str, tuple[float, float]]:
        return {
            name: (statistics.median(self.wall[name]), statistics.median(self.cpu[name]))
            for name in self.wall
        }


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_cli(*argv: str) -> None:
    """`dws-dagster ARGV` in this process (no interpreter start), output to /dev/null."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        code = cli.main(list(argv))
    if code != 0:
        raise SystemExit(f"dws-dagster {' '.join(argv)} failed with {code}")


CLI = "import sys; from dws_dagster.cli.main import main; sys.exit(main())"


def run_process(*argv: str) -> None:
    """`dws-dagster ARGV` as a new process, as a user runs it (with this process's code:
    PYTHONPATH picks the tree measured)."""
    subprocess.run([sys.executable, "-c", CLI, *argv], check=True, stdout=subprocess.DEVNULL)


READ_FLOOR = """
import os, sys
for top in sys.argv[1:]:
    for folder, folders, files in os.walk(top):
        if ".dws" in folders:
            folders.remove(".dws")  # kept versions: not what a ref holds now
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            while os.read(fd, 1 << 20):
                pass
            os.close(fd)
"""


READ_FILES = """
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
"""


def measure(root: Path, refs: int, repeats: int) -> dict[str, tuple[float, float]]:
    start = time.perf_counter()
    ws = build(root / f"ws-{refs}", refs)
    built = time.perf_counter() - start
    w = str(ws.root)
    focus = ref_of(refs // GROUP // 2, 5)  # features of a group in the middle
    run_process("snapshot", "base", "-w", w)
    print(f"  {refs:,} refs: built in {built:.1f} s", file=sys.stderr, flush=True)
    timer = Timer()
    changed = max(1, refs // 100)
    objects = ws.meta_dir / "objects"
    retained: list[float] = []
    rewritten: list[str] = []
    for round_ in range(1, repeats + 1):
        now = rewrite(Workspace.open(w), changed, round_)
        rewritten += now
        before = disk_bytes(objects)[0]
        timer.add(
            "snapshot (1% changed)", lambda r=round_: run_process("snapshot", f"r{r}", "-w", w)
        )
        # Retention takes the changed data once, and nothing for the 99 % unchanged.
        retained.append(disk_bytes(objects)[0] - before - data_bytes(ws, now))
        timer.add("snapshot (unchanged)", lambda: run_process("snapshot", "-w", w))
        timer.add("diff", lambda r=round_: run_process("diff", "base", f"r{r}", "-w", w))
        timer.add("lineage", lambda: run_process("lineage", focus, "-w", w))
        timer.add("lineage (in-process)", lambda: run_cli("lineage", focus, "-w", w))
        timer.add("status", lambda: run_process("status", "-w", w))
        brought_back = sorted(set(rewritten))  # what the restore to `base` brings back
        paths = [
            str(p) for ref in brought_back for p in ws.local_path(ref).rglob("*") if p.is_file()
        ]
        timer.add(
            "floor: read the data restore brings back, once",
            lambda p=paths: subprocess.run([sys.executable, "-c", READ_FILES, *p], check=True),
        )
        timer.add("restore", lambda: run_process("restore", "base", "-w", w))
        rewritten = []
        roots = [str(ws.resource_root(name)) for name in sorted(ws.resources)]
        reader = [sys.executable, "-c", READ_FLOOR, *roots]
        timer.add(
            "floor: read every data file (process)", lambda r=reader: subprocess.run(r, check=True)
        )
        timer.add(
            "floor: python -c pass",
            lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
        )
    median = timer.medians()
    if objects.is_dir():  # the journal store of the baseline retains nothing
        median["retention: bytes beyond the changed data"] = (max(retained), 0.0)
        median["retention: objects on disk MB (all snapshots)"] = (
            disk_bytes(objects)[1] / 1e6,
            0.0,
        )
    median["peak RSS MB (builder + in-process lineage)"] = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        0.0,
    )
    shutil.rmtree(root / f"ws-{refs}", ignore_errors=True)
    return median


def worker(sizes: list[int], repeats: int, root: Path) -> None:
    """Measure this process's code (one store kind) and print the medians as JSON."""
    results = {size: measure(root, size, repeats) for size in sizes}
    print(json.dumps(results))


def journal_tree(rev: str, where: Path) -> Path:
    """A checkout of `rev` (the journal store) beside the repository, as a git worktree."""
    repo = Path(__file__).resolve().parent.parent
    tree = where / "journal-tree"
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), rev],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return tree


def run_kind(
    kind: str, tree: Path, args: argparse.Namespace, tmp: Path
) -> dict[int, dict[str, tuple[float, float]]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("DWS_STORE_URL", None)
    env.pop("DWS_STORE_SCHEMA", None)
    if kind == "postgresql":
        env["DWS_STORE_URL"] = args.postgres_url
        env["DWS_STORE_SCHEMA"] = f"bench_{uuid.uuid4().hex[:12]}"
    root = tmp / kind
    root.mkdir()
    print(f"measuring the {kind} store ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            "--sizes",
            *map(str, args.sizes),
            "--repeats",
            str(args.repeats),
            "--dir",
            str(root),
        ],
        # Not run from the repository: `python -c` puts the working folder first on sys.path,
        # which would import the repository's code instead of the tree measured.
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
    )
    return {
        int(size): {name: tuple(value) for name, value in medians.items()}
        for size, medians in json.loads(done.stdout.splitlines()[-1]).items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="where to build the workspaces (default: a temp folder)")
    parser.add_argument(
        "--journal-rev", default="60b9e85", help="the commit whose journal store is the baseline"
    )
    parser.add_argument("--postgres-url", help="also measure a PostgreSQL store at this URL")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.sizes, args.repeats, Path(args.dir))
        return
    tmp = Path(tempfile.mkdtemp(prefix="dws-bench-store-", dir=args.dir))
    repo = Path(__file__).resolve().parent.parent
    tree = None
    try:
        tree = journal_tree(args.journal_rev, tmp)
        kinds = {"journal": tree, "sqlite": repo}
        if args.postgres_url:
            kinds["postgresql"] = repo
        results = {kind: run_kind(kind, path, args, tmp) for kind, path in kinds.items()}
    finally:
        if tree is not None:
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=False
            )
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, args.sizes)


def report(results: dict[str, dict[int, dict[str, tuple[float, float]]]], sizes: list[int]) -> None:
    kinds = list(results)
    for size in sizes:
        print(
            f"\n{size:,} refs, median wall s / CPU s "
            + " | ".join(kinds)
            + "   (ratios: database ÷ journal)"
        )
        names = list(results["journal"][size])
        names += [n for n in results[kinds[-1]][size] if n not in names]
        for name in names:
            cells = []
            for kind in kinds:
                wall, cpu = results[kind][size].get(name, (float("nan"), float("nan")))
                cells.append(f"{wall:8.3f} {cpu:7.3f}")
            base = results["journal"][size].get(name, (0.0, 0.0))
            ratios = [
                f"{results[kind][size][name][0] / base[0]:5.2f}×"
                for kind in kinds[1:]
                if base[0] > 0
            ]
            print(f"  {name:44} " + " | ".join(cells) + "   " + " ".join(ratios))
    for kind in kinds[1:]:
        for size in sizes:
            own = results[kind][size]
            floor = own["floor: read the data restore brings back, once"][0]
            print(
                f"\n{kind}, {size:,} refs: restore {own['restore'][0] / floor:.1f}"
                "× reading the data it brings back once; retention added "
                f"{own['retention: bytes beyond the changed data'][0]:.0f} bytes beyond the "
                "changed data"
            )
    if len(sizes) > 1:
        small, large = min(sizes), max(sizes)
        print(f"\ngrowth {large:,} ÷ {small:,} refs (wall):")
        for kind in kinds:
            parts = [
                f"{name} {results[kind][large][name][0] / results[kind][small][name][0]:.2f}×"
                for name in ("lineage (in-process)", "snapshot (1% changed)", "status", "diff")
            ]
            print(f"  {kind:10} " + ", ".join(parts))


if __name__ == "__main__":
    main()
