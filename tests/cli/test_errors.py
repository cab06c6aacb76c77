"""The command line never prints a traceback: every failure is one line on stderr and a
non-zero exit code (1 refused, 2 bad command line, 70 internal error, 130 interrupted).
Checked in-process over generated command lines and in real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import Workspace
from dws_dagster.cli import main as cli_module
from dws_dagster.cli.commands import history as history_command
from dws_dagster.cli.commands import status as status_command
from dws_dagster.errors import SnapshotError
from dws_dagster.snapshots.index import list_snapshots
from dws_dagster.workspace.shapes import validate_tag
from dws_dagster.workspace.swap import STAGING_PREFIX
from tests.conftest import ROOT, write


def _real(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`dws-dagster ARGS` in a new process (bytes: arguments need not be UTF-8)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    argv = [os.fsencode(a) if isinstance(a, Path) else a for a in args]
    return subprocess.run(
        [sys.executable, "-m", "dws_dagster.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


# --------------------------------------------------------------------- OSErrors


def test_init_where_a_file_stands_is_one_line(tmp_path: Path, cli) -> None:
    write(tmp_path / "taken", "x")
    for target in (tmp_path / "taken", tmp_path / "taken/below"):
        code, _, err = cli("init", target)
        line = _one_error_line(err)
        assert code == 1 and line.startswith("error: ") and str(target) in line
        assert "a file stands where a folder is needed" in line
    assert (tmp_path / "taken").read_text() == "x"


def test_lineage_output_into_a_missing_folder_or_onto_a_folder(
    script_pipeline_ws: Workspace, cli
) -> None:
    missing = script_pipeline_ws.root / "no-such-folder/graph.html"
    code, _, err = cli(
        "lineage", "inter/prep", "-o", missing, "--format", "html", "-w", script_pipeline_ws.root
    )
    line = _one_error_line(err)
    assert code == 1 and str(missing) in line and "does not exist" in line
    assert not missing.parent.exists()
    root = script_pipeline_ws.root
    code, _, err = cli("lineage", "inter/prep", "-o", root, "-w", root)
    line = _one_error_line(err)
    assert code == 1 and str(script_pipeline_ws.root) in line


def test_an_oserror_no_layer_named_is_still_one_line(ws: Workspace, cli, monkeypatch) -> None:
    def refuse(args):
        raise PermissionError(13, "Permission denied", "/somewhere/file.json")

    monkeypatch.setattr(history_command, "cmd_history", refuse)
    code, _, err = cli("history", "-w", ws.root)
    assert code == 1
    assert _one_error_line(err) == (
        "error: /somewhere/file.json: Permission denied; fix its permissions, then re-run"
    )


def test_a_bug_is_an_internal_error_with_its_own_exit_code(ws: Workspace, cli, monkeypatch) -> None:
    def broken(args):
        raise RuntimeError("something\nunexpected")

    monkeypatch.setattr(history_command, "cmd_history", broken)
    code, _, err = cli("history", "-w", ws.root)
    assert code == cli_module.EXIT_INTERNAL == 70
    line = _one_error_line(err)
    assert line.startswith("internal error: RuntimeError: something unexpected;")
    assert "please report" in line
    monkeypatch.setenv("DWS_DEBUG", "1")
    code, _, err = cli("history", "-w", ws.root)
    assert code == 70 and "Traceback" in err and "RuntimeError" in err

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(status_command, "cmd_status", interrupted)
    code, _, err = cli("status", "-w", ws.root)
    assert code == 130 and _one_error_line(err) == "interrupted"


# ------------------------------------------------------------------- --workspace


def test_workspace_flag_naming_a_missing_folder_is_an_error_not_an_upward_search(
    script_pipeline_ws: Workspace, cli
) -> None:
    ws = script_pipeline_ws
    missing = ws.root / "data" / "nowhere"
    # From inside the workspace too: the flag names THE workspace, the cwd does not matter.
    code, out, err = cli("status", "-w", missing, cwd=ws.root / "data")
    line = _one_error_line(err)
    assert code == 1 and out == ""
    assert f"--workspace {missing} does not exist" in line


def test_workspace_flag_naming_a_folder_inside_a_workspace_names_the_right_one(
    script_pipeline_ws: Workspace, cli
) -> None:
    ws = script_pipeline_ws
    inner = ws.root / "data" / "src"
    code, out, err = cli("history", "--workspace", inner)
    line = _one_error_line(err)
    assert code == 1 and out == ""
    assert f"--workspace {inner} is not a workspace" in line
    assert f"pass --workspace {ws.root}" in line
    # Without the flag the upward search from the current folder stays.
    code, out, _ = cli("status", cwd=inner)
    assert code == 0 and "inter/prep" in out


def test_workspace_flag_naming_a_file(script_pipeline_ws: Workspace, cli) -> None:
    target = script_pipeline_ws.root / "data/src/trips.csv"
    code, _, err = cli("status", "-w", target)
    assert code == 1 and "is not a folder" in _one_error_line(err)


# -------------------------------------------------------------------------- tags


def test_a_long_multibyte_tag_is_refused_before_anything_is_written(
    script_pipeline_ws: Workspace, cli
) -> None:
    ws = script_pipeline_ws
    meta_before = sorted(p.relative_to(ws.root) for p in ws.root.rglob("*"))
    tag = "€" * 100  # 100 characters, 300 bytes
    code, _, err = cli("snapshot", tag, "-w", ws.root)
    line = _one_error_line(err)
    assert code == 1 and "300 bytes" in line and "at most 200 bytes" in line
    assert sorted(p.relative_to(ws.root) for p in ws.root.rglob("*")) == meta_before
    assert list_snapshots(Workspace.open(ws.root)) == []


def test_the_longest_tag_in_bytes_names_its_results_folder(
    script_pipeline_ws: Workspace, cli
) -> None:
    ws = script_pipeline_ws
    tag = "v" + "€" * 66 + "x"  # 1 + 198 + 1 = 200 bytes
    assert len(tag.encode()) == 200
    code, out, err = cli("snapshot", tag, "-w", ws.root)
    assert code == 0, err
    assert (ws.root / "results/snapshots" / tag / "exp/results.json").is_file()
    assert cli("snapshot", tag + "y", "-w", ws.root)[0] == 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tag=st.one_of(
        st.text(max_size=140), st.text(st.sampled_from("a-€é😀"), min_size=40, max_size=128)
    )
)
def test_an_accepted_tag_can_name_the_staging_folder_of_its_results(tmp_path_factory, tag) -> None:
    """validate_tag refuses with SnapshotError or accepts a tag that fits in a folder name, with
    the staging prefix and suffix the archive copy adds."""
    try:
        validate_tag(tag)
    except SnapshotError:
        return
    assert len(tag.encode("utf-8")) <= 200
    folder = tmp_path_factory.getbasetemp() / f"{STAGING_PREFIX}{tag}-{uuid.uuid4().hex}"
    folder.mkdir()
    folder.rmdir()


# ------------------------------------------------------- generated command lines

COMMANDS = [
    "init",
    "add",
    "status",
    "lineage",
    "snapshot",
    "restore",
    "diff",
    "history",
    "delete-snapshot",
    "forget",
    "version",
    "openlineage",
]
WORDS = [
    "--format",
    "json",
    "text",
    "dot",
    "html",
    "-o",
    "out.txt",
    "--role",
    "source-data",
    "results",
    "code",
    "--path",
    "data/new",
    "--uri",
    "s3a://bucket/x",
    "-w",
    ".",
    "--workspace",
    "data",
    "--verify",
    "--partial",
    "--remove-results",
    "-m",
    "--snapshot",
    "--name",
    "--versioning",
    "listing",
    "current",
    "src",
    "src/trips.csv",
    "inter/prep",
    "results/exp",
    "inter",
    "nope/x",
    "s1",
    "status",
    "-",
    "--",
    "€" * 100,
    "a" * 300,
    "inter/../x",
    "--help",
]
# Free text: no '/' (so no absolute path: `init` or `add --path` could reach outside the test's
# folder), no NUL (an OS command line cannot hold one), no surrogates (see the real runs).
FREE = st.text(
    st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), max_size=12
)
VALUE = st.one_of(st.sampled_from(WORDS), FREE)
ANY_ARGV = st.tuples(st.sampled_from(COMMANDS), st.lists(VALUE, max_size=6)).map(
    lambda t: [t[0], *t[1]]
)
# Command lines argparse accepts, so the commands themselves meet the odd values.
WELL_FORMED = st.one_of(
    st.tuples(st.just("snapshot"), VALUE),
    st.tuples(st.just("snapshot"), VALUE, st.just("-m"), VALUE),
    st.tuples(
        st.sampled_from(["lineage", "version", "forget", "restore", "delete-snapshot", "diff"]),
        VALUE,
    ),
    st.tuples(st.just("lineage"), VALUE, st.just("-o"), VALUE),
    st.tuples(st.just("lineage"), st.just("inter/prep"), st.just("--snapshot"), VALUE),
    st.tuples(st.just("diff"), VALUE, VALUE),
    st.tuples(
        st.just("add"),
        VALUE,
        st.just("--role"),
        st.sampled_from(["source-data", "results"]),
        st.sampled_from(["--path", "--uri"]),
        VALUE,
    ),
    st.tuples(st.just("-w"), VALUE, st.sampled_from(["status", "history"])),
    st.tuples(st.just("init"), VALUE),
).map(list)
ARGV = st.one_of(ANY_ARGV, WELL_FORMED)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=ARGV)
def test_no_command_line_gives_a_traceback_or_an_internal_error(
    script_pipeline_ws: Workspace, cli, argv: list[str]
) -> None:
    try:
        code, out, err = cli(*argv, cwd=script_pipeline_ws.root)
    except SystemExit as stop:  # argparse: --help (0) or a bad command line (2)
        code, out, err = stop.code, "", ""
    if code == 2 or (code == 0 and "--help" in argv):
        return
    assert "Traceback" not in err and "Traceback" not in out
    assert code in (0, 1), (argv, code, err)
    if code != 0:
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


# ------------------------------------------------------------------ real processes


def test_real_processes_fail_in_one_line(script_pipeline_ws: Workspace, tmp_path: Path) -> None:
    ws = script_pipeline_ws
    write(tmp_path / "afile", "x")
    cases = [
        (["init", str(tmp_path / "afile")], "a file stands where a folder is needed"),
        (["status", "-w", str(tmp_path / "missing")], "does not exist"),
        (["status", "-w", str(ws.root / "data")], "is not a workspace"),
        (["snapshot", "€" * 100], "300 bytes"),
        (["lineage", "inter/prep", "-o", str(tmp_path / "no/such.txt")], "does not exist"),
        ([b"snapshot", b"tag-\xff"], "invalid tag"),  # not UTF-8: refused, not a crash
        ([b"init", b"name-\xff"], "choose a name with --name"),
    ]
    for argv, expected in cases:
        done = _real(*argv, cwd=ws.root)
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 1, (argv, err)
        line = _one_error_line(err)
        assert line.startswith("error: ") and expected in line, (argv, line)
    assert not (ws.root / os.fsdecode(b"name-\xff")).exists()


def test_real_process_prints_file_names_that_are_not_utf8(script_pipeline_ws: Workspace) -> None:
    ws = script_pipeline_ws
    name = b"caf\xe9"  # Latin-1, not UTF-8
    # In a UTF-8 locale Python's stdout refuses such names unless told otherwise.
    done = _real(
        b"init",
        b"--name",
        b"cafe",
        name,
        cwd=ws.root / "data",
        env={"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"},
    )
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr and name in done.stdout
