"""The `dws-dagster` command line, in-process and as a real console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dws_dagster import Workspace
from dws_dagster.workspace.versions import data_size
from tests.conftest import ROOT, run_python, run_step, tree_state, write


def test_init_add_and_status(tmp_path: Path, cli) -> None:
    code, out, _ = cli("init", tmp_path / "w")
    assert code == 0 and "initialised" in out
    assert (tmp_path / "w/.dataworkspace/resources.json").is_file()
    code, out, _ = cli(
        "add", "raw", "--role", "source-data", "--path", "data/raw", cwd=tmp_path / "w"
    )
    assert code == 0 and (tmp_path / "w/data/raw").is_dir()
    code, out, _ = cli(
        "add",
        "lake",
        "--role",
        "intermediate-data",
        "--uri",
        "s3a://bucket/lake",
        cwd=tmp_path / "w/data/raw",
    )  # searches upward
    assert code == 0
    code, out, _ = cli("status", "--format", "json", "--workspace", tmp_path / "w")
    data = json.loads(out)
    assert [(r["name"], r["role"], r.get("path"), r.get("uri")) for r in data["resources"]] == [
        ("raw", "source-data", "data/raw", None),
        ("lake", "intermediate-data", None, "s3a://bucket/lake"),
    ]
    assert data["refs"] == []


def test_status_lists_refs_versions_and_problems(script_pipeline_ws: Workspace, cli) -> None:
    ws = script_pipeline_ws
    code, out, _ = cli("status", "-w", ws.root)
    assert code == 0
    prep_version = ws.store.get("inter/prep").version
    assert "inter/prep" in out and prep_version[:12] in out and "prep" in out
    assert "results/exp" in out and "src/trips.csv" in out and "source" in out

    with pytest.raises(RuntimeError):
        from dws_dagster import LineageBuilder

        with (
            LineageBuilder()
            .with_step_name("prep")
            .with_parameters({})
            .with_input_ref("src/trips.csv")
            .with_workspace_directory(ws.root)
            .eval() as lineage
        ):
            lineage.add_output_ref("inter/prep")
            write(ws.local_path("inter/prep") / "part-0.csv", "partial")
            raise RuntimeError("crash")
    code, out, _ = cli("status", "-w", ws.root, "--verify", "--format", "json")
    rows = {row["ref"]: row for row in json.loads(out)["refs"]}
    assert rows["inter/prep"]["status"] == "unknown"
    assert rows["inter/prep"]["data"] == "changed"
    assert rows["src/trips.csv"]["data"] == "matches"
    code, out, _ = cli("status", "-w", ws.root)
    assert "need attention: inter/prep (unknown)" in out


@pytest.mark.parametrize("fmt", ["text", "json", "dot", "mermaid", "html"])
def test_lineage_formats(script_pipeline_ws: Workspace, cli, fmt: str) -> None:
    code, out, err = cli("lineage", "inter/prep", "--format", fmt, "-w", script_pipeline_ws.root)
    assert code == 0, err
    version = script_pipeline_ws.store.get("inter/prep").version
    if fmt == "text":
        assert "Upstream" in out and "Downstream" in out and "Last run" in out
        assert "src/trips.csv@" in out and "results/exp@" in out
        assert out.index("src/trips.csv@") < out.index("Downstream") < out.index("results/exp@")
    elif fmt == "json":
        data = json.loads(out)
        assert data["focus"] == f"inter/prep@{version}"
        refs = {node["ref"] for node in data["nodes"]}
        assert refs == {"src/trips.csv", "inter/prep", "results/exp"}
        assert data["last_run"]["status"] == "ok"
    elif fmt == "dot":
        assert out.startswith("digraph") and "inter/prep" in out
    elif fmt == "mermaid":
        assert out.startswith("flowchart LR") and "inter/prep" in out
    else:
        assert "<svg" in out and "inter/prep" in out and "https://" not in out


def test_lineage_html_to_file_and_from_snapshot(
    script_pipeline_ws: Workspace, cli, tmp_path: Path
) -> None:
    ws = script_pipeline_ws
    assert cli("snapshot", "v1", "-w", ws.root)[0] == 0
    write(ws.root / "data/src/trips.csv", "a\n2\n")
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\n2\n"}, {"scale": 3})
    target = tmp_path / "graph.html"
    code, out, _ = cli(
        "lineage", "inter/prep", "--snapshot", "v1", "--format", "html", "-o", target, "-w", ws.root
    )
    assert code == 0 and target.is_file()
    assert "<svg" in target.read_text()
    code, out, _ = cli(
        "lineage", "inter/prep", "--snapshot", "v1", "--format", "json", "-w", ws.root
    )
    old = json.loads(out)
    code, out, _ = cli("lineage", "inter/prep", "--format", "json", "-w", ws.root)
    new = json.loads(out)
    assert old["focus"] != new["focus"]


def test_snapshot_history_diff_restore_delete(script_pipeline_ws: Workspace, cli) -> None:
    ws = script_pipeline_ws
    code, out, _ = cli("snapshot", "v1", "-m", "baseline", "-w", ws.root)
    assert code == 0 and "took snapshot" in out and "mae=1.5" in out
    assert "data retained: " in out
    v1_bytes = data_size(ws.local_path("inter/prep"))
    code, out, _ = cli("snapshot", "-w", ws.root)
    assert code == 0 and "nothing changed" in out
    # A script tells a new snapshot from an unchanged one by the JSON, not the exit code.
    code, out, _ = cli("snapshot", "--format", "json", "-w", ws.root)
    assert code == 0 and json.loads(out)["new_snapshot"] is False
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "B\n"}, {"scale": 5})
    assert cli("snapshot", "v2", "-w", ws.root)[0] == 0
    code, out, _ = cli("history", "--format", "json", "-w", ws.root)
    history = json.loads(out)
    assert [h["tags"] for h in history] == [["v2"], ["v1"]]
    code, out, _ = cli("diff", "v1", "v2", "-w", ws.root)
    assert "inter/prep" in out and "parameter scale: 2 -> 5" in out
    code, out, _ = cli("diff", "v2", "-w", ws.root)
    assert "no differences between v2 and current" in out
    code, out, _ = cli("restore", "v1", "--format", "json", "-w", ws.root)
    report = json.loads(out)
    assert code == 0 and "inter/prep" in report["data_restored"] and not report["not_restored"]
    assert ws.store.get("inter/prep").record["parameters"] == {"scale": 2}
    assert ws.version_of("inter/prep") == ws.store.get("inter/prep").version
    code, out, _ = cli("delete-snapshot", "v1", "-w", ws.root)
    assert code == 0 and "deleted snapshot v1" in out
    code, out, _ = cli("gc", "--dry-run", "-w", ws.root)
    assert code == 0 and "would free 1 retained version(s)" in out and "inter/prep@" in out
    code, out, _ = cli("gc", "--format", "json", "-w", ws.root)
    freed = json.loads(out)
    assert code == 0 and [v["ref"] for v in freed["versions"]] == ["inter/prep"]
    assert freed["objects"] == 1 and freed["bytes_freed"] == v1_bytes
    code, out, _ = cli("restore", "v2", "-w", ws.root)  # what v2 needs was kept
    assert code == 0 and "data restored:  inter/prep" in out
    assert ws.store.get("inter/prep").record["parameters"] == {"scale": 5}
    code, out, _ = cli("delete-snapshot", "v2", "-w", ws.root)
    assert code == 0 and "deleted snapshot v2" in out
    code, _, err = cli("restore", "v2", "-w", ws.root)
    assert code == 1 and "no snapshot is tagged 'v2'" in err


def test_forget_and_version(script_pipeline_ws: Workspace, cli) -> None:
    ws = script_pipeline_ws
    code, out, _ = cli("version", "inter/prep", "--format", "json", "-w", ws.root)
    assert code == 0
    data = json.loads(out)
    assert data["version"] == data["recorded"] == ws.version_of("inter/prep")
    _code, out, _ = cli("forget", "inter/prep", "-w", ws.root)
    assert "forgot" in out and ws.store.get("inter/prep") is None
    assert (ws.root / "data/inter/prep/part-0.csv").exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["lineage", "nope/x"], "unknown resource 'nope'"),
        (["lineage", "inter/../x"], "contains '..'"),
        (["lineage", "inter/never"], "inter/never has no lineage"),
        (["restore", "missing-tag"], "no snapshot is tagged 'missing-tag'"),
        (["add", "src", "--role", "code", "--path", "x"], "resource 'src' already exists"),
        (["add", "bad", "--role", "results", "--uri", "s3a://user:pw@bucket/x"], "credentials"),
        (["add", "nested", "--role", "results", "--path", "data/src/deeper"], "overlaps resource"),
        (["snapshot", "has space"], "invalid tag"),
    ],
)
def test_errors_are_clear_and_exit_1(ws: Workspace, cli, args: list[str], fragment: str) -> None:
    code, _out, err = cli(*args, "-w", ws.root)
    assert code == 1
    assert err.startswith("error: ") and fragment in err
    assert "Traceback" not in err


def test_no_workspace_found(tmp_path: Path, cli) -> None:
    code, _, err = cli("status", cwd=tmp_path)
    assert code == 1 and "no .dataworkspace/ found" in err and "dws-dagster init" in err


def test_console_script_status_and_lineage_import_no_spark_or_dagster(
    script_pipeline_ws: Workspace,
) -> None:
    code = """
import sys
from dws_dagster.cli.main import main
assert main(['status']) == 0
assert main(['lineage', 'results/exp', '--format', 'json']) == 0
heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('dagster', 'pyspark', 'py4j'))
print('HEAVY', heavy, file=sys.stderr)
sys.exit(1 if heavy else 0)
"""
    result = run_python(code, script_pipeline_ws.root)
    assert result.returncode == 0, result.stderr


def test_installed_console_script_runs(script_pipeline_ws: Workspace) -> None:
    script = shutil.which("dws-dagster", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the dws-dagster console script is not installed in this environment")
    result = subprocess.run(
        [script, "lineage", "results/exp"],
        cwd=script_pipeline_ws.root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Upstream" in result.stdout and "inter/prep@" in result.stdout


def test_console_script_read_commands_import_no_spark_or_dagster(
    script_pipeline_ws: Workspace,
) -> None:
    """The installed `dws-dagster` itself, as a new process: Python's own import report
    (`PYTHONPROFILEIMPORTTIME`) lists every module each command loads."""
    script = shutil.which("dws-dagster", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the dws-dagster console script is not installed in this environment")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPROFILEIMPORTTIME": "1"}
    assert (
        subprocess.run(
            [script, "snapshot", "s1"],
            cwd=script_pipeline_ws.root,
            env=env,
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    for argv in (
        ["status"],
        ["lineage", "results/exp"],
        ["history"],
        ["diff", "s1"],
        ["snapshot"],
        ["version", "inter/prep"],
    ):
        result = subprocess.run(
            [script, *argv],
            cwd=script_pipeline_ws.root,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        modules = [
            line.rsplit("|", 1)[1].strip()
            for line in result.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        ]
        assert (
            "dws_dagster.cli.main" in modules
        )  # the report is there, so the check means something
        heavy = sorted(m for m in modules if m.split(".")[0] in ("dagster", "pyspark", "py4j"))
        assert heavy == [], (argv, heavy)


def test_downstream_lists_readers_of_an_older_version_as_stale(
    script_pipeline_ws: Workspace, cli
) -> None:
    ws = script_pipeline_ws
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A\nchanged\n"}, {"scale": 2})
    code, out, _ = cli("lineage", "inter/prep", "-w", ws.root)
    downstream = out[out.index("Downstream") : out.index("Last run")]
    assert "results/exp@" in downstream and "(stale)" in downstream
    code, out, _ = cli("lineage", "inter/prep", "--format", "json", "-w", ws.root)
    data = json.loads(out)
    stale_edges = [e for e in data["edges"] if e["stale"]]
    assert [e["target"].split("@")[0] for e in stale_edges] == ["results/exp"]


def test_workspace_option_before_or_after_the_command(
    script_pipeline_ws: Workspace, cli, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = cli("-w", script_pipeline_ws.root, "status", "--format", "json", cwd=elsewhere)
    after = cli("status", "--format", "json", "-w", script_pipeline_ws.root, cwd=elsewhere)
    assert before[0] == after[0] == 0 and before[1] == after[1]
    nested = cli(
        "-w", script_pipeline_ws.root, "openlineage", "status", "--format", "json", cwd=elsewhere
    )
    assert nested[0] == 0 and json.loads(nested[1])["pending"] == 0


READ_ONLY = [
    ["status"],
    ["status", "--verify", "--format", "json"],
    ["status", "--expand"],
    ["lineage", "inter/prep"],
    ["lineage", "inter/prep", "--snapshot", "s1", "--format", "html"],
    ["history", "--format", "json"],
    ["diff", "s1"],
    ["diff", "s1", "current", "--expand"],
    ["version", "inter/prep"],
    ["gc", "--dry-run"],
    ["openlineage", "status"],
    ["openlineage", "status", "--format", "json"],
    ["openlineage", "replay", "--dry-run"],
]


@pytest.mark.parametrize(
    "damage",
    [None, "data changed", "no hash cache", "damaged delivery row", "damaged record"],
)
def test_commands_that_only_read_create_and_change_nothing(
    script_pipeline_ws: Workspace, cli, damage: str | None, clean_ol_env: None
) -> None:
    """Every command that only reads, on a healthy workspace and on damaged ones: whether it
    answers or refuses, every file (the hash cache included), every store row and every
    folder is as it was — no empty `.dataworkspace/openlineage/` or `cache/` made."""
    from sqlalchemy import update

    from dws_dagster.store import schema
    from tests.support.store_db import db_dump

    ws = script_pipeline_ws
    assert cli("snapshot", "s1", "-w", ws.root)[0] == 0
    from dws_dagster.ol.outbox.durable import Outbox

    Outbox(ws).spool([_ol_event()])
    if damage == "data changed":
        write(ws.root / "data/inter/prep/part-1.csv", "B\n2\n")
    elif damage == "no hash cache":
        shutil.rmtree(ws.meta_dir / "cache", ignore_errors=True)  # a snapshot may have made none
        assert not (ws.meta_dir / "cache").exists()
    elif damage == "damaged delivery row":
        with ws.store.db.engine.begin() as connection:
            connection.execute(update(schema.ol_delivery).values(next_attempt_at="soon"))
    elif damage == "damaged record":
        with ws.store.db.engine.begin() as connection:
            connection.execute(update(schema.records).values(body="{"))

    def state() -> tuple[dict[str, str], list[str], object]:
        files = {
            name: digest
            for name, digest in tree_state(ws.root).items()
            if not Path(name).name.startswith("store.db")  # SQLite's files move on reads
        }
        folders = sorted(str(p.relative_to(ws.root)) for p in ws.root.rglob("*") if p.is_dir())
        return files, folders, db_dump(ws)

    before = state()
    for args in READ_ONLY:
        code, _, err = cli(*args, "-w", ws.root)
        assert code in (0, 1, 3), (args, err)
        assert state() == before, (damage, args, err)


def _ol_event() -> dict[str, object]:
    return {
        "eventTime": "2026-03-01T12:00:00+00:00",
        "eventType": "START",
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "0b6f3b52-8c1e-4f5e-9a43-2f7f6b1f1c11"},
        "job": {"namespace": "tests", "name": "job"},
    }
