"""Script steps as people write them, run as real processes in a real git repository, for the
replay tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dws_dagster.workspace.definition import Workspace
from tests.conftest import ROOT, write

#: A script step as people write them: named after its file, its command line recorded.
STEP_SCRIPT = """\
import argparse
from dws_dagster.lineage import LineageBuilder

parser = argparse.ArgumentParser()
parser.add_argument("--input", action="append", default=[])
parser.add_argument("--output")
parser.add_argument("--password", default="")
args = parser.parse_args()
builder = LineageBuilder().as_script_step().with_parameters({"scale": 2})
builder = builder.with_input_refs(args.input) if args.input else builder.with_no_inputs()
with builder.eval() as lineage:
    ws = lineage.workspace
    paths = [ws.local_path(ref) for ref in args.input]
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*.csv")))]
    text = "".join(p.read_text() for p in files)
    lineage.add_output_ref(args.output)
    out = ws.local_path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "part-0.csv").write_text(text.upper() or "empty\\n")
"""
STEPS = ("prep", "train", "part_a", "part_b", "merge")


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def script(ws: Workspace, step: str, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, f"code/{step}.py", *args],
        cwd=ws.root,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ws.root)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def make_git_ws(ws: Workspace) -> tuple[Workspace, str]:
    """`ws` in a git repository whose committed code is the step script."""
    for step in STEPS:
        write(ws.root / f"code/{step}.py", STEP_SCRIPT)
    write(ws.root / "data/src/trips.csv", "a\n1\n")
    git(ws.root, "init", "-q")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "code")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code")
    return ws, git(ws.root, "rev-parse", "HEAD")
