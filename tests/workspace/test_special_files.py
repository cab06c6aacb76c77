"""Named pipes, sockets, devices, dangling symlinks and symlink loops inside a ref.

One behaviour everywhere: versioning skips them (they hold no data at rest; opening a pipe
would block until someone writes to it) and says so, naming each: a `SpecialFileWarning` in
Python (the script API), a `warning:` line on stderr (the CLI), a warning in the Dagster log
(the IO manager's source observation). Nothing blocks, hangs or crashes. Every test runs under
a timeout: before the fix a pipe made versioning wait forever.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.errors import DataNotFoundError, DataReadError
from dws_dagster.workspace import data_files, versions
from dws_dagster.workspace.data_files import SpecialFileWarning
from dws_dagster.workspace.versions import (
    content_version,
    data_size,
    effective_version,
    listing_version,
)
from tests.conftest import ROOT, run_step, write

pytestmark = pytest.mark.timeout(60)

DATA = b"id\n1\n2\n"


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    """A real AF_UNIX socket file (its path must stay short: 108 bytes at most)."""
    path = Path(f"/tmp/dws-sock-{os.getpid()}-{tmp_path.name[-20:]}")
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    yield path
    server.close()
    path.unlink(missing_ok=True)


def _make(kind: str, where: Path, unix_socket: Path) -> str:
    """Create a special file of `kind` at `where`; returns how the warning describes it."""
    if kind == "fifo":
        os.mkfifo(where)
        return "named pipe"
    if kind == "socket":
        os.symlink(unix_socket, where)  # a socket reached through a link...
        return "symlink to a socket"
    if kind == "dangling":
        os.symlink(where.parent / "nothing-here", where)
        return "dangling symlink"
    if kind == "loop":
        os.symlink(where.name, where)
        return "symlink loop"
    if kind == "devnull":
        os.symlink(os.devnull, where)
        return "symlink to a character device"
    raise AssertionError(kind)


KINDS = ["fifo", "socket", "dangling", "loop", "devnull"]


def _data_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "part-0.csv").write_bytes(DATA)
    (folder / "sub" / "part-1.csv").write_bytes(DATA)
    return folder


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("depth", ["top", "nested"])
def test_versions_skip_special_files_with_a_warning_naming_them(
    tmp_path: Path, unix_socket: Path, kind: str, depth: str
) -> None:
    folder = _data_folder(tmp_path)
    clean = {
        "content": content_version(folder),
        "effective": effective_version(folder),
        "size": data_size(folder),
    }
    rel = "odd" if depth == "top" else "sub/odd"
    described = _make(kind, folder / rel, unix_socket)
    for name, compute in [
        ("content", content_version),
        ("effective", effective_version),
        ("size", data_size),
    ]:
        with pytest.warns(SpecialFileWarning) as caught:
            assert compute(folder) == clean[name], name
        message = str(caught[0].message)
        assert f"{rel} ({described})" in message and str(folder) in message
    with pytest.warns(SpecialFileWarning, match="not data"):
        listing = listing_version(folder)
    assert listing.startswith(versions.LISTING_PREFIX)


def test_a_real_socket_file_and_a_device_are_skipped(tmp_path: Path, unix_socket: Path) -> None:
    folder = _data_folder(tmp_path)
    clean = content_version(folder)
    os.rename(unix_socket, folder / "sock")  # the socket file itself, not a link to it
    unix_socket.touch()  # for the fixture's cleanup
    expected = ["sock (socket)"]
    try:
        os.mknod(folder / "dev", 0o600 | 0o020000, os.makedev(1, 3))  # char device 1:3
        expected.append("dev (character device)")
    except (PermissionError, OSError):
        pass  # no CAP_MKNOD here: the /dev/null symlink case covers devices
    with pytest.warns(SpecialFileWarning) as caught:
        assert content_version(folder) == clean
    assert all(entry in str(caught[0].message) for entry in expected), caught[0].message


def test_many_skipped_files_make_one_warning(tmp_path: Path) -> None:
    folder = _data_folder(tmp_path)
    for index in range(25):
        os.mkfifo(folder / f"pipe-{index:02d}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        content_version(folder)
    assert len(caught) == 1
    assert "skipped 25 file(s)" in str(caught[0].message)
    assert "and 15 more" in str(caught[0].message)


def test_hidden_special_files_are_ignored_silently(tmp_path: Path) -> None:
    """Names Spark ignores (`.x`, `_x`) are ignored whatever they are, as before."""
    folder = _data_folder(tmp_path)
    clean = content_version(folder)
    os.mkfifo(folder / ".pipe")
    os.mkfifo(folder / "_pipe")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert content_version(folder) == clean


@pytest.mark.parametrize("kind", ["fifo", "dangling", "loop", "devnull"])
def test_a_ref_that_is_itself_special_has_no_version(
    tmp_path: Path, unix_socket: Path, kind: str
) -> None:
    target = tmp_path / "odd"
    _make(kind, target, unix_socket)
    with pytest.raises(DataNotFoundError) as raised:
        content_version(target)
    assert str(target) in str(raised.value)
    if kind in ("fifo", "devnull"):
        assert "not a data file or folder" in str(raised.value)


@pytest.mark.parametrize("swapped_in", ["pipe", "pipe with a writer", "/dev/zero"])
def test_a_file_swapped_after_listing_is_skipped_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped_in: str
) -> None:
    """The race the open closes: listed as a regular file, a pipe or an endless device when
    opened. The listing is replaced by one that names it as a data file (what a swap in
    between would give)."""
    folder = _data_folder(tmp_path)
    clean = content_version(folder)
    late = folder / "late"
    writer = None
    if swapped_in == "/dev/zero":
        os.symlink("/dev/zero", late)
    else:
        os.mkfifo(late)
        if swapped_in == "pipe with a writer":  # held open, some bytes in it, never closed
            writer = os.open(late, os.O_RDWR | os.O_NONBLOCK)
            os.write(writer, b"x" * 1000)
    real = data_files.data_file_entries

    def listing_before_the_swap(path, exclude_top, kind="?", *, skipped):
        found = real(path, exclude_top, kind, skipped=skipped)
        skipped.clear()  # the listing saw a regular file
        return sorted([*found, ("late", str(late))])

    monkeypatch.setattr(data_files, "data_file_entries", listing_before_the_swap)
    try:
        with pytest.warns(
            SpecialFileWarning,
            match=r"late \((symlink to a )?(named pipe|character"
            r" device)\)",
        ):
            assert content_version(folder) == clean
    finally:
        if writer is not None:
            os.close(writer)


def test_the_marker_is_never_read_through_a_pipe(tmp_path: Path) -> None:
    folder = _data_folder(tmp_path)
    os.mkfifo(folder / versions.MARKER_NAME)
    assert effective_version(folder) == content_version(folder)


def test_symlinked_regular_files_are_still_read(tmp_path: Path) -> None:
    """Reads follow symlinks to regular files (data linked into a source resource)."""
    folder = _data_folder(tmp_path)
    outside = write(tmp_path / "elsewhere.csv", "id\n9\n")
    before = content_version(folder)
    os.symlink(outside, folder / "linked.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = content_version(folder)
    assert after != before


def test_an_unreadable_data_file_is_a_clear_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    folder = _data_folder(tmp_path)
    (folder / "part-0.csv").chmod(0)
    with pytest.raises(DataReadError, match="part-0.csv"):
        content_version(folder)


# ------------------------------------------------------------------ the three callers


@pytest.fixture
def special_ws(ws: Workspace, unix_socket: Path) -> Workspace:
    """Workspace `ws` whose source ref src/trips holds data and one of each special file."""
    folder = ws.local_path("src/trips")
    folder.mkdir(parents=True)
    (folder / "part-0.csv").write_bytes(DATA)
    for kind in KINDS:
        _make(kind, folder / kind, unix_socket)
    return ws


def test_script_api_reads_inputs_past_special_files_with_a_warning(special_ws: Workspace) -> None:
    ws = special_ws
    builder = (
        LineageBuilder()
        .with_step_name("prep")
        .with_parameters({})
        .with_workspace_directory(ws.root)
        .with_input_ref("src/trips")
    )
    with pytest.warns(SpecialFileWarning) as caught:
        with builder.eval() as lineage:
            lineage.add_output_ref("inter/out")
            write(ws.local_path("inter/out") / "part-0.csv", "x\n1\n")
    message = str(caught[0].message)
    for name in (
        "fifo (named pipe)",
        "socket (symlink to a socket)",
        "dangling (dangling symlink)",
        "loop (symlink loop)",
    ):
        assert name in message
    assert Workspace.open(ws.root).store.get("inter/out").status == "ok"


def _cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a new process, killed if it hangs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "dws_dagster.cli", *args],
        cwd=ws.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", [["version", "src/trips"], ["status", "--verify"]])
def test_cli_skips_special_files_and_says_so_on_stderr(
    special_ws: Workspace, command: list[str]
) -> None:
    ws = special_ws
    ws.store.observe("src/trips", ws.version_of("src/trips", on_skip=lambda message: None))
    done = _cli(ws, *command)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    warning_lines = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning_lines) == 1, done.stderr
    assert "fifo (named pipe)" in warning_lines[0] and "loop (symlink loop)" in warning_lines[0]
    if command[0] == "version":
        assert "(matches its lineage)" in done.stdout
    else:
        assert "src/trips" in done.stdout


def test_io_manager_source_observation_logs_skipped_files_to_dagster(special_ws: Workspace) -> None:
    from dagster import DagsterInstance
    from dagster._core.definitions.observe import observe

    from dws_dagster import dws_source_asset
    from tests.support.pipeline import io_manager

    ws = special_ws
    source = dws_source_asset("trips", "src", "trips", format="csv")
    with DagsterInstance.ephemeral() as instance:
        result = observe([source], instance=instance, resources={"io_manager": io_manager(ws)})
        assert result.success
        logs = [entry.user_message for entry in instance.all_logs(result.run_id)]
    skipped = [m for m in logs if "that are not data" in m]
    assert (
        skipped
        and "fifo (named pipe)" in skipped[0]
        and "dangling (dangling symlink)" in skipped[0]
    ), logs
    state = Workspace.open(ws.root).store.get("src/trips")
    assert state.version == ws.version_of("src/trips", on_skip=lambda message: None)


def test_data_copies_skip_what_versions_skip(tmp_path: Path, unix_socket: Path) -> None:
    """Kept versions and restores copy data with `copy_data`: special files are left out
    (copying a pipe would block), so the copy has the version of the data."""
    from dws_dagster.workspace.swap import copy_data

    folder = _data_folder(tmp_path)
    for kind in KINDS:
        _make(kind, folder / "sub" / kind, unix_socket)
    copy_data(folder, tmp_path / "copy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecialFileWarning)
        assert content_version(tmp_path / "copy") == content_version(folder)
    assert sorted(p.name for p in (tmp_path / "copy/sub").iterdir()) == ["part-1.csv"]


@pytest.mark.timeout(60)
def test_a_snapshot_archives_results_past_special_files(ws: Workspace, unix_socket: Path) -> None:
    """The results copy a snapshot keeps leaves special files out, as versions do: copying a
    pipe would block the snapshot forever."""
    from dws_dagster.snapshots.take import take_snapshot

    write(ws.local_path("src/trips") / "part-0.csv", "a\n1\n")
    run_step(
        ws,
        "train",
        ["src/trips"],
        {},
        {"gamma": 0.1},
        results={"mae": 1.5},
        results_dir="results/exp",
    )
    folder = ws.local_path("results/exp")
    for kind in KINDS:
        _make(kind, folder / kind, unix_socket)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecialFileWarning)
        outcome = take_snapshot(Workspace.open(ws.root), "s1")
    # Versioning the results (to see drift and retain them) names what it skipped, once.
    [warning] = outcome.warnings
    assert outcome.created and f"skipped {len(KINDS)} file(s) under {folder}" in warning
    archived = ws.root / "results/snapshots/s1/exp"
    assert sorted(p.name for p in archived.iterdir()) == ["lineage.json", "results.json"]
