"""What checking the files and rows read from a workspace costs: this tree's checks (compiled
from the declarations in `workspace/formats.py`) against those of a baseline commit
(`--baseline-rev`: hand-written quick checks in `workspace/shapes.py`, pydantic schemas for
what they refused), each measured in its own processes with its own code, alternating.

Measured, on one store of `--refs` refs built as `store_scale.py` builds it (real lineage
records: step, parameters, inputs, provenance):

- `check a record`: the fast check of one record body as the store reads it back, per record
  (the baseline's pydantic `TypeAdapter` of the same records beside it, for reference);
- `store state()`: every ref's state read back, each record checked (`LineageStore.state`);
- `sensor prefetch`: what the lineage sensor reads for a batch, here every ref and its
  record (`LineageStore.prefetch` in a transaction);
- `import + first checks`: importing the module the checks live in and checking a config,
  a resources file, a record and a ref once, in a new process (every command does);
- `open + get`: a new process opening the workspace (its config and resources checked) and
  reading one ref's state.

CPU time (the machine is shared: it is steadier than wall time), medians of `--repeats` runs;
both trees' bytecode is compiled first, as an installed package's is. Ratios are this tree ÷
baseline (below 1: faster).

    python bench/format_checks.py --refs 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

IMPORT = """
import importlib, sys, time
start = time.process_time()
formats = importlib.import_module(sys.argv[1])
if hasattr(getattr(formats, "RECORD", None), "ok"):  # this tree: compiled at first use
    checks = [formats.CONFIG.ok, formats.RESOURCES.ok, formats.RECORD.ok, formats.REF.ok]
else:  # the baseline's quick checks, in `shapes`
    checks = [formats.config_ok, formats.resources_ok, formats.record_ok, formats.ref_ok]
for check in checks:
    check({})
print(time.process_time() - start)
"""
#: The module a good file's checks need, by tree (the baseline's pydantic schemas, in
#: `formats`, were imported only for a file its quick checks refused).
CHECKS_MODULE = {
    "baseline": "dws_dagster.workspace.shapes",
    "this tree": "dws_dagster.workspace.formats",
}
PYDANTIC = """
import sys, time
start = time.process_time()
import dws_dagster.workspace.formats
print(time.process_time() - start)
"""

OPEN = """
import sys, time
start = time.process_time()
from dws_dagster.workspace.definition import Workspace
Workspace.open(sys.argv[1]).store.get(sys.argv[2])
print(time.process_time() - start)
"""


def record_check() -> tuple[str, Callable[[Any], bool]]:
    """This tree's fast record check, named."""
    from dws_dagster.workspace import formats

    record = getattr(formats, "RECORD", None)
    if hasattr(record, "ok"):
        return "compiled", record.ok  # type: ignore[union-attr]
    from dws_dagster.workspace import shapes

    return "hand-written", shapes.record_ok  # type: ignore[attr-defined]


def timed(func: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        func()
        times.append(time.process_time() - start)
    return statistics.median(times)


def worker(root: Path, repeats: int) -> None:
    """Measure this process's code on the workspace at `root`; print the medians as JSON. The
    store's reads first, before anything else fills the process (the baseline's pydantic)."""
    import sqlite3

    import orjson

    from dws_dagster.workspace.definition import Workspace

    states = Workspace.open(root).store.state()
    pairs = [(ref, state.version) for ref, state in states.items() if state.version]

    def prefetch() -> None:
        store = Workspace.open(root).store
        with store.reading():
            store.prefetch(list(states), pairs)

    found: dict[str, float] = {}
    found["store state()"] = timed(lambda: Workspace.open(root).store.state(), repeats)
    found["sensor prefetch"] = timed(prefetch, repeats)
    with sqlite3.connect(root / ".dataworkspace" / "store.db") as connection:
        bodies = [
            orjson.loads(body) for (body,) in connection.execute("SELECT body FROM dws_records")
        ]
    kind, check = record_check()
    assert all(map(check, bodies)), "a record written by dws_dagster was refused"
    found["check a record"] = timed(lambda: [check(body) for body in bodies], repeats) / len(bodies)
    from dws_dagster.workspace import formats

    adapter = getattr(formats, "RECORD", None)
    if hasattr(adapter, "validate_python"):
        found["pydantic TypeAdapter of a record"] = timed(
            lambda: [adapter.validate_python(body) for body in bodies],  # type: ignore[union-attr]
            repeats,
        ) / len(bodies)
    print(json.dumps({"kind": kind, "records": len(bodies), "times": found}))


def in_process(tree: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("DWS_STORE_URL", None)
    # Not run from the repository: the working folder comes first on sys.path.
    return subprocess.run(
        [sys.executable, *argv], env=env, check=True, stdout=subprocess.PIPE, text=True, cwd=cwd
    )


def baseline_tree(rev: str, where: Path) -> Path:
    """The baseline's package, extracted from git (no worktree is registered)."""
    tree = where / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "dws_dagster"],
        check=True,
        stdout=subprocess.PIPE,
    ).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-rev", default="15cc82e", help="the commit measured against")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker), args.repeats)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from store_scale import GROUP, build, ref_of  # the same workspace builder

    tmp = Path(tempfile.mkdtemp(prefix="dws-bench-formats-"))
    try:
        trees = {"baseline": baseline_tree(args.baseline_rev, tmp), "this tree": REPO}
        for tree in trees.values():
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", str(tree / "dws_dagster")], check=True
            )
        print(f"building {args.refs:,} refs ...", file=sys.stderr, flush=True)
        ws = build(tmp / "ws", args.refs)
        focus = ref_of(args.refs // GROUP // 2, 5)
        runs: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        kinds: dict[str, str] = {}
        for _ in range(args.repeats):  # alternating, so both see the same machine
            for name, tree in trees.items():
                times = runs[name]
                report = json.loads(
                    in_process(
                        tree,
                        [__file__, "--worker", str(ws.root), "--repeats", "5"],
                        tmp,
                    ).stdout.splitlines()[-1]
                )
                kinds[name] = report["kind"]
                for figure, value in report["times"].items():
                    times.setdefault(figure, []).append(value)
                imports = [("import + first checks", IMPORT, [CHECKS_MODULE[name]])]
                if name == "baseline":
                    imports.append(("import pydantic schemas", PYDANTIC, []))
                for figure, script, extra in (
                    *imports,
                    ("open + get (new process)", OPEN, [str(ws.root), focus]),
                ):
                    value = float(in_process(tree, ["-c", script, *extra], tmp).stdout)
                    times.setdefault(figure, []).append(value)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base, ours = runs["baseline"], runs["this tree"]
    print(
        f"{args.refs:,} refs, medians of {args.repeats}; baseline {args.baseline_rev} "
        f"({kinds['baseline']} checks), this tree ({kinds['this tree']} checks)"
    )
    print(f"{'':34} {'baseline':>12} {'this tree':>12} {'ratio':>7}")
    for figure in base:
        old = statistics.median(base[figure])
        if figure not in ours:
            print(f"{figure:34} {_shown(old):>12}")
            continue
        new = statistics.median(ours[figure])
        print(f"{figure:34} {_shown(old):>12} {_shown(new):>12} {new / old:>6.2f}x")


def _shown(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    return f"{seconds * 1e3:.1f} ms"


if __name__ == "__main__":
    main()
