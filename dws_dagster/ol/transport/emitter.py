"""Sending spooled events through a transport (the client's own `Transport.emit`), one delivery
at a time, with a faster path for the client's file transport appending to a local file."""

from __future__ import annotations

from typing import Any

from openlineage.client.transport import Transport
from openlineage.client.transport.file import FileTransport

from dws_dagster._compat.openlineage import (
    client_logs_kept,
    file_path_for,
    local_path,
    writes_local_files,
)
from dws_dagster.ol.transport.deadline import watching


def emit(transport: Transport, event: dict[str, Any], line: bytes) -> None:
    """`transport.emit(event)`, for an event read back from its spooled JSON `line` (see
    `Emitter`)."""
    with Emitter(transport) as emitter:
        emitter.emit(event, line)


class Emitter:
    """Sends the events of one delivery through a transport.

    The client's file transport appending to one local file opens the file for every event
    and serializes each with `Serde.to_json`, whose pass removing nulls (and empty objects
    from lists) and whose pure-Python key sorting cost most of a delivery. An event whose
    spooled line shows neither (`null`, `[{}`, `,{}`) has nothing to remove, so its spooled
    line, the same JSON with sorted keys in compact form, is appended as it is, to a file
    opened once per delivery and unbuffered (each event is written, or fails, on its own).
    Any other event or transport goes through `transport.emit`.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._fast = (
            type(transport) is FileTransport
            and transport.config.append
            and not transport.config.debug_mode
            and writes_local_files(transport)
        )
        self._path: str | None = None
        self._logs: Any = None
        self._file: Any = None

    def __enter__(self) -> Emitter:
        # The client logs some failures before raising them (a composite transport that goes
        # on after a failing catalog logs a warning per event): they are said in the
        # delivery's report, not printed on a terminal or the sensor's log.
        self._logs = client_logs_kept()
        self._logs.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        logs, self._logs = self._logs, None
        if logs is not None:
            logs.__exit__(*exc)

    def emit(self, event: dict[str, Any], line: bytes, deadline: float | None = None) -> None:
        """Send one event; through the client's transport, within `deadline` seconds in all
        (`deadline.watching`: else `DeliveryDeadlineError`)."""
        if self._fast and b"null" not in line and b"[{}" not in line and b",{}" not in line:
            text = line if line.endswith(b"\n") else line + b"\n"
            try:
                file = self._open(file_path_for(self.transport, event))  # type: ignore[arg-type]
                if file.write(text) == len(text):
                    return
            except Exception:  # the client's own emit() then reports it in its words
                pass
            self.close()
        with watching(deadline):
            self.transport.emit(event)  # type: ignore[arg-type]

    def _open(self, path: str) -> Any:
        """The file `emit()` would append to, kept open while events go to the same one."""
        if path != self._path:
            self.close()
            self._file = open(local_path(path), "ab", buffering=0)  # noqa: SIM115
            self._path = path
        return self._file

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file, self._path = None, None
