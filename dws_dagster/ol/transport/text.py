"""Text about transports: what one does, in a few words, and the removal of every secret it
holds (keys, passwords, tokens, URL user-info) from text that mentions it or its errors."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import attr
from openlineage.client.transport import Transport
from openlineage.client.transport.composite import CompositeTransport
from openlineage.client.transport.file import FileTransport
from openlineage.client.transport.http import HttpTransport

from dws_dagster.workspace.redaction import is_secret_name, redact_text

_AUTH_NAMES = {"ApiKey": "API-key", "Jwt": "JWT", "OAuth2ClientCredentials": "OAuth2"}


def describe(transport: Transport) -> str:
    """What a transport does, in a few words (redact before showing it)."""
    if isinstance(transport, HttpTransport):
        return _describe_http(transport)
    if isinstance(transport, FileTransport):
        mode = "append" if transport.config.append else "one file per event"
        return f"file {transport.config.log_file_path} ({mode})"
    if isinstance(transport, CompositeTransport):
        children = "; ".join(describe(child) for child in transport.transports)
        stop = (
            "stops at the first failing transport"
            if not transport.config.continue_on_failure
            else "fails only when every transport fails"
        )
        return f"composite [{children}] ({stop})"
    if transport.kind == "noop":
        return "disabled: delivery is paused and events stay pending in the outbox"
    if transport.kind == "console":
        return "console (the client's log, at INFO)"
    if transport.kind == "async_http":
        url = getattr(getattr(transport, "config", None), "url", "")
        return (
            f"async_http {url} (asynchronous: the outbox cannot confirm delivery; prefer type http)"
        )
    return str(transport.kind or type(transport).__name__)


def _describe_http(transport: HttpTransport) -> str:
    auth = type(transport.config.auth).__name__.removesuffix("TokenProvider")
    auth = _AUTH_NAMES.get(auth, auth) or "no"
    if urlsplit(transport.url).username is not None:
        # requests turns URL user-info into basic auth, replacing the token provider's header
        auth = "basic (from the URL)"
    retry = transport.config.retry
    retries = (
        "no client retries" if not retry.get("total") else f"client retries: {retry.get('total')}"
    )
    return (
        f"http {urljoin(transport.url, transport.endpoint)}, {auth} auth, "
        f"timeout {transport.timeout:g} s, {retries}"
    )


# ---------------------------------------------------------------------- secrets


def secrets_of(transport: Transport | None) -> set[str]:
    """Secret values a transport holds (keys, passwords, tokens, URL user-info), so that text
    about it can be redacted; the API key variables are included whatever the transport."""
    found: set[str] = set()
    if transport is not None:
        _collect(transport, "", found, 0)
    for key, value in os.environ.items():
        if key.startswith("OPENLINEAGE") and (is_secret_name(key) or key.endswith("_URL")):
            _collect(_maybe_json(value), key if is_secret_name(key) else "", found, 0)
    return {secret for secret in found if len(secret) >= 3}


def redact(text: str, transport: Transport | None = None) -> str:
    """`text` through `redact_text`, with every secret `transport` holds removed too."""
    return redact_text(text, secrets_of(transport))


def _collect(value: Any, name: str, found: set[str], depth: int) -> None:
    if depth > 8 or value is None:
        return
    if isinstance(value, str):
        if name and is_secret_name(name):
            found.add(value)
        if "://" in value:
            _collect_userinfo(value, found)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            _collect(item, str(key), found, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect(item, name, found, depth + 1)
    elif isinstance(value, CompositeTransport):
        for child in value.transports:
            _collect(child, "", found, depth + 1)
    elif (
        isinstance(value, Transport)
        or attr.has(type(value))
        or type(value).__module__.startswith("openlineage.")
    ):
        for key, item in _attributes(value):
            _collect(item, key, found, depth + 1)


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    if attr.has(type(obj)):
        return [(field.name, getattr(obj, field.name, None)) for field in attr.fields(type(obj))]
    return (
        [(k, v) for k, v in vars(obj).items() if k != "transports"]
        if hasattr(obj, "__dict__")
        else []
    )


def _collect_userinfo(text: str, found: set[str]) -> None:
    try:
        parts = urlsplit(text.strip())
    except ValueError:
        return
    if parts.password:
        found.update({parts.password, unquote(parts.password)})
    if parts.username and parts.password is None:
        found.update({parts.username, unquote(parts.username)})  # a token as the user name


def _maybe_json(value: str) -> Any:
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if isinstance(parsed, dict | list) else value


def error_text(exc: BaseException) -> str:
    """An exception and its cause on one line (redact before storing or showing it)."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {cause})"
    return " ".join(text.split())
