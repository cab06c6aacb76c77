"""Where OpenLineage events go: the client's own configuration, found from the workspace.

The OpenLineage client resolves its transport (config file, `OPENLINEAGE__...` variables,
`OPENLINEAGE_URL`, `OPENLINEAGE_DISABLED`); this module reuses that resolution and changes only
what a durable outbox needs:

- an `openlineage.yml` at the workspace root is used when neither `OPENLINEAGE_CONFIG` nor the
  current folder has one (before `~/.openlineage/openlineage.yml`), and a config file that
  cannot be read or is not a mapping is refused, where the client would log it and carry on
  unconfigured (`config`);
- with no configuration at all, events are appended to
  `.dataworkspace/openlineage/events.jsonl` instead of being logged to the console;
- an HTTP transport whose config sets no `retry` gets none: the outbox retries across sensor
  ticks with its own backoff, so a catalog that is down costs one request, not the client's
  ~9 s of retries; and it sends through a `http.CatalogAdapter`;
- a composite transport whose config does not set `continue_on_failure` stops at the first
  failing transport, so a catalog that is down makes the outbox retry (at-least-once) instead
  of losing the event because another catalog took it.

Only the client's documented means are used: the file is handed over as `OPENLINEAGE_CONFIG`,
the default as the client's `config`, and `client.config` tells whether anything is configured;
the one internal (a built HTTP transport's retries) is in `dws_dagster._compat.openlineage`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openlineage.client import OpenLineageClient
from openlineage.client.transport import Transport
from openlineage.client.transport.composite import CompositeTransport
from openlineage.client.transport.file import FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport
from openlineage.client.transport.noop import NoopConfig, NoopTransport

from dws_dagster._compat.openlineage import (
    client_logs_kept,
    set_http_adapter,
    set_http_retry,
    transport_types,
)
from dws_dagster.errors import TransportConfigError
from dws_dagster.ol.transport.config import config_file, read_config_file
from dws_dagster.ol.transport.http import CatalogAdapter
from dws_dagster.ol.transport.text import describe, error_text, redact

if TYPE_CHECKING:
    from dws_dagster.workspace.definition import Workspace

#: Under the workspace's `.dataworkspace/`: where events go when nothing is configured.
DEFAULT_EVENTS_FILE = Path("openlineage") / "events.jsonl"
#: urllib3 Retry settings for "one request per attempt"; status_forcelist is emptied so a 5xx
#: comes back as an HTTPError naming the status instead of a retry-exhausted error.
NO_RETRY: dict[str, Any] = {
    "total": 0,
    "connect": 0,
    "read": 0,
    "status": 0,
    "backoff_factor": 0,
    "status_forcelist": [],
    "allowed_methods": ["HEAD", "POST"],
}
_ENV_PREFIX = "OPENLINEAGE__"
#: The file transport used when nothing is configured; every setting given, so that none comes
#: from a partial configuration (say `OPENLINEAGE__TRANSPORT__DEBUG_MODE` without a type).
_DEFAULT_FILE: dict[str, Any] = {
    "type": "file",
    "append": True,
    "storage_options": None,
    "filesystem": None,
    "fs_kwargs": None,
    "debug_mode": False,
}
_CLIENT_ERRORS = (ValueError, RuntimeError, KeyError, TypeError, ImportError, AttributeError)


def make_transport(workspace: Workspace) -> tuple[Transport, str]:
    """The configured transport for `workspace`, and a one-line description free of secrets.

    The client resolves everything itself, from the file `config_file` picks (handed to it as
    `OPENLINEAGE_CONFIG`) and the environment; only when that configures nothing is it given the
    workspace's events file as its `config`.
    """
    env_sources = sorted(k for k in os.environ if k.startswith(_ENV_PREFIX))
    config_path = config_file(workspace)
    if config_path is not None:
        read_config_file(config_path)  # the client would log a broken file and carry on
    defaulted = False
    with _openlineage_environ_kept(config_path), client_logs_kept():
        try:
            # An explicit transport is used as is: this client only merges the configuration.
            probe = OpenLineageClient(transport=NoopTransport(NoopConfig()))
            settings = dict(probe.config.transport or {})
            _check_type(settings.get("type"), config_path, env_sources, workspace)
            if _disabled() or settings.get("type") or os.environ.get("OPENLINEAGE_URL"):
                client = OpenLineageClient()
            else:
                defaulted = True
                # Its folder is made when an event is written (`prepare_default_file`): a
                # command that only looks (`openlineage status`) creates nothing.
                path = workspace.meta_dir / DEFAULT_EVENTS_FILE
                default = {**_DEFAULT_FILE, "log_file_path": str(path)}
                client = OpenLineageClient(config={"transport": default})
        except _CLIENT_ERRORS as exc:
            raise TransportConfigError(
                f"the OpenLineage transport configuration "
                f"({_sources(config_path, env_sources)}) is invalid: "
                f"{redact(error_text(exc))}; fix it, or remove it to write events to "
                f"{workspace.meta_dir / DEFAULT_EVENTS_FILE}"
            ) from None
    transport = client.transport
    settings = dict(client.config.transport or {})
    _tune(transport, settings)
    if defaulted:
        source = "the default: no OpenLineage configuration found"
    elif transport.kind == "noop" and _disabled():
        source = "OPENLINEAGE_DISABLED=true"
    elif not settings.get("type"):
        source = "OPENLINEAGE_URL"
    else:
        source = _sources(config_path, env_sources)
    return transport, redact(f"{describe(transport)}; from {source}", transport)


def _check_type(
    kind: Any, config_path: str | None, env_sources: list[str], workspace: Workspace
) -> None:
    """Refuse a transport type the client knows no transport by, nor could import (a
    dotted `module.Class` path), in words the user can act on: the client's own error is
    about a failed import ("not enough values to unpack")."""
    if kind is None or (isinstance(kind, str) and ("." in kind or kind in transport_types())):
        return
    raise TransportConfigError(
        f"the OpenLineage transport configuration ({_sources(config_path, env_sources)}) "
        f"names the transport type {str(kind)[:60]!r}, which the OpenLineage client does not "
        f"have; use one of {', '.join(transport_types())}, or the import path of a "
        f"Transport class (module.Class); or remove the configuration to write events to "
        f"{workspace.meta_dir / DEFAULT_EVENTS_FILE}"
    )


def prepare_default_file(transport: Transport, workspace: Workspace) -> None:
    """Make the folder of the workspace's default events file, if `transport` writes there:
    done by whoever is about to send events, not by `make_transport`, which commands that
    only read (`openlineage status`) call too."""
    default = workspace.meta_dir / DEFAULT_EVENTS_FILE
    if isinstance(transport, FileTransport) and transport.config.log_file_path == str(default):
        default.parent.mkdir(parents=True, exist_ok=True)
    elif isinstance(transport, CompositeTransport):
        for child in transport.transports:
            prepare_default_file(child, workspace)


def _disabled() -> bool:
    return os.getenv("OPENLINEAGE_DISABLED", "").lower().strip() == "true"


_RESOLVING = threading.Lock()


@contextmanager
def _openlineage_environ_kept(config_path: str | None) -> Iterator[None]:
    """`OPENLINEAGE_CONFIG` set to `config_path` while the client resolves, and the client's
    aliasing of OPENLINEAGE_URL into `OPENLINEAGE__...` variables undone afterwards: left in
    `os.environ` they outlive the URL, leak the API key to child processes, and change what the
    next resolution finds. One resolution at a time in this process (a code server evaluates
    sensors in threads), so no two see each other's variables."""
    with _RESOLVING:
        before = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIX)}
        explicit = os.environ.get("OPENLINEAGE_CONFIG")
        if config_path is not None:
            os.environ["OPENLINEAGE_CONFIG"] = config_path
        try:
            yield
        finally:
            if explicit is None:
                os.environ.pop("OPENLINEAGE_CONFIG", None)
            else:
                os.environ["OPENLINEAGE_CONFIG"] = explicit
            for key in [k for k in os.environ if k.startswith(_ENV_PREFIX)]:
                if key not in before:
                    del os.environ[key]
            for key, value in before.items():
                if os.environ.get(key) != value:
                    os.environ[key] = value


def _tune(transport: Transport, settings: Mapping[str, Any]) -> None:
    """One request per delivery attempt: the outbox, not the client, retries. HTTP goes
    through a `CatalogAdapter`: no redirect is taken for a delivery unless it keeps the POST
    and stays at the catalog, and each event is bounded by its deadline."""
    if isinstance(transport, HttpTransport):
        if transport.config.retry == _default_retry():
            set_http_retry(transport, dict(NO_RETRY))
        set_http_adapter(transport, CatalogAdapter(transport.url, dict(transport.config.retry)))
    elif isinstance(transport, CompositeTransport):
        if "continue_on_failure" not in settings:
            transport.config.continue_on_failure = False
        for child in transport.transports:
            _tune(child, {})


def _default_retry() -> dict[str, Any]:
    """The retry settings of an HTTP transport whose config sets none."""
    return HttpConfig.from_dict({"url": "http://localhost"}).retry


def _sources(config_path: str | None, env_vars: list[str]) -> str:
    parts = [config_path] if config_path else []
    if env_vars:
        parts.append("OPENLINEAGE__ variables")
    return " and ".join(parts) or "the client's defaults"
