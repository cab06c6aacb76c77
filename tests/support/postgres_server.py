"""A throwaway PostgreSQL server on 127.0.0.1 for the tests: `initdb` into a temporary folder,
`pg_ctl start` on a free port, password (SCRAM) authentication, stopped and deleted at the end.

Debian's `postgresql` package puts its binaries in `/usr/lib/postgresql/<major>/bin`, off the
PATH. `initdb` refuses to run as root, so as root every server command runs as the `postgres`
OS user (`runuser`), in a folder that user owns outside pytest's root-only temporary folders.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVER_USER = "postgres"  # the OS user Debian's package creates, used when we are root
DB_USER = "dagster"


def find_bindir() -> Path | None:
    """The newest `/usr/lib/postgresql/<major>/bin` with `initdb`, else the PATH's `initdb`."""
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if debian:
        return debian[-1].parent
    on_path = shutil.which("initdb")
    return Path(on_path).resolve().parent if on_path else None


def unavailable_reason() -> str | None:
    """Why no server can be started here, or None when one can."""
    if find_bindir() is None:
        return (
            "PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin or on "
            "PATH): apt-get install -y postgresql"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return (
                f"running as root and there is no '{SERVER_USER}' OS user to run initdb "
                "as: apt-get install -y postgresql creates it"
            )
        if shutil.which("runuser") is None:
            return "running as root and runuser (util-linux) is missing"
    return None


def free_port() -> int:
    """A port the OS says is free on 127.0.0.1 (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    """A running server: connect with `host`, `port`, `user`, `password`."""

    bindir: Path
    folder: Path
    port: int
    host: str = "127.0.0.1"
    user: str = DB_USER
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16), repr=False)

    def record(self) -> dict[str, Any]:
        """What another process of the test run needs to reach it (`from_record`)."""
        return {
            "bindir": str(self.bindir),
            "folder": str(self.folder),
            "port": self.port,
            "password": self.password,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> PostgresServer:
        return cls(
            bindir=Path(record["bindir"]),
            folder=Path(record["folder"]),
            port=int(record["port"]),
            password=str(record["password"]),
        )

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def log_file(self) -> Path:
        return self.folder / "server.log"

    def _command(self, *args: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", SERVER_USER, "--", *args]
        return list(args)

    def _run(self, *args: str, timeout: float = 60) -> None:
        result = subprocess.run(
            self._command(*args), capture_output=True, text=True, timeout=timeout, check=False
        )
        if result.returncode != 0:
            log = self.log_file.read_text() if self.log_file.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({result.returncode}): "
                f"{result.stdout}{result.stderr}\n{log[-3000:]}"
            )

    def start(self) -> None:
        pwfile = self.folder / "pwfile"
        pwfile.write_text(self.password + "\n")
        self._own(pwfile)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.user,
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-instructions",
        )
        pwfile.unlink()
        # Loopback TCP and a socket in our own folder (the default /var/run/postgresql may be
        # missing or taken); fsync off: a test server's data need not survive a power cut.
        options = (
            f"-c listen_addresses={self.host} -p {self.port} -k {self.folder} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-o",
            options,
            timeout=90,
        )

    def stop(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            self._run(
                str(self.bindir / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.data_dir)
            )

    def _own(self, path: Path) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVER_USER)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def connect(self, database: str = "postgres"):  # -> psycopg2 connection
        import psycopg2

        return psycopg2.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname=database
        )

    def url(self, database: str) -> str:
        """A SQLAlchemy URL of `database`, password included (tests only)."""
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def create_database_named(self, name: str) -> None:
        connection = self.connect()
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()

    def dagster_yaml(self, database: str, password_env: str) -> str:
        """A `dagster.yaml` whose run, event-log and schedule storage is `database`, configured
        as the README's deployment guide shows: the password from `password_env`, and the
        psycopg2 driver named (SQLAlchemy 2.1 maps a bare `postgresql://` to psycopg 3, which
        dagster-postgres does not install)."""
        return f"""\
storage:
  postgres:
    postgres_db:
      hostname: {self.host}
      port: {self.port}
      username: {self.user}
      password:
        env: {password_env}
      db_name: {database}
      scheme: postgresql+psycopg2
telemetry:
  enabled: false
"""

    def create_database(self, prefix: str = "dagster") -> str:
        """A new empty database (one per Dagster instance keeps tests independent), named
        apart from those of the run's other processes, which share the server."""
        name = re.sub(r"\W", "_", f"{prefix}_{uuid.uuid4().hex[:12]}").lower()
        self.create_database_named(name)
        return name


def start_server() -> PostgresServer:
    """Start a server in a new temporary folder; `stop_server` stops it and deletes it."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError(unavailable_reason() or "PostgreSQL is not installed")
    for attempt in range(3):  # the free port may be taken before the server binds it
        folder = Path(tempfile.mkdtemp(prefix="dws-pg-"))
        server = PostgresServer(bindir=bindir, folder=folder, port=free_port())
        try:
            server._own(folder)
            server.start()
            return server
        except RuntimeError:
            shutil.rmtree(folder, ignore_errors=True)
            if attempt == 2:
                raise
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
    raise AssertionError("unreachable")


def stop_server(server: PostgresServer) -> None:
    try:
        server.stop()
    finally:
        shutil.rmtree(server.folder, ignore_errors=True)
