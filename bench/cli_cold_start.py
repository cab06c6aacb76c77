"""Cold start of the command line: `dws-dagster status` and `lineage` as new processes.

Each command runs `--repeats` times as a new process, alternating with the baseline
`python -c pass` (the interpreter's own start) in the same run; medians, and the ratio to
the baseline. For context, what importing Dagster or PySpark alone would add (the commands
import neither: `-X importtime` lists every module each command loads, and the script says
whether any is dagster, pyspark or py4j). The workspace holds `--refs` refs of real lineage
records (the builder of `store_scale.py`). Target: < 0.5 s per command.

    python bench/cli_cold_start.py --refs 1000 --repeats 15
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_scale import GROUP, build, ref_of  # the same workspace builder

HEAVY = ("dagster", "pyspark", "py4j")


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )


def imported(argv: list[str]) -> list[str]:
    """Every module `argv` imports, from Python's `-X importtime` report on stderr."""
    result = run(argv, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    return [
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    exe = str(Path(sys.executable).with_name("dws-dagster"))
    tmp = Path(tempfile.mkdtemp(prefix="dws-bench-cli-"))
    try:
        ws = build(tmp / "ws", args.refs)
        w = str(ws.root)
        focus = ref_of(args.refs // GROUP // 2, 5)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "dws-dagster status": [exe, "status", "-w", w],
            "dws-dagster lineage": [exe, "lineage", focus, "-w", w],
            "python -c 'import dagster'": [sys.executable, "-c", "import dagster"],
            "python -c 'import pyspark.sql'": [sys.executable, "-c", "import pyspark.sql"],
        }
        for argv in commands.values():  # warm the file system cache and .pyc files
            run(argv)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, argv in commands.items():
                start = time.perf_counter()
                run(argv)
                times[name].append(time.perf_counter() - start)
        median = {name: statistics.median(values) for name, values in times.items()}
        base = median["python -c pass"]
        print(
            f"{args.refs:,} refs, {args.repeats} runs each, {os.cpu_count()} CPUs, "
            f"python {sys.version.split()[0]}"
        )
        print(f"{'command':32} {'median s':>9} {'× python -c pass':>17}")
        for name, value in median.items():
            print(f"{name:32} {value:9.3f} {value / base:17.1f}")
        for name in ("dws-dagster status", "dws-dagster lineage"):
            modules = imported(commands[name])
            heavy = sorted({m for m in modules if m.split(".")[0] in HEAVY})
            print(
                f"{name}: {median[name]:.3f} s (target < 0.5 s); {len(modules)} modules "
                f"imported, dagster/pyspark/py4j among them: {', '.join(heavy) or 'none'}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
