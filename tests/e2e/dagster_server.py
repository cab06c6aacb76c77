"""Start and stop `dg dev` (webserver and daemon) for end-to-end tests.

`dg dev -w workspace.yaml` is Dagster 1.13's dev server (`dagster dev` says "Use 'dg dev'
instead"): given a workspace file it runs the same server as `dagster dev`, in its own process.
Started from a non-interactive process it ignores SIGINT and SIGTERM (background jobs inherit
SIGINT ignored, and Dagster maps SIGTERM to its SIGINT handler), so the child restores both to
their defaults before exec, in a new session: the whole process group (webserver, daemon, code
servers, run workers and their Spark JVMs) is then stopped with SIGTERM, and SIGKILL after a
deadline. Every wait polls with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

DAGSTER_YAML = """\
# Written by tests/e2e/dagster_server.py for one test instance.
telemetry:
  enabled: false
# A queued run starts within a second (Dagster's default: within 5 s).
run_queue:
  dequeue_interval_seconds: 1
"""


class DagsterServerError(RuntimeError):
    """`dg dev` did not start, or stopped unexpectedly."""


def poll(
    check: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.5,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Call `check` until it returns something other than None (or False), at most `timeout`
    seconds; raise `TimeoutError` naming `what` (and `on_timeout()`'s details) otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() >= deadline:
            details = on_timeout() if on_timeout is not None else ""
            raise TimeoutError(
                f"timed out after {timeout:.0f} s waiting for {what}"
                + (f"\n{details}" if details else "")
            )
        time.sleep(interval)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _restore_default_signals() -> None:  # runs in the child, before exec
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we cannot signal is still a member
        return True
    return True


@dataclass
class DagsterServer:
    """A running `dg dev`; use it as a context manager, or call `stop()`."""

    process: subprocess.Popen[bytes]
    port: int
    home: Path
    log_path: Path
    env: Mapping[str, str] = field(repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DagsterServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def check_running(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise DagsterServerError(
                f"dg dev exited with code {code}; log {self.log_path}:\n{self.log_tail()}"
            )

    def http_ok(self, path: str = "/server_info", timeout: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
                return 200 <= response.status < 300
        except (urllib.error.URLError, OSError):
            return False

    def wait_until_up(self, timeout: float = 120.0) -> None:
        """Poll the webserver's `/server_info` until it answers (or the process dies)."""

        def answered() -> bool:
            self.check_running()
            return self.http_ok()

        poll(
            answered,
            timeout=timeout,
            what=f"the Dagster webserver at {self.url}",
            interval=0.25,
            on_timeout=self.log_tail,
        )

    def graphql(
        self, query: str, variables: Mapping[str, Any] | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        """POST a GraphQL query to the webserver; its `data`, or an error with its `errors`."""
        body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(
            self.url + "/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise DagsterServerError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def served_url(self) -> str | None:
        """Where the webserver said it serves (its log's "Serving dagster-webserver on URL")."""
        found = re.search(
            r"Serving dagster-webserver on (http://\S+?)(?: in process|\s|$)", self.log_tail(400)
        )
        return found[1] if found else None

    def instance_info(self) -> str:
        """The Dagster instance the server uses, as it describes itself (its storage folders
        are in DAGSTER_HOME)."""
        return self.graphql("query E2EInstance { instance { info } }")["instance"]["info"] or ""

    def wait_for_code_locations(self, timeout: float = 180.0) -> list[str]:
        """Poll until every code location has loaded; fail at once if one failed to load."""
        query = """
        query E2ECodeLocations {
          workspaceOrError {
            __typename
            ... on Workspace {
              locationEntries {
                name
                loadStatus
                locationOrLoadError {
                  __typename
                  ... on PythonError { message stack }
                }
              }
            }
          }
        }"""

        def loaded() -> list[str] | None:
            self.check_running()
            data = self.graphql(query)["workspaceOrError"]
            if data["__typename"] != "Workspace" or not data["locationEntries"]:
                return None
            entries = data["locationEntries"]
            for entry in entries:
                error = entry["locationOrLoadError"]
                if error and error["__typename"] == "PythonError":
                    raise DagsterServerError(
                        f"code location {entry['name']} failed to load: {error['message']}\n"
                        + "".join(error.get("stack") or [])
                    )
            if all(e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries):
                return [e["name"] for e in entries]
            return None

        return poll(
            loaded,
            timeout=timeout,
            what="the code locations to load",
            interval=0.5,
            on_timeout=self.log_tail,
        )

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM the whole process group, wait for it to go, SIGKILL what is left after
        `timeout` seconds. Returns dg dev's exit code (None if it had to be killed)."""
        pgid = self.process.pid  # the session leader: its pid is the group id
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.process.poll()  # reap the leader, or it stays in the group as a zombie
            if self.process.returncode is not None and not _group_alive(pgid):
                return self.process.returncode
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        poll(
            lambda: not _group_alive(pgid),
            timeout=10,
            what=f"process group {pgid} to die after SIGKILL",
        )
        return None


def dg_command() -> list[str]:
    """`dg` (dagster-dg-cli) from this interpreter's environment."""
    script = Path(sys.executable).with_name("dg")
    return (
        [str(script)]
        if script.is_file()
        else [sys.executable, "-c", "from dagster_dg_cli.cli import main; main()"]
    )


def start_dg_dev(
    repo_root: Path,
    *,
    home: Path,
    workspace_dir: Path,
    log_dir: Path,
    port: int | None = None,
    extra_env: Mapping[str, str] | None = None,
    workspace_file: str = "workspace.yaml",
    startup_timeout: float = 120.0,
) -> DagsterServer:
    """Start `dg dev -w workspace.yaml -h 127.0.0.1 -p PORT` in `repo_root` with
    DAGSTER_HOME=`home` (a `dagster.yaml` with telemetry disabled is written there),
    DWS_EXAMPLE_WORKSPACE=`workspace_dir` and SPARK_LOCAL_IP=127.0.0.1; its output goes to
    `log_dir/dg-dev.log`. Returns once the webserver answers HTTP."""
    home.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(DAGSTER_YAML, "utf-8")
    port = port or free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DWS_EXAMPLE_WORKSPACE": str(workspace_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    # Keep this interpreter's environment first on PATH (dg dev starts `python`,
    # the code servers and the daemon, by sys.executable, but Spark looks for `java`).
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    command = [*dg_command(), "dev", "-w", workspace_file, "-h", "127.0.0.1", "-p", str(port)]
    return launch(
        command,
        cwd=repo_root,
        env=env,
        port=port,
        home=home,
        log_path=log_dir / "dg-dev.log",
        startup_timeout=startup_timeout,
    )


def launch(
    command: Sequence[str] | str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    port: int,
    home: Path,
    log_path: Path,
    startup_timeout: float = 120.0,
) -> DagsterServer:
    """Start a dev server's `command` (a shell command line, if a string) serving on `port`
    and its instance in `home`, in a new session with SIGINT and SIGTERM at their defaults;
    its output goes to `log_path`. Returns once the webserver answers HTTP."""
    argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
    shown = command if isinstance(command, str) else " ".join(command)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"$ {shown}  (cwd {cwd})\n".encode())
        log.flush()
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_restore_default_signals,
        )
    server = DagsterServer(process=process, port=port, home=home, log_path=log_path, env=env)
    try:
        server.wait_until_up(startup_timeout)
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def dg_dev(repo_root: Path, **kwargs: Any) -> Iterator[DagsterServer]:
    """`start_dg_dev(...)` as a context manager that always stops the server."""
    server = start_dg_dev(repo_root, **kwargs)
    try:
        yield server
    finally:
        server.stop()
