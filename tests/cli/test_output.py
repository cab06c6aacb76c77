"""What the CLI writes to a terminal: data never drives it (issue 32, class 10).

Step names, errors of failed steps, snapshot messages, metric and parameter names and values,
landed file names and a catalog's HTTP status text are data anyone who can run a step, land a
file or answer on the network controls. Each test puts every class of character that drives a
terminal — ESC sequences (CSI, OSC 0, OSC 8), C1 controls, bidirectional overrides and
isolates, other format characters, a carriage return, a newline — into that data, runs the
real commands, and requires that none reaches stdout or stderr raw (a newline only where the
command itself ends a line), while `--format json` parses back to exactly the values.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.cli.output import (
    TerminalStream,
    json_text,
    say,
    terminal_text,
    unsafe,
)
from dws_dagster.workspace.redaction import is_secret_name
from tests.conftest import ROOT

#: One of each class of character that must not reach a terminal raw.
DANGEROUS = [
    "\x1b[2J",  # CSI: clear the screen
    "\x1b]0;owned\x07",  # OSC 0: the window title
    "\x1b]8;;https://evil.example/\x1b\\",  # OSC 8: a link
    "\x9b31m",  # C1 CSI
    "\x9d0;t\x9c",  # C1 OSC ... ST
    "\x85",  # C1 next line
    "\u202e",  # right-to-left override
    "\u202a",
    "\u2066",  # isolates
    "\u2069",
    "\u200f",  # right-to-left mark
    "\u200b",  # zero width space
    "\u2028",  # line separator
    "\ufeff",
    "\r",
    "\x08",
    "\x7f",
    "\n",
]
#: Around the payload: every line the CLI writes holds as many of one as of the other, unless
#: a newline from the data started a line of its own.
OPEN, CLOSE = "\u00ab", "\u00bb"
_plain = st.text(
    st.characters(
        blacklist_categories=("Cs", "Cc", "Cf", "Zl", "Zp"),
        blacklist_characters=f"/{OPEN}{CLOSE}\\",
    ),
    max_size=3,
)
#: Every class in every example, in any order, with any other text between.
payloads = st.tuples(
    st.permutations(DANGEROUS),
    st.lists(_plain, min_size=len(DANGEROUS), max_size=len(DANGEROUS)),
).map(lambda drawn: OPEN + "".join(a + b for a, b in zip(*drawn, strict=True)) + CLOSE)


def assert_terminal_safe(text: str, where: object) -> None:
    """No character that drives a terminal, and no line started by the data."""
    raw = sorted({repr(c) for c in text if unsafe(c) and c not in "\n\t"})
    assert not raw, f"{where}: {raw} written raw in {text!r}"
    for line in text.split("\n"):
        assert line.count(OPEN) == line.count(CLOSE), f"{where}: data split a line: {line!r}"


# ------------------------------------------------------------------ the writer itself


class _Sink:
    def __init__(self) -> None:
        self.written: list[str] = []

    def write(self, chunk: str) -> int:
        self.written.append(chunk)
        return len(chunk)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40))
def test_the_writer_never_passes_a_terminal_control(text: str) -> None:
    """Any write: only its leading and trailing newlines (the writer's layout) and tabs stay
    raw. Any line said: one line, whatever it holds; printable text as it is."""
    sink = _Sink()
    stream = TerminalStream(sink)  # type: ignore[arg-type]
    stream.write(text)
    say(text, file=stream)  # type: ignore[arg-type]
    written, said = sink.written
    assert not any(unsafe(c) and c != "\t" for c in written.strip("\n")), written
    assert said.endswith("\n") and "\n" not in said[:-1], said
    assert not any(unsafe(c) and c != "\t" for c in said[:-1]), said
    if text.isprintable():
        assert written == text and said == text + "\n"


@settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**63 - 1)
        | st.text(st.characters(blacklist_categories=("Cs",))),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.text(st.characters(blacklist_categories=("Cs",)), max_size=5), inner, max_size=3
            )
        ),
        max_leaves=8,
    )
)
def test_json_output_is_exact_and_shows_no_control(value: object) -> None:
    text = json_text(value)
    assert json.loads(text) == value
    assert not any(unsafe(c) for c in text if c != "\n"), text


# ------------------------------------------------------------------ the commands


def _file_name(data: str) -> str:
    """`data` as a file name: no `/` (a backslash is an ordinary character of a POSIX name)."""
    return data.replace("/", "_")


def _hostile_workspace(root: Path, data: str) -> Workspace:
    """A workspace whose every kind of free text holds `data`: step names, a parameter's name
    and value, a metric's name, a failed step's error, two snapshot messages, a landed file's
    name (in a resource captured whole, so `diff` names its files)."""
    from dws_dagster.cli.main import main

    ws = Workspace.init(root)
    ws.add_resource("src", "source-data", path="data/src")
    ws.add_resource("landing", "source-data", path="data/landing")
    ws.add_resource("inter", "intermediate-data", path="data/inter")
    ws.add_resource("results", "results", path="results")
    for folder in ("data/src", "data/landing", "data/inter/prep"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "data/src/a.csv").write_text("a\n1\n")
    (root / "data/landing/first.csv").write_text("a\n")
    step = (
        LineageBuilder()
        .with_step_name(f"prep{data}")
        .with_parameters({f"p{data}": f"v{data}", "n": 1})
        .with_workspace_directory(root)
        .with_input_ref("src")
    )
    with step.eval() as lineage:
        lineage.add_output_ref("inter/prep")
        (root / "data/inter/prep/part-0.csv").write_text("x\n")
    results = (
        LineageBuilder()
        .with_step_name(f"score{data}")
        .with_parameters({})
        .with_workspace_directory(root)
        .with_input_ref("inter/prep")
        .as_results_step(root / "results/exp")
    )
    with results.eval() as lineage:
        lineage.write_results({f"m{data}": 1.5})
    assert main(["-w", str(root), "snapshot", "s1", "-m", f"one{data}"]) == 0
    (root / "data/landing" / f"land{_file_name(data)}.csv").write_text("b\n")
    failing = (
        LineageBuilder()
        .with_step_name(f"fail{data}")
        .with_parameters({f"p{data}": f"w{data}"})
        .with_workspace_directory(root)
        .with_input_ref("src")
    )
    with pytest.raises(RuntimeError):
        with failing.eval() as lineage:
            lineage.add_output_ref("inter/bad")
            raise RuntimeError(f"boom{data.replace(chr(10), ' ')}")
    assert main(["-w", str(root), "snapshot", "s2", "-m", f"two{data}"]) == 0
    return ws


def _strings(value: object) -> list[str]:
    """Every string of a JSON document, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (key, *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


TEXT_COMMANDS = [
    ["status"],
    ["status", "--expand"],
    ["status", "--verify"],
    ["lineage", "inter/prep"],
    ["lineage", "inter/prep", "--expand"],
    ["lineage", "inter/bad"],
    ["lineage", "results/exp", "--snapshot", "s1"],
    ["lineage", "inter/prep", "--format", "dot"],
    ["lineage", "inter/prep", "--format", "mermaid"],
    ["history"],
    ["diff", "s1", "s2"],
    ["diff", "s1", "s2", "--expand"],
    ["diff", "s1"],
    ["version", "landing"],
    ["snapshot", "s3", "-m", "three"],
    ["observe", "landing"],
    ["forget", "inter/bad"],
]
JSON_COMMANDS = [
    ["status", "--format", "json"],
    ["lineage", "inter/bad", "--format", "json"],
    ["history", "--format", "json"],
    ["diff", "s1", "s2", "--format", "json"],
]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=payloads)
def test_no_command_writes_data_raw_to_the_terminal(data: str, tmp_path_factory, cli) -> None:
    # A parameter named like a credential (`p…JWT…`) has its value redacted wherever it
    # appears, rightly: the data would not be shown as it is, which this test checks.
    assume(not is_secret_name(f"p{data}"))
    root = tmp_path_factory.mktemp("hostile")
    _hostile_workspace(root, data)
    shown = terminal_text(data)
    seen = ""
    for argv in JSON_COMMANDS:
        code, out, err = cli(*argv, cwd=root)
        assert code == 0, err
        assert_terminal_safe(out + err, argv)
        seen += "\x00".join(_strings(json.loads(out)))
    # The exact values came through JSON: names, messages, parameters, metrics, the error.
    for value in (f"prep{data}", f"fail{data}", f"one{data}", f"two{data}", f"m{data}"):
        assert value in seen, value
    seen = ""
    for argv in TEXT_COMMANDS:
        code, out, err = cli(*argv, cwd=root)
        assert code in (0, 3), (argv, err)
        assert_terminal_safe(out + err, argv)
        seen += out
    # ...and the text shows the data escaped, not dropped.
    landed = terminal_text(_file_name(data))
    assert f"one{shown}" in seen and f"land{landed}.csv" in seen and f"m{shown}=1.5" in seen


def _real(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "dws_dagster.cli", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        timeout=120,
        check=False,
    )
    return done.stdout.decode("utf-8", "surrogateescape"), done.stderr.decode(
        "utf-8", "surrogateescape"
    )


def test_a_real_process_escapes_data_and_file_names_that_are_not_utf8(tmp_path: Path) -> None:
    """The console script as a user runs it: the escape sequences of step names, messages and
    a landed file's name are shown escaped; in a folder name that is not UTF-8, the byte 0x9B
    (CSI on an 8-bit terminal) is escaped and a Latin-1 byte written back as it was."""
    data = f"{OPEN}\x1b]0;owned\x07\u202e\n{CLOSE}"
    root = tmp_path / "w"
    _hostile_workspace(root, data)
    for argv in (["status"], ["lineage", "inter/bad"], ["history"], ["diff", "s1", "s2"]):
        out, err = _real(*argv, cwd=root)
        assert_terminal_safe(out + err, argv)
        assert "\\x1b]0;owned\\x07\\u202e\\n" in out, (argv, out)
    odd = tmp_path / os.fsdecode(b"odd-\x9b2J-caf\xe9")
    odd.mkdir()
    out, err = _real("init", "--name", "odd", str(odd), cwd=tmp_path)
    assert_terminal_safe(out + err, "init")
    assert "odd-\\x9b2J-caf\udce9" in out, out


class _Catalog:
    """An OpenLineage catalog on 127.0.0.1 whose every answer is `500` with `reason` as the
    status text, byte for byte (a raw socket: http.server would not send control bytes)."""

    def __init__(self, reason: bytes) -> None:
        self.reason = reason
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                received = b""
                try:
                    while b"\r\n\r\n" not in received:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        received += chunk
                    head, _, body = received.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    while len(body) < length:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        body += chunk
                    conn.sendall(
                        b"HTTP/1.1 500 " + self.reason + b"\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n"
                    )
                except OSError:
                    pass

    def close(self) -> None:
        # Closing alone does not wake a thread blocked in accept() on Linux: shut it down.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(timeout=10)


@pytest.mark.parametrize(
    "reason",
    [
        b"\x1b[31mInternal Server Error\x1b[0m",
        b"\x1b]0;owned\x07Internal",
        b"\xc2\x9b31m C1 CSI",
        b"\xe2\x80\xae reversed",
        b"\x9b31m raw C1 byte",
    ],
)
def test_a_catalogs_status_text_is_shown_escaped(reason: bytes, tmp_path: Path) -> None:
    """`openlineage deliver` and `status` say why the catalog refused, in its words, escaped:
    the status line is reachable from the network."""
    from dws_dagster.ol.outbox.durable import Outbox

    root = tmp_path / "w"
    ws = Workspace.init(root)
    event = {
        "eventType": "START",
        "eventTime": "2026-01-01T00:00:00+00:00",
        "run": {"runId": "00000000-0000-4000-8000-000000000001"},
        "job": {"namespace": "t", "name": "job"},
        "inputs": [],
        "outputs": [],
        "producer": "https://example.com/t",
        "schemaURL": "https://example.com/s",
    }
    assert Outbox(ws).spool([event]) == 1
    catalog = _Catalog(reason)
    try:
        env = {"OPENLINEAGE_URL": catalog.url}
        for argv in (["openlineage", "deliver"], ["openlineage", "status"]):
            out, err = _real(*argv, cwd=root, env=env)
            assert_terminal_safe(out + err, argv)
            assert "500" in out + err, (argv, out, err)
        out, err = _real("openlineage", "status", "--format", "json", cwd=root, env=env)
        assert_terminal_safe(out + err, "status --format json")
        json.loads(out)
    finally:
        catalog.close()


HOSTILE_STEP = """\
import os
from dws_dagster.lineage import LineageBuilder

with LineageBuilder().as_script_step().with_parameters({}).with_no_inputs().eval() as lineage:
    lineage.add_output_ref("inter/hostile")
    out = lineage.workspace.local_path("inter/hostile")
    out.mkdir(parents=True, exist_ok=True)
    (out / "part-0.csv").write_text("a\\n1\\n")
    if os.environ.get("BOOM"):
        raise RuntimeError(os.environ["BOOM"])
"""


def test_replays_table_shows_a_failed_steps_error_escaped(git_ws, tmp_path: Path) -> None:
    """A step that fails when replayed: its error, in the table's WHY column and on stderr,
    never drives the terminal; `--format json` holds it exactly."""
    from dws_dagster.snapshots.take import take_snapshot
    from tests.replay.replay_steps import git, script

    ws, _ = git_ws
    (ws.root / "code/hostile.py").write_text(HOSTILE_STEP)
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "code")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "hostile")
    script(ws, "hostile")
    take_snapshot(ws, "v1")
    boom = f"{OPEN}\x1b]0;owned\x07\x1b[2J\u202e\x9b31m\u2066{CLOSE}"
    env = {"BOOM": boom}
    out, err = _real(
        "replay", "v1", "inter/hostile", "--into", str(tmp_path / "r1"), cwd=ws.root, env=env
    )
    assert_terminal_safe(out + err, "replay")
    assert out.startswith("REF") and "inter/hostile" in out, out + err
    assert terminal_text(boom) in out + err, out + err
    out, err = _real(
        "replay",
        "v1",
        "inter/hostile",
        "--format",
        "json",
        "--into",
        str(tmp_path / "r2"),
        cwd=ws.root,
        env=env,
    )
    assert_terminal_safe(out + err, "replay --format json")
    assert any(boom in (ref.get("detail") or "") for ref in json.loads(out)["refs"]), out


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=payloads)
def test_a_usage_error_repeats_the_refused_argument_escaped(data: str, capsys) -> None:
    """argparse names the argument it refuses: that echo goes through the same writer."""
    from dws_dagster.cli.main import main

    for argv in (["status", f"--bogus{data}"], ["status", "--format", data], [data]):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("usage: "), err
        assert_terminal_safe(err, argv)
        # Shown escaped, not dropped: as it is, or as argparse quotes a refused choice.
        assert terminal_text(data) in err or terminal_text(repr(data)) in err


def test_help_reads_as_lines_on_a_terminal(capsys) -> None:
    """The help texts keep their layout through the writer that escapes newlines in data."""
    from dws_dagster.cli.main import main

    for argv in (["--help"], ["snapshot", "--help"], ["openlineage", "deliver", "--help"]):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0
        out = capsys.readouterr().out
        assert "\\n" not in out, (argv, out[:200])
        lines = out.splitlines()
        assert lines[0].startswith("usage: dws-dagster"), argv
        assert any(line.startswith("options:") for line in lines), argv
        assert len(lines) > 5, argv
    with pytest.raises(SystemExit):
        main(["snapshot", "--format", "bogus"])
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("usage: dws-dagster snapshot"), err
    assert err.splitlines()[-1].startswith("dws-dagster snapshot: error: argument --format"), err
