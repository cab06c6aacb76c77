"""Per-step cost of the script lineage API, dws_dagster against Data Workspaces 1.6.0.

The same scenario runs in both tools: a git workspace with a `src` (source-data) and an `inter`
(intermediate-data) local-files resource holding N refs each (folders `part-NNNN`, N lineage
entries written beforehand by the same API), then K steps, each

    LineageBuilder().with_step_name("transform").with_parameters({...})
        .with_workspace_directory(ws).with_input_path(src/part-i).eval()
    -> add_output_path(inter/part-i) -> (write the output) -> complete()

One driver script, written to a temporary folder, runs the scenario with either tool's
`LineageBuilder` (dws_dagster's is a drop-in: only the import differs), each in its own
interpreter: Data Workspaces in a throwaway virtualenv this benchmark creates (cached under
~/.cache/dws-dagster-bench, or --venv-dir), dws_dagster in the interpreter running this file.
Figures, each the median over its samples:

  warm step   one step inside a process that has already run steps (the two tools' processes
              take turns, --batch steps each); the lineage calls only, not writing the output
  cold step   a fresh process running one step: interpreter start, imports, opening the
              workspace and its lineage, the step (wall time of the subprocess; turns again)
  python start  `python -c pass` of the same interpreter (the project's virtualenv starts
              slower than a bare one: its .pth files), and cold step minus that

A third column runs dws_dagster at an earlier commit (`--journal-rev`, checked out into a
temporary git worktree and put first on PYTHONPATH): the journal store the database store
replaced, so both stores are measured in the same run (--no-journal-row leaves it out).

Targets: dws_dagster / dataworkspaces ≤ 1× at 10 refs, flat as refs grow (500 refs); the warm
step on the SQLite store ≤ 1.2× the journal store's.

    .venv/bin/python bench/lineage_api_vs_dataworkspaces.py --refs 10 500 --steps 100 --cold 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DWS_VERSION = "1.6.0"

DRIVER = r'''
"""Runs the lineage-API scenario with one tool's LineageBuilder (argv: see main())."""
import json
import os
import subprocess
import sys
import time

TOOL = sys.argv[1]
if TOOL == "dataworkspaces":
    from dataworkspaces.lineage import LineageBuilder
else:
    from dws_dagster.lineage import LineageBuilder


def part(ws, resource, i):
    return os.path.join(ws, resource, f"part-{i:04d}")


def write_part(folder, text):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "data.csv"), "w") as handle:
        handle.write(text)


def step(ws, i, run):
    """One step reading src/part-i and writing inter/part-i; seconds spent in lineage calls."""
    start = time.perf_counter()
    lineage = (LineageBuilder().with_step_name("transform")
               .with_parameters({"part": i, "run": run, "alpha": 0.5, "mode": "scale"})
               .with_workspace_directory(ws).with_input_path(part(ws, "src", i)).eval())
    lineage.add_output_path(part(ws, "inter", i))
    declared = time.perf_counter()
    write_part(part(ws, "inter", i), f"id,value\n{i},{run}\n")
    written = time.perf_counter()
    lineage.complete()
    done = time.perf_counter()
    return (declared - start) + (done - written)


def git(ws, *args):
    subprocess.run(["git", "-C", ws, *args], check=True, capture_output=True)


def setup(ws, refs):
    os.makedirs(ws)
    git(ws, "init", "-q")
    if TOOL == "dataworkspaces":
        dws = os.path.join(os.path.dirname(sys.executable), "dws")
        for command in (["init", "--hostname", "bench"],
                        ["add", "local-files", "--role", "source-data", "--name", "src", "./src"],
                        ["add", "local-files", "--role", "intermediate-data", "--name", "inter",
                         "./inter"]):
            os.makedirs(os.path.join(ws, "src"), exist_ok=True)
            os.makedirs(os.path.join(ws, "inter"), exist_ok=True)
            subprocess.run([dws, "--batch", *command], cwd=ws, check=True, capture_output=True)
    else:
        from dws_dagster import Workspace

        workspace = Workspace.init(ws)
        workspace.add_resource("src", "source-data", path="src")
        workspace.add_resource("inter", "intermediate-data", path="inter")
        with open(os.path.join(ws, ".gitignore"), "w") as handle:
            handle.write("/src/\n/inter/\n")
        git(ws, "add", "-A")
        git(ws, "commit", "-q", "-m", "workspace")
    for i in range(refs):
        write_part(part(ws, "src", i), f"id,value\n{i},{i * i}\n")
    for i in range(refs):
        step(ws, i, 0)


def main():
    action, ws, refs = sys.argv[2], sys.argv[3], int(sys.argv[4])
    if action == "setup":
        setup(ws, refs)
    elif action == "serve":  # one line "COUNT" in, COUNT steps run, their timings out
        run = 0
        for line in sys.stdin:
            times = []
            for _ in range(int(line)):
                run += 1
                times.append(step(ws, (run * 7) % refs, run))
            print(json.dumps(times), flush=True)
    elif action == "one":
        step(ws, int(sys.argv[5]) % refs, int(sys.argv[5]) + 1000)


main()
'''


FIGURES = {
    "warm": "warm step",
    "cold": "cold step",
    "start": "  python start",
    "cold-start": "  cold - start",
}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dws-dagster-bench"


def dataworkspaces_python(venv: Path) -> Path:
    """The interpreter of a throwaway virtualenv holding dataworkspaces (created once)."""
    python = venv / "bin" / "python"
    ready = venv / ".installed"
    if ready.exists() and python.exists():
        return python
    print(f"creating {venv} with dataworkspaces=={DWS_VERSION} ...", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            f"dataworkspaces=={DWS_VERSION}",
        ],
        check=True,
    )
    ready.write_text(DWS_VERSION + "\n")
    return python


#: Trees put first on PYTHONPATH, by tool (the journal store's checkout).
TREES: dict[str, Path] = {}


def git_env(tool: str = "") -> dict[str, str]:
    """Both tools commit to git: give the commits an identity whatever the machine has."""
    env = dict(os.environ)
    if tool in TREES:
        env["PYTHONPATH"] = str(TREES[tool])
    for role in ("AUTHOR", "COMMITTER"):
        env.setdefault(f"GIT_{role}_NAME", "dws bench")
        env.setdefault(f"GIT_{role}_EMAIL", "bench@localhost")
    return env


def run_driver(python: Path, tool: str, driver: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), str(driver), tool, *args], env=git_env(tool), capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"{tool} driver failed ({args[0]}):\n{done.stderr}")


def measure(
    pythons: dict[str, Path], driver: Path, tmp: Path, refs: int, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """Median warm and cold step of each tool at `refs` refs, the tools taking turns so that
    the load of a shared machine falls on both alike."""
    spaces = {tool: tmp / f"{tool}-{refs}" for tool in pythons}
    for tool, python in pythons.items():
        run_driver(python, tool, driver, "setup", str(spaces[tool]), str(refs))
    servers = {
        tool: subprocess.Popen(
            [str(python), str(driver), tool, "serve", str(spaces[tool]), str(refs)],
            env=git_env(tool),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tool, python in pythons.items()
    }
    warm: dict[str, list[float]] = {tool: [] for tool in pythons}
    try:
        rounds = max(1, args.steps // args.batch)
        for round_number in range(rounds + 1):  # round 0 warms up
            for tool, server in servers.items():
                assert server.stdin is not None
                assert server.stdout is not None
                server.stdin.write(f"{args.warmup if round_number == 0 else args.batch}\n")
                server.stdin.flush()
                line = server.stdout.readline()
                if not line:
                    sys.exit(f"{tool} driver stopped (serve); run it by hand to see why")
                if round_number:
                    warm[tool].extend(json.loads(line))
    finally:
        for server in servers.values():
            assert server.stdin is not None
            server.stdin.close()
            server.wait()
    cold: dict[str, list[float]] = {tool: [] for tool in pythons}
    bare: dict[str, list[float]] = {tool: [] for tool in pythons}
    for i in range(args.cold):
        for tool, python in pythons.items():
            start = time.perf_counter()
            run_driver(python, tool, driver, "one", str(spaces[tool]), str(refs), str(i))
            cold[tool].append(time.perf_counter() - start)
            start = time.perf_counter()
            subprocess.run([str(python), "-c", "pass"], check=True)
            bare[tool].append(time.perf_counter() - start)
    return {
        tool: {
            "warm": statistics.median(warm[tool]),
            "cold": statistics.median(cold[tool]),
            "start": statistics.median(bare[tool]),
            "cold-start": statistics.median(cold[tool]) - statistics.median(bare[tool]),
        }
        for tool in pythons
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refs", type=int, nargs="+", default=[10, 500])
    parser.add_argument("--steps", type=int, default=100, help="timed warm steps per tool")
    parser.add_argument("--batch", type=int, default=10, help="warm steps per turn")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--cold", type=int, default=10, help="fresh processes, one step each")
    parser.add_argument(
        "--journal-row",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time dws_dagster at --journal-rev (the journal store)",
    )
    parser.add_argument("--journal-rev", default="60b9e85")
    parser.add_argument(
        "--venv-dir", type=Path, default=cache_dir() / f"dataworkspaces-{DWS_VERSION}"
    )
    args = parser.parse_args()

    pythons = {
        "dws_dagster": Path(sys.executable),
        "dataworkspaces": dataworkspaces_python(args.venv_dir),
    }
    tmp = Path(tempfile.mkdtemp(prefix="dws-lineage-bench-"))
    repo = Path(__file__).resolve().parent.parent
    if args.journal_row:
        pythons["dws_dagster-journal"] = Path(sys.executable)
        TREES["dws_dagster-journal"] = tmp / "journal-tree"
        subprocess.run(
            [
                "git",
                "-C",
                str(repo),
                "worktree",
                "add",
                "--detach",
                str(TREES["dws_dagster-journal"]),
                args.journal_rev,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        driver = tmp / "driver.py"
        driver.write_text(DRIVER)
        results = {refs: measure(pythons, driver, tmp, refs, args) for refs in args.refs}
    finally:
        if TREES:
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(repo),
                    "worktree",
                    "remove",
                    "--force",
                    str(TREES["dws_dagster-journal"]),
                ],
                check=False,
            )
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"steps={args.steps} batch={args.batch} warmup={args.warmup} cold={args.cold} "
        f"dataworkspaces=={DWS_VERSION}"
    )
    extra = "dws_dagster-journal" in pythons
    print(
        f"{'refs':>5}  {'figure':<13} {'dws_dagster':>12} {'dataworkspaces':>15} {'ratio':>7}"
        + (f"  {'journal':>11} {'ratio':>7} {'db÷journal':>10}" if extra else "")
    )
    for refs, by_tool in results.items():
        for figure in FIGURES:
            ours, theirs = by_tool["dws_dagster"][figure], by_tool["dataworkspaces"][figure]
            line = (
                f"{refs:>5}  {FIGURES[figure]:<13} {ours * 1000:>9.2f} ms "
                f"{theirs * 1000:>12.2f} ms {ours / theirs:>6.2f}x"
            )
            if extra:
                journal = by_tool["dws_dagster-journal"][figure]
                line += (
                    f"  {journal * 1000:>8.2f} ms {journal / theirs:>6.2f}x {ours / journal:>9.2f}x"
                )
            print(line)
    low, high = min(results), max(results)
    if low != high:
        for figure in ("warm", "cold"):
            growth = {
                tool: results[high][tool][figure] / results[low][tool][figure] for tool in pythons
            }
            print(
                f"growth {low}->{high} refs, {figure} step: "
                + ", ".join(f"{tool} {value:.2f}x" for tool, value in growth.items())
            )


if __name__ == "__main__":
    main()
