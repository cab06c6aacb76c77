"""HTTP delivery that a catalog cannot fool or hold: no redirect taken for a delivery, and a
deadline for every event however slowly the catalog answers.

The OpenLineage client's HTTP transport posts with a `requests` session, which follows
redirects the way browsers do: a 301, 302 or 303 turns the POST into a bodiless GET, whose
answer (say a 200 from a login page) counts as delivered. Only a 307 or 308 keeps the method
and the body, and only a target at the configured catalog (same scheme, host and port) may be
trusted with the event and its credentials. `CatalogAdapter`, the `requests` transport adapter
the session of every HTTP transport of a delivery is given (`dws_dagster._compat.openlineage
.set_http_adapter`), follows those few hops itself and refuses every other 3xx answer
(`RedirectRefusedError`), so the event stays pending and the error says why.

The client's `timeout` bounds each read, not an answer: a catalog sending its status line or
its body a byte a second never trips it. `watching(seconds)` bounds everything the block sends
(connecting, the request, the whole answer, the client's retries and their waits): the
adapter's connections register their sockets with the watch of the block they serve, and when
the deadline passes the watch shuts them down, which ends any read blocked on them; the block
then raises `DeliveryDeadlineError`.
"""

from __future__ import annotations

import contextvars
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

#: Redirects followed for one event (307/308 within the catalog), as browsers allow about 20.
MAX_REDIRECTS = 5
#: Statuses that keep the method and the body.
_KEEPING = (307, 308)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class DeliveryDeadlineError(requests.exceptions.Timeout):
    """An event was not delivered within its deadline (the catalog was too slow to answer)."""


class RedirectRefusedError(requests.exceptions.RequestException):
    """The catalog answered a redirect (or another 3xx) that a delivery does not follow."""


# ------------------------------------------------------------------------------ deadlines


class _Watch:
    """The sockets of one deadline's block; `fire()` shuts them down (and any opened after)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.until = time.monotonic() + seconds
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def remaining(self) -> float:
        return self.until - time.monotonic()

    def add(self, sock: Any) -> None:
        if sock is None:
            return
        with self._lock:
            if not self.fired:
                self._sockets.append(sock)
                return
        _shut(sock)

    def fire(self) -> None:
        with self._lock:
            self.fired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)


def _shut(sock: Any) -> None:
    """End every read and write on `sock` now (from any thread: closing would not)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError):
        pass


_WATCH: contextvars.ContextVar[_Watch | None] = contextvars.ContextVar("dws_ol_watch", default=None)


@contextmanager
def watching(seconds: float | None) -> Iterator[_Watch | None]:
    """Bound what the block sends through a `CatalogAdapter` to `seconds` in all (None: no
    bound). Past the deadline its sockets are shut down; the block then raises
    `DeliveryDeadlineError`, whatever the client made of the broken connection."""
    if seconds is None:
        yield None
        return
    watch = _Watch(max(seconds, 0.0))
    token = _WATCH.set(watch)
    timer = threading.Timer(watch.seconds, watch.fire)
    timer.daemon = True
    timer.start()
    try:
        yield watch
    except Exception as exc:
        if watch.fired:
            raise DeliveryDeadlineError(
                f"no complete answer within the {seconds:g} s deadline of one delivery "
                "(a catalog answering that slowly holds the sender; it stays pending)"
            ) from exc
        raise
    finally:
        timer.cancel()
        _WATCH.reset(token)


def _register(sock: Any) -> None:
    watch = _WATCH.get()
    if watch is not None:
        watch.add(sock)


class _Watched:
    """Registers a connection's socket with the current deadline when it connects and when it
    is used (mixed into urllib3's HTTP and HTTPS connections)."""

    sock: Any

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _register(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)
        super().request(*args, **kwargs)  # type: ignore[misc]

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        _register(self.sock)
        return super().getresponse(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTPConnection(_Watched, HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, HTTPSConnection):
    pass


class _WatchedPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_POOLS = {"http": _WatchedPool, "https": _WatchedHTTPSPool}


class DeadlineRetry(Retry):
    """The transport's retry settings, whose waits end at the current deadline: a wait that
    would pass it (the backoff, or a `Retry-After` the catalog asked for) is not made."""

    def sleep(self, response: Any = None) -> None:
        watch = _WATCH.get()
        if watch is not None:
            delay = self.get_backoff_time()
            if response is not None and self.respect_retry_after_header:
                delay = max(delay, self.get_retry_after(response) or 0.0)
            if watch.fired or delay >= watch.remaining():
                watch.fire()
                raise DeliveryDeadlineError(
                    f"the next retry would start after the {watch.seconds:g} s deadline"
                )
        super().sleep(response)


# ------------------------------------------------------------------------------ the adapter


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port given even where it is the scheme's default."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


class CatalogAdapter(HTTPAdapter):
    """A `requests` adapter for a delivery to the catalog at `catalog_url`: never returns a
    3xx answer (so `requests` never follows one), follows 307/308 to the same catalog itself,
    and serves every deadline of `watching` (its connections register their sockets)."""

    def __init__(self, catalog_url: str, retry: dict[str, Any]) -> None:
        self.catalog = origin(catalog_url)
        super().__init__(max_retries=DeadlineRetry(**retry))

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS pools have connections of their own
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        hops = 0
        while True:
            response = super().send(request, *args, **kwargs)
            if not 300 <= response.status_code < 400:
                return response
            location = response.headers.get("location")
            target = urljoin(str(request.url), location) if location else None
            response.close()
            keeps = response.status_code in _KEEPING and target is not None
            if keeps and origin(target) == self.catalog and hops < MAX_REDIRECTS:  # type: ignore[arg-type]
                hops += 1
                request = request.copy()
                request.url = target
                continue
            raise RedirectRefusedError(self._refusal(request, response, target, keeps, hops))

    def _refusal(
        self,
        request: requests.PreparedRequest,
        response: Any,
        target: str | None,
        keeps: bool,
        hops: int,
    ) -> str:
        answer = f"{response.status_code} {_printable(response.reason or '')}".strip()
        text = f"the catalog answered {answer} to {request.method} {_printable(str(request.url))}"
        if target is None:
            return f"{text}, which is not a delivery (events stay pending)"
        text += f", redirecting to {_printable(target)}"
        scheme, host, port = self.catalog
        if not keeps:
            why = (
                "a redirect is followed only when it keeps the method and the body (307, "
                "308): this one would send a bodiless GET"
            )
        elif hops >= MAX_REDIRECTS:
            why = f"a delivery follows at most {MAX_REDIRECTS} redirects"
        else:
            why = (
                f"a redirect is followed only within the configured catalog ({scheme}://"
                f"{host}:{port})"
            )
        return (
            f"{text}; {why}, so the events stay pending: set the transport's url to where the "
            "catalog is now"
        )


def _printable(text: str, limit: int = 200) -> str:
    """Text a catalog sent (a reason phrase, a Location), as it may be shown: control and
    formatting characters escaped, cut short."""
    shown = "".join(
        c if c.isprintable() and c not in "\u202a\u202b\u202c\u202d\u202e" else f"\\u{ord(c):04x}"
        for c in text[:limit]
    )
    return shown + ("…" if len(text) > limit else "")
