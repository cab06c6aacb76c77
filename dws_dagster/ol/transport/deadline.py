"""A deadline for every event however slowly the catalog answers.

The OpenLineage client's `timeout` bounds each read, not an answer: a catalog sending its
status line or its body a byte a second never trips it. `watching(seconds)` bounds everything
the block sends (connecting, the request, the whole answer, the client's retries and their
waits): the connections of a `http.CatalogAdapter` register their sockets with the watch of the
block they serve (`WATCHED_POOLS`), and when the deadline passes the watch shuts them down,
which ends any read blocked on them; the block then raises `DeliveryDeadlineError`.
"""

from __future__ import annotations

import contextvars
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry


class DeliveryDeadlineError(requests.exceptions.Timeout):
    """An event was not delivered within its deadline (the catalog was too slow to answer)."""


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


#: The pools whose connections serve the deadlines, by scheme.
WATCHED_POOLS = {"http": _WatchedPool, "https": _WatchedHTTPSPool}


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
