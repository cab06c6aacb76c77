"""A real OpenLineage HTTP endpoint on 127.0.0.1 for tests: records what it is sent, can fail.

    with Receiver() as receiver:                 # started; stopped on exit
        os.environ["OPENLINEAGE_URL"] = receiver.url
        receiver.fail_next(3)                    # the next 3 requests get 500
        receiver.slow_next(2, seconds=3)         # the next 2 are answered 3 s late
        receiver.redirect(302, "/elsewhere")     # every POST to the endpoint is redirected
        receiver.dribble(interval=0.5)           # every answer, a byte every half second
        ...
        receiver.events                          # bodies of the requests it accepted
        receiver.requests                        # every request: method, path, body, status

`Receiver()` picks a free port without listening on it, so until `start()` (and after `stop()`)
connections to `receiver.url` are refused: a catalog that is down.
"""

from __future__ import annotations

import gzip
import json
import random
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LINEAGE_PATH = "/api/v1/lineage"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now, below the ephemeral range.

    Not an ephemeral port: a client connecting to a local port nothing listens on can be
    given that very port as its own source port, connect to itself (TCP simultaneous open)
    and hold it, so the receiver could not start on it later.
    """
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port on 127.0.0.1 between 20000 and 32000")


class Receiver:
    """An OpenLineage receiver: POST `/api/v1/lineage` answers 201, or `status` while failing."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.events: list[dict[str, Any]] = []  # accepted events, in arrival order
        self.requests: list[dict[str, Any]] = []  # every POST: path, status, headers, event
        self._lock = threading.Lock()
        self._ok_before_failing = 0
        self._failures = 0
        self._status = 500
        self._record_failed = False
        self._slow: list[float] = []  # delays of the next requests, in order
        self._redirect: tuple[int, str] | None = None
        self._dribble: tuple[str, float] | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def attempts(self) -> int:
        """How many POSTs reached the receiver (accepted or failed)."""
        with self._lock:
            return len(self.requests)

    def fail_next(
        self, count: int, *, after: int = 0, status: int = 500, record: bool = False
    ) -> None:
        """Let `after` requests through, then answer `status` to the next `count` requests
        (status 0: close the connection without answering).

        With `record`, failed requests still add their event to `events`: a catalog that stored
        the event but failed to say so, which makes the sender send it again.
        """
        with self._lock:
            self._ok_before_failing, self._failures = after, count
            self._status, self._record_failed = status, record

    def slow_next(self, count: int, *, seconds: float) -> None:
        """Answer each of the next `count` requests only after `seconds` (then as usual: the
        event is stored even when the sender gave up waiting, as a slow catalog would)."""
        with self._lock:
            self._slow = [float(seconds)] * count

    def redirect(self, status: int | None, location: str = "") -> None:
        """Answer every POST to exactly the lineage endpoint (no query) with `status` and a
        `Location: location` header (none if empty); requests elsewhere (`/api/v1/lineage?x`)
        are handled as usual. None: stop redirecting."""
        with self._lock:
            self._redirect = None if status is None else (status, location)

    def dribble(self, part: str = "status", *, interval: float = 1.0) -> None:
        """Answer every request a byte every `interval` seconds: from its status line on
        (`part="status"`), or with its headers at once and then a 1 MB body (`"body"`)."""
        with self._lock:
            self._dribble = (part, interval)

    def _delay(self) -> float:
        with self._lock:
            return self._slow.pop(0) if self._slow else 0.0

    def start(self) -> Receiver:
        """Listen (a no-op when listening already, so `with receiver.start():` works too)."""
        if self._server is not None:
            return self
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._other()

            def do_PUT(self) -> None:
                self._other()

            def _other(self) -> None:
                """Any other method: recorded, and answered 200 as a login page would."""
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.requests.append(
                        {
                            "method": self.command,
                            "path": self.path,
                            "status": 200,
                            "headers": dict(self.headers),
                            "body": body,
                            "event": None,
                        }
                    )
                self._answer(200)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                delay = receiver._delay()
                if delay:
                    time.sleep(delay)
                with receiver._lock:
                    redirect = receiver._redirect
                if redirect is not None and self.path == LINEAGE_PATH:
                    with receiver._lock:
                        receiver.requests.append(
                            {
                                "method": "POST",
                                "path": self.path,
                                "status": redirect[0],
                                "headers": dict(self.headers),
                                "body": body,
                                "event": None,
                            }
                        )
                    self._answer(redirect[0], location=redirect[1])
                    return
                status = receiver._handle(self.path, dict(self.headers), body)
                if status == 0:  # hang up without an answer
                    self.close_connection = True
                    return
                self._answer(status)

            def _answer(self, status: int, location: str = "") -> None:
                with receiver._lock:
                    dribble = receiver._dribble
                try:
                    if dribble is not None:
                        self._dribble(status, *dribble)
                        return
                    self.send_response(status)
                    if location:
                        self.send_header("Location", location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:  # the sender stopped waiting (a slow answer)
                    self.close_connection = True

            def _dribble(self, status: int, part: str, interval: float) -> None:
                body = b"x" * 1_000_000
                head = (
                    f"HTTP/1.1 {status} Created\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
                if part == "body":
                    self.wfile.write(head)
                    self.wfile.flush()
                    head = b""
                self.close_connection = True
                for byte in head + body:  # until the sender hangs up
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(interval)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name=f"ol-receiver-{self.port}"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: connections are refused again (the port stays known)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _handle(self, path: str, headers: dict[str, str], body: bytes) -> int:
        if path.split("?", 1)[0] != LINEAGE_PATH:
            status, event = 404, None
        else:
            try:
                event = json.loads(body)
            except ValueError:
                event = None
            status = 201 if event is not None else 400
        with self._lock:
            if status == 201 and self._ok_before_failing:
                self._ok_before_failing -= 1
            elif status == 201 and self._failures:
                self._failures -= 1
                status = self._status
            if event is not None and (status == 201 or self._record_failed):
                self.events.append(event)
            self.requests.append(
                {
                    "method": "POST",
                    "path": path,
                    "status": status,
                    "headers": headers,
                    "body": body,
                    "event": event,
                }
            )
        return status

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
