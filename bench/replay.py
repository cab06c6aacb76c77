"""Replaying the small example against running it fresh, side by side in one run.

Fresh: `dws-dagster demo DIR --small` in a new folder that is a git repository holding a copy of
the example project (landing its data, every Dagster run, the sensor's work, the snapshot, the
lineage page). Replay: `dws-dagster replay` of that demo's last snapshot into a scratch folder
(cloning the repository, bringing back the source data, every Dagster run again as a tagged
run, the verdict). Each is a new process, timed wall-clock; `--repeats` pairs, medians and the
ratio replay / fresh. Target: replay <= 1.2x the fresh run.

    python bench/replay.py --repeats 3
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

ROOT = Path(__file__).resolve().parent.parent


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b", *args],
        check=True,
        capture_output=True,
    )


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def one_pair(base: Path) -> tuple[float, float, int]:
    root = base / "demo"
    root.mkdir(parents=True)
    shutil.copytree(
        ROOT / "example_project",
        root / "example_project",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    git(root, "init", "-q")
    git(root, "add", "example_project")
    git(root, "commit", "-qm", "example")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)]),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "DAGSTER_HOME": str(root / ".dagster"),
        "DWS_EXAMPLE_WORKSPACE": str(root),
    }
    cli = [sys.executable, "-m", "dws_dagster.cli"]
    fresh, _ = timed([*cli, "demo", str(root), "--small"], root, env)
    _, listed = timed([*cli, "history", "--format", "json"], root, env)
    # The newest snapshot (history lists newest first): after the weather-adjusted forecast.
    last = max(json.loads(listed), key=lambda info: info["created"])["hash"]
    replay, out = timed(
        [*cli, "replay", last, "--format", "json", "--into", str(base / "scratch")], root, env
    )
    found = json.loads(out)
    reproduced = sum(r["verdict"] == "reproduced" for r in found["refs"])
    if not found["reproduced"]:
        print(f"  note: {len(found['refs']) - reproduced} refs did not reproduce", file=sys.stderr)
    return fresh, replay, reproduced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    fresh_times: list[float] = []
    replay_times: list[float] = []
    for i in range(args.repeats):
        base = Path(tempfile.mkdtemp(prefix="dws-bench-replay-"))
        try:
            fresh, replay, refs = one_pair(base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        fresh_times.append(fresh)
        replay_times.append(replay)
        print(f"pair {i + 1}: fresh {fresh:.1f} s, replay {replay:.1f} s ({refs} refs reproduced)")
    fresh_median = statistics.median(fresh_times)
    replay_median = statistics.median(replay_times)
    print(f"fresh run (median):  {fresh_median:.1f} s")
    print(f"replay (median):     {replay_median:.1f} s")
    print(f"replay / fresh:      {replay_median / fresh_median:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
