"""Which database holds a workspace's lineage: the store URL, resolved the way Dagster resolves
its own storage (`dagster.yaml`'s `{env: VAR}`), and shown without its password.

In order:

1. `DWS_STORE_URL` in the environment: a full SQLAlchemy URL, password included (the
   environment is where deployments keep secrets); any SQLite or PostgreSQL URL, with
   `DWS_STORE_SCHEMA` naming a PostgreSQL schema for the tables if wanted.
2. `store` in `.dataworkspace/config.json` (under version control, so never a password):
   `{"url": "postgresql://user@host:5432/db", "password": {"env": "VAR"}, "schema": "dws"}`,
   or `{"url": {"env": "VAR"}}` for a whole URL kept in the environment. Only PostgreSQL: a
   SQLite path read from the workspace could lead anywhere on the machine.
3. Otherwise SQLite in `.dataworkspace/store.db`: nothing to configure on one machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.workspace.redaction import REDACTED, is_secret_name, redact_text

ENV_URL = "DWS_STORE_URL"
ENV_SCHEMA = "DWS_STORE_SCHEMA"
DEFAULT_FILE = "store.db"
_DIALECTS = ("sqlite", "postgresql")
_SCHEMA_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass(frozen=True)
class StoreSettings:
    """A resolved store: its URL (password included: never print it, print `shown`), the
    PostgreSQL schema its tables live in (None: the default), and where it was configured."""

    url: URL
    schema: str | None
    origin: str

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name()

    @property
    def shown(self) -> str:
        """The URL as it may be printed: no password, whatever the URL held."""
        if self.dialect == "sqlite" and not self.url.query:
            # Not through URL rendering: it quotes the path, and fails on a folder name that
            # is not UTF-8.
            text = f"{self.url.drivername}:///{self.url.database}"
        else:
            text = without_password(self.url).render_as_string(hide_password=False)
            text = text.replace(quote(REDACTED, safe=""), REDACTED)  # as the rest of the text
        return text + (f" (schema {self.schema})" if self.schema else "")

    @property
    def key(self) -> str:
        """What identifies the database within a process (engines are shared by it)."""
        if self.dialect == "sqlite":
            return f"sqlite:{self.url.database}"
        return f"{self.url.render_as_string(hide_password=False)}#{self.schema or ''}"

    @property
    def password(self) -> str | None:
        return self.url.password if isinstance(self.url.password, str) else None

    @property
    def secrets(self) -> list[str]:
        """Every credential the URL holds, to be removed from any text about the store: the
        user-info's password and the values of credential query parameters (libpq takes
        `?password=` and `?sslpassword=`)."""
        found = [self.password] if self.password else []
        return found + [value for _name, value in query_secrets(self.url) if value]


def default_settings(meta_dir: Path) -> StoreSettings:
    path = meta_dir / DEFAULT_FILE
    return StoreSettings(URL.create("sqlite", database=str(path)), None, "default")


def resolve(meta_dir: Path, config: Any, *, environ: dict[str, str] | None = None) -> StoreSettings:
    """The store of the workspace whose `.dataworkspace/` is `meta_dir`, with `config` the
    `store` entry of its config.json (None when absent)."""
    env = os.environ if environ is None else environ
    from_env = env.get(ENV_URL)
    if from_env:
        return StoreSettings(
            _parse(from_env, f"${ENV_URL}"), _schema(env.get(ENV_SCHEMA), f"${ENV_SCHEMA}"), ENV_URL
        )
    if config is None:
        return default_settings(meta_dir)
    where = f"{meta_dir / 'config.json'}: store"
    if (
        not isinstance(config, dict)
        or not set(config) <= {"url", "password", "schema"}
        or "url" not in config
    ):
        raise WorkspaceConfigError(
            f'{where}: expected {{"url": ..., "password": {{"env": VAR}}, "schema": '
            "...}} (url required); fix the file, or run 'dws-dagster init --store URL' again"
        )
    url_value = config["url"]
    if isinstance(url_value, dict):
        url = _parse(_from_env(url_value, env, f"{where}.url"), f"{where}.url")
    elif isinstance(url_value, str):
        url = _parse(url_value, f"{where}.url")
        _refuse_stored_password(
            url,
            f"{where}.url",
            "config.json is kept under version control, so it may not. Remove it and give "
            f'"password": {{"env": "VAR"}}, or set ${ENV_URL}',
        )
    else:
        raise WorkspaceConfigError(f'{where}.url: expected a URL or {{"env": VAR}}')
    if url.get_backend_name() != "postgresql":
        raise WorkspaceConfigError(
            f"{where}.url: a workspace configures only a PostgreSQL store (postgresql://...); "
            f"SQLite is the default in .dataworkspace/{DEFAULT_FILE}, or set ${ENV_URL}"
        )
    password = config.get("password")
    if password is not None:
        url = url.set(password=_from_env(password, env, f"{where}.password"))
    return StoreSettings(url, _schema(config.get("schema"), f"{where}.schema"), "config.json")


def from_url(url: str, *, origin: str, environ: dict[str, str] | None = None) -> StoreSettings:
    """A store given as a full URL (password included) from `origin` (an environment
    variable's name, shown in `status`), with `$DWS_STORE_SCHEMA` as for `$DWS_STORE_URL`."""
    env = os.environ if environ is None else environ
    return StoreSettings(
        _parse(url, origin), _schema(env.get(ENV_SCHEMA), f"${ENV_SCHEMA}"), origin
    )


def store_entry(
    url: str, *, password_env: str | None = None, schema: str | None = None
) -> dict[str, Any]:
    """The `store` entry `dws-dagster init --store URL` writes, checked as `resolve` will."""
    parsed = _parse(url, "--store")
    _refuse_stored_password(
        parsed,
        "--store: the URL",
        "it would be written to config.json (kept under version control); give the URL "
        "without it and --store-password-env VAR",
    )
    if parsed.get_backend_name() != "postgresql":
        raise WorkspaceConfigError(
            "--store: only a PostgreSQL URL (postgresql://user@host:port/db) is configured "
            f"here; SQLite is the default, in .dataworkspace/{DEFAULT_FILE}"
        )
    entry: dict[str, Any] = {"url": parsed.render_as_string(hide_password=False)}
    if password_env:
        entry["password"] = {"env": password_env}
    if schema:
        entry["schema"] = _schema(schema, "--store-schema")
    return entry


def without_password(url: URL) -> URL:
    """`url` with no password (`URL.set(password=None)` keeps it: None means unchanged), and
    the value of each credential query parameter (`?password=`, `?sslpassword=`, which libpq
    takes as well as the user-info's) replaced by `***REDACTED***`; a `passfile` is a path and
    stays."""
    query = {
        name: (REDACTED if is_secret_name(name) else value) for name, value in url.query.items()
    }
    return URL.create(
        url.drivername,
        username=url.username,
        host=url.host,
        port=url.port,
        database=url.database,
        query=query,
    )


def query_secrets(url: URL) -> list[tuple[str, str]]:
    """(name, value) of each credential parameter in `url`'s query (a name given several
    times gives each of its values)."""
    found = []
    for name, value in url.query.items():
        if is_secret_name(name):
            values = (value,) if isinstance(value, str) else tuple(value)
            found += [(name, item) for item in values]
    return found


def _refuse_stored_password(url: URL, where: str, advice: str) -> None:
    """A URL that is written to config.json (kept under version control) may hold no
    password, in its user-info or its query."""
    named = [name for name, _ in query_secrets(url)]
    if url.password is None and not named:
        return
    holder = "a password" if url.password is not None else f"a password ({named[0]}=)"
    raise WorkspaceConfigError(f"{where} holds {holder}: {advice}")


def _parse(text: str, where: str) -> URL:
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise WorkspaceConfigError(
            f"{where}: {redact_text(text)[:80]!r} is not a database URL (expected "
            "postgresql://user@host:port/db or sqlite:///path)"
        ) from None
    if url.get_backend_name() not in _DIALECTS:
        raise WorkspaceConfigError(
            f"{where}: the {url.get_backend_name()!r} database is not supported; use "
            "PostgreSQL (postgresql://...) or SQLite (sqlite:///path)"
        )
    if url.get_backend_name() == "sqlite" and not url.database:
        raise WorkspaceConfigError(
            f"{where}: an SQLite URL needs a file (sqlite:///path); "
            "an in-memory database would lose the lineage"
        )
    return url


def _from_env(value: Any, env: Any, where: str) -> str:
    if not isinstance(value, dict) or set(value) != {"env"} or not isinstance(value["env"], str):
        raise WorkspaceConfigError(f'{where}: expected {{"env": "VARIABLE"}}')
    found = env.get(value["env"])
    if not found:
        raise WorkspaceConfigError(
            f"{where}: environment variable {value['env']} is not set; set it where dws_dagster "
            "runs (the Dagster daemon, code server and run workers)"
        )
    return found


def _schema(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if (
        not isinstance(value, str)
        or len(value) > 63
        or not set(value) <= _SCHEMA_CHARS
        or value[0].isdigit()
    ):
        raise WorkspaceConfigError(
            f"{where}: {str(value)[:70]!r} is not a schema name (lower-case letters, digits and "
            "underscores, at most 63, not starting with a digit)"
        )
    return value
