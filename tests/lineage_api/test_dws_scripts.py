"""Step scripts ported from Data Workspaces by changing their import line, nothing else.

A user moving from the `dataworkspaces` package keeps their scripts: each builds its lineage
with `LineageBuilder().as_script_step().with_parameters(...).with_input_path(...)` (plus
`.as_results_step(dir)` for a results step), runs its work inside `with builder.eval() as
lineage:`, declares what it writes with `lineage.add_output_path(path)` and reports metrics
with `lineage.write_results(dict)`. These tests run three such scripts as real processes
(`python code/STEP.py`, from the workspace root, as a user would) and then drive snapshots,
diff, history and restore through `dws-dagster`, checking bytes on disk, not only records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import Workspace
from dws_dagster.workspace.versions import short
from tests.conftest import ROOT

Cli = Callable[..., tuple[int, str, str]]

DWS_IMPORT = "from dataworkspaces.lineage import LineageBuilder"
PORTED_IMPORT = "from dws_dagster.lineage import LineageBuilder"

# The scripts as a Data Workspaces user wrote them (the documented builder calls only).
PREPARE = f'''"""Clean the raw trips: drop incomplete rows, scale the distances."""
import argparse
import csv

{DWS_IMPORT}

SOURCE = "data/src/trips.csv"
CLEANED = "data/inter/clean.csv"

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--scale", type=int, default=1, help="distance unit factor")
args = parser.parse_args()

builder = LineageBuilder().as_script_step().with_parameters({{"scale": args.scale}}) \\
    .with_input_path(SOURCE)
with builder.eval() as lineage:
    lineage.add_output_path(CLEANED)
    with open(SOURCE, newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["distance"] and row["fare"]]
    with open(CLEANED, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\\n")
        writer.writerow(["distance", "fare"])
        for row in rows:
            writer.writerow([int(row["distance"]) * args.scale, int(row["fare"])])
'''

FEATURES = f'''"""Fare per distance unit, rounded."""
import argparse
import csv

{DWS_IMPORT}

CLEANED = "data/inter/clean.csv"
FEATURES = "data/inter/features.csv"

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--digits", type=int, default=4)
args = parser.parse_args()

builder = LineageBuilder().as_script_step().with_parameters({{"digits": args.digits}}) \\
    .with_input_path(CLEANED)
with builder.eval() as lineage:
    lineage.add_output_path(FEATURES)
    with open(CLEANED, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(FEATURES, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\\n")
        writer.writerow(["distance", "fare", "fare_per_km"])
        for row in rows:
            rate = round(int(row["fare"]) / int(row["distance"]), args.digits)
            writer.writerow([row["distance"], row["fare"], rate])
'''

TRAIN = f'''"""Fit one rate (the mean fare per km) and report its mean absolute error."""
import argparse
import csv
import json
import os

{DWS_IMPORT}

FEATURES = "data/inter/features.csv"
RESULTS = "results"

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--estimator", choices=["mean"], default="mean")
parser.add_argument("--run-description", default=None)
args = parser.parse_args()

builder = LineageBuilder().as_script_step().with_parameters({{"estimator": args.estimator}}) \\
    .with_input_path(FEATURES).as_results_step(RESULTS, run_description=args.run_description)
with builder.eval() as lineage:
    with open(FEATURES, newline="") as f:
        rates = [float(row["fare_per_km"]) for row in csv.DictReader(f)]
    rate = sum(rates) / len(rates)
    with open(os.path.join(RESULTS, "model.json"), "w") as f:
        json.dump({{"rate": rate}}, f)
    lineage.write_results({{"mae": sum(abs(r - rate) for r in rates) / len(rates)}})
'''

SCRIPTS = {"prepare": PREPARE, "features": FEATURES, "train": TRAIN}

# One incomplete row for prepare.py to drop. Rates 2, 2.5, 2, 2.5: mean 2.25, mae 0.25.
SOURCE_V1 = "distance,fare\n1,2\n2,5\n,4\n4,8\n2,5\n"
# Hand-corrected fare (4 km: 8 -> 10); with --scale 2 the rates are 1, 1.25, 1.25, 1.25:
# mean 1.1875, mae 0.09375 (both exact in binary, so compared with ==).
SOURCE_V2 = SOURCE_V1.replace("4,8\n", "4,10\n")
MAE_V1, MAE_V2 = 0.25, 0.09375
# A hand edit of features.py between the snapshots: code outside git is versioned by content.
FEATURES_EDIT = "# Reviewed: train.py fits fare_per_km.\n"

OUTPUT_REFS = ["inter/clean.csv", "inter/features.csv", "results"]
#: What the user's workspace holds after a run: restores are compared with it file by file.
USER_FILES = {
    "code/prepare.py",
    "code/features.py",
    "code/train.py",
    "data/src/trips.csv",
    "data/inter/clean.csv",
    "data/inter/features.csv",
    "results/model.json",
    "results/results.json",
}


def port(script: str) -> str:
    """The one change a user makes: the import line."""
    ported = script.replace(DWS_IMPORT, PORTED_IMPORT)
    changed = [
        (a, b) for a, b in zip(script.splitlines(), ported.splitlines(), strict=True) if a != b
    ]
    assert changed == [(DWS_IMPORT, PORTED_IMPORT)]
    return ported


def run_script(root: Path, step: str, *args: str) -> None:
    """`python code/STEP.py ARGS` from the workspace root, in a new interpreter, as a user runs
    it; the script finds the workspace from its working folder."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, f"code/{step}.py", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{step}.py failed:\n{result.stderr}"
    assert "warning" not in result.stderr.lower(), result.stderr


def run_pipeline(root: Path, scale: int) -> None:
    """The three steps in order, as the user's shell history would have them."""
    run_script(root, "prepare", "--scale", str(scale))
    run_script(root, "features", "--digits", "4")
    run_script(root, "train", "--run-description", f"scale {scale}")


def workspace_files(root: Path) -> dict[str, bytes]:
    """Every file of the workspace a user sees (the data, the code, the results), with its
    bytes: all but the workspace's own metadata and the snapshots' results archives."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith((".dataworkspace/", "results/snapshots/")) or not path.is_file():
            continue
        files[rel] = path.read_bytes()
    return files


def archives(root: Path) -> dict[str, bytes]:
    """The snapshots' results archives, with their bytes."""
    folder = root / "results/snapshots"
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def status_rows(cli: Cli, root: Path) -> dict[str, dict[str, Any]]:
    code, out, err = cli("status", "--format", "json", cwd=root)
    assert code == 0, err
    return {row["ref"]: row for row in json.loads(out)["refs"]}


def versions(ws: Workspace) -> dict[str, str]:
    """The content version of every ref the scripts touch, and of the code, now on disk."""
    refs = [
        "src",
        "src/trips.csv",
        *OUTPUT_REFS,
        "code",
        "code/prepare.py",
        "code/features.py",
        "code/train.py",
    ]
    return {ref: ws.version_of(ref) for ref in refs}


def snapshot_json(cli: Cli, root: Path, *tag: str) -> dict[str, Any]:
    code, out, err = cli("snapshot", *tag, "--format", "json", cwd=root)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def ported_ws(tmp_path: Path, store_backend: str) -> Workspace:
    """A workspace laid out as in Data Workspaces (one resource of each role), holding the
    source CSV and the three ported scripts in its code resource. `store_backend` keeps the
    developer's DWS_STORE_URL away from the scripts."""
    ws = Workspace.init(tmp_path / "ws")
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    ws.add_resource("code", "code", path="code")
    (ws.root / "data/src/trips.csv").write_text(SOURCE_V1)
    for step, script in SCRIPTS.items():
        (ws.root / "code" / f"{step}.py").write_text(port(script))
    return ws


def test_ported_scripts_record_their_lineage(ported_ws: Workspace, cli: Cli) -> None:
    """After one run of the unchanged scripts, `status` and `lineage` show what Data
    Workspaces would: each output owned by its script's step at the version on disk, the
    source observed, and the results' chain back to the source CSV."""
    ws, root = ported_ws, ported_ws.root
    run_pipeline(root, scale=1)
    now = versions(ws)

    rows = status_rows(cli, root)
    assert {ref: (row["status"], row["step"], row["version"]) for ref, row in rows.items()} == {
        "src/trips.csv": ("source", None, now["src/trips.csv"]),
        "inter/clean.csv": ("ok", "prepare", now["inter/clean.csv"]),
        "inter/features.csv": ("ok", "features", now["inter/features.csv"]),
        "results": ("ok", "train", now["results"]),
    }
    assert (
        root / "data/inter/clean.csv"
    ).read_text() == "distance,fare\n1,2\n2,5\n4,8\n2,5\n"  # the incomplete row dropped, scale 1

    code, out, err = cli("lineage", "results", "--format", "json", cwd=root)
    assert code == 0, err
    graph = json.loads(out)
    node = {ref: f"{ref}@{now[ref]}" for ref in ["src/trips.csv", *OUTPUT_REFS]}
    assert graph["focus"] == node["results"]
    assert [(item["id"], item["depth"]) for item in graph["upstream"]] == [
        (node["results"], 0),
        (node["inter/features.csv"], 1),
        (node["inter/clean.csv"], 2),
        (node["src/trips.csv"], 3),
    ]
    assert sorted((e["source"], e["target"], e["stale"]) for e in graph["edges"]) == sorted(
        [
            (node["src/trips.csv"], node["inter/clean.csv"], False),
            (node["inter/clean.csv"], node["inter/features.csv"], False),
            (node["inter/features.csv"], node["results"], False),
        ]
    )
    assert {n["ref"]: n["step"] for n in graph["nodes"]} == {
        "src/trips.csv": None,
        "inter/clean.csv": "prepare",
        "inter/features.csv": "features",
        "results": "train",
    }
    assert graph["last_run"]["step"] == "train" and graph["last_run"]["status"] == "ok"

    # The records say what a script step is: its parameters, its code's version, its
    # command line (as run), its inputs at the versions read.
    prep = ws.store.get("inter/clean.csv").record
    assert prep["parameters"] == {"scale": 1}
    assert prep["step"]["name"] == "prepare" and prep["step"]["kind"] == "script"
    assert prep["step"]["code"] == [{"ref": "code/prepare.py", "version": now["code/prepare.py"]}]
    assert prep["step"]["command_line"] == [sys.executable, "code/prepare.py", "--scale", "1"]
    assert prep["inputs"] == [{"ref": "src/trips.csv", "version": now["src/trips.csv"]}]
    train = ws.store.get("results").record
    assert train["parameters"] == {"estimator": "mean"}
    assert train["metrics"] == {"mae": MAE_V1}
    assert train["inputs"] == [{"ref": "inter/features.csv", "version": now["inter/features.csv"]}]

    # Data Workspaces' results.json layout, written by write_results.
    results = json.loads((root / "results/results.json").read_text())
    assert results["step"] == "train" and results["metrics"] == {"mae": MAE_V1}
    assert results["parameters"] == {"estimator": "mean"}
    assert results["run_description"] == "scale 1"
    assert json.loads((root / "results/model.json").read_text()) == {"rate": 2.25}


def test_snapshot_diff_history_restore_of_ported_scripts(ported_ws: Workspace, cli: Cli) -> None:
    """The workflow on top of the ported scripts: snapshot, change a parameter, the source data
    and the code, snapshot again; the diff names each change, history shows both snapshots'
    metrics, and restoring either brings back its exact bytes (data, results, source, code)
    and lineage, so that a snapshot taken right after finds nothing new."""
    ws, root = ported_ws, ported_ws.root

    run_pipeline(root, scale=1)
    first_files, first_versions = workspace_files(root), versions(ws)
    first_status = status_rows(cli, root)
    assert set(first_files) == USER_FILES
    v1 = snapshot_json(cli, root, "v1")
    assert v1["new_snapshot"] is True and v1["tags"] == ["v1"]
    assert v1["metrics"] == {"mae": MAE_V1}
    assert v1["results"] == [{"ref": "results", "folder": "snapshots/v1"}]
    assert v1["warnings"] == [] and v1["drift"] == []

    # The results archive: the results files as they were, with the lineage beside them.
    v1_archive = archives(root)
    assert set(v1_archive) == {"v1/results.json", "v1/model.json", "v1/lineage.json"}
    assert v1_archive["v1/results.json"] == first_files["results/results.json"]
    assert v1_archive["v1/model.json"] == first_files["results/model.json"]
    lineage = json.loads(v1_archive["v1/lineage.json"])
    assert (lineage["snapshot"], lineage["ref"], lineage["version"]) == (
        v1["hash"],
        "results",
        first_versions["results"],
    )
    assert {(r["ref"], r["version"]) for r in lineage["records"]} == {
        (ref, first_versions[ref]) for ref in ["src/trips.csv", *OUTPUT_REFS]
    }

    # The user corrects a fare by hand, edits features.py, re-runs everything with --scale 2.
    (root / "data/src/trips.csv").write_text(SOURCE_V2)
    with (root / "code/features.py").open("a") as f:
        f.write(FEATURES_EDIT)
    run_pipeline(root, scale=2)
    second_files, second_versions = workspace_files(root), versions(ws)
    second_status = status_rows(cli, root)
    assert all(
        first_versions[ref] != second_versions[ref]
        for ref in ["src/trips.csv", *OUTPUT_REFS, "code", "code/features.py"]
    )
    assert first_versions["code/prepare.py"] == second_versions["code/prepare.py"]
    v2 = snapshot_json(cli, root, "v2")
    assert v2["new_snapshot"] is True and v2["hash"] != v1["hash"]
    assert v2["metrics"] == {"mae": MAE_V2}
    both_archives = archives(root)
    assert set(both_archives) == {
        *v1_archive,
        "v2/results.json",
        "v2/model.json",
        "v2/lineage.json",
    }
    assert {k: v for k, v in both_archives.items() if k.startswith("v1/")} == v1_archive

    code, out, err = cli("diff", "v1", "v2", "--format", "json", cwd=root)
    assert code == 0, err
    a, b = first_versions, second_versions

    def moved(what: str, ref: str) -> str:
        return f"{what} {short(a[ref])} -> {short(b[ref])}"

    assert json.loads(out) == [
        {
            "ref": "code",
            "kind": "changed",
            "changes": [moved("code", "code"), "files changed: features.py"],
        },
        {
            "ref": "inter/clean.csv",
            "kind": "changed",
            "changes": [
                moved("version", "inter/clean.csv"),
                "parameter scale: 1 -> 2",
                moved("input src/trips.csv", "src/trips.csv"),
            ],
        },
        {
            "ref": "inter/features.csv",
            "kind": "changed",
            "changes": [
                moved("version", "inter/features.csv"),
                moved("code code/features.py", "code/features.py"),
                moved("input inter/clean.csv", "inter/clean.csv"),
            ],
        },
        {
            "ref": "results",
            "kind": "changed",
            "changes": [
                moved("version", "results"),
                moved("input inter/features.csv", "inter/features.csv"),
                "metrics changed",
            ],
        },
        {
            "ref": "src",
            "kind": "changed",
            "changes": [moved("source data", "src"), "files changed: trips.csv"],
        },
        {"ref": "src/trips.csv", "kind": "changed", "changes": [moved("version", "src/trips.csv")]},
    ]
    code, out, err = cli("diff", "v1", "v2", cwd=root)  # the text a person reads
    assert code == 0, err
    assert "parameter scale: 1 -> 2" in out and "changed  src/trips.csv" in out

    code, out, err = cli("history", "--format", "json", cwd=root)
    assert code == 0, err
    history = json.loads(out)
    assert [(h["tags"], h["hash"], h["metrics"]) for h in history] == [
        (["v2"], v2["hash"], {"mae": MAE_V2}),
        (["v1"], v1["hash"], {"mae": MAE_V1}),
    ]

    code, out, err = cli("restore", "v1", "--format", "json", cwd=root)
    assert code == 0, err
    report = json.loads(out)
    assert report["data_restored"] == [
        "code",
        "inter/clean.csv",
        "inter/features.csv",
        "results",
        "src",
        "src/trips.csv",
    ]
    assert report["not_restored"] == [] and report["code_left"] == []
    assert report["lineage_removed"] == []
    # Every file as after the first run, byte for byte: outputs, results, the source CSV and
    # the hand-edited code; nothing left beside them (staging copies, kept versions).
    assert workspace_files(root) == first_files
    assert status_rows(cli, root) == first_status
    assert {ref: row["version"] for ref, row in first_status.items()} == {
        ref: first_versions[ref] for ref in ["src/trips.csv", *OUTPUT_REFS]
    }
    assert archives(root) == both_archives  # the archives are not data: left as they were
    again = snapshot_json(cli, root)
    assert again["new_snapshot"] is False and again["hash"] == v1["hash"]

    code, out, err = cli("restore", "v2", "--format", "json", cwd=root)
    assert code == 0, err
    assert json.loads(out)["not_restored"] == []
    assert workspace_files(root) == second_files
    assert archives(root) == both_archives
    assert status_rows(cli, root) == second_status
    again = snapshot_json(cli, root)
    assert again["new_snapshot"] is False and again["hash"] == v2["hash"]

    code, out, err = cli("history", "--format", "json", cwd=root)
    assert [h["tags"] for h in json.loads(out)] == [["v2"], ["v1"]]  # restores took none


def test_source_files_no_step_read_are_captured_and_restored(
    ported_ws: Workspace, cli: Cli
) -> None:
    """A step that reads one file of a source folder leaves the others there: they are data
    of the workspace too, so a hand edit of one makes a new snapshot, the diff names the
    file, and a restore brings it back (the source resource is captured whole)."""
    root = ported_ws.root
    zones = root / "data/src/zones.csv"
    zones.write_text("zone,borough\n1,Queens\n")
    run_pipeline(root, scale=1)
    assert cli("snapshot", "v1", cwd=root)[0] == 0
    zones.write_text("zone,borough\n1,Brooklyn\n")
    code, out, err = cli("snapshot", "v2", "--format", "json", cwd=root)
    assert code == 0 and json.loads(out)["new_snapshot"] is True, err
    code, out, err = cli("diff", "v1", "v2", cwd=root)
    assert code == 0 and "changed  src" in out and "files changed: zones.csv" in out, out
    assert cli("restore", "v1", cwd=root)[0] == 0
    assert zones.read_text() == "zone,borough\n1,Queens\n"
