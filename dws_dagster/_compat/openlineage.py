"""Every use of openlineage-python internals, in one place, each behind one small function.

The client's documented API builds transports from configuration; it offers no way to change a
built HTTP transport's retries or the `requests` adapter it sends through (`ol/transport/http`:
no redirect followed, a deadline per event); the `OPENLINEAGE_URL` transport is built without
the factory, so its config cannot be edited first. Nor can one ask a file transport where it
writes an event and whether that is a local file: `Emitter` needs this to append spooled
lines itself. Nor does it name the schema URL of an event or facet class without building
an instance; `ol/facets.py` builds events as plain dicts and takes each URL from the class.
The client also logs to its own loggers (`openlineage.client...`) where it should raise or say
nothing: an unknown transport type logs "not enough values to unpack" before raising, which
Python's last-resort handler prints on stderr above the CLI's one-line error;
`client_logs_kept` keeps those records from reaching any handler.
`tests/compat/test_openlineage_compat.py` exercises each function against the installed
client, so an upgrade that moves one fails there rather than silently retrying or writing
elsewhere.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openlineage.client.generated.base import BaseEvent, BaseFacet
    from openlineage.client.transport.file import FileTransport
    from openlineage.client.transport.http import HttpTransport
    from requests.adapters import HTTPAdapter


def schema_url(generated: type[BaseEvent] | type[BaseFacet]) -> str:
    """The schema URL the client writes in an instance of `generated` (an event's `schemaURL`,
    a facet's `_schemaURL`): the spec version of the installed client."""
    return generated._get_schema()


def set_http_retry(transport: HttpTransport, retry: dict[str, Any]) -> None:
    """Make a built HTTP transport retry as `retry` (urllib3 `Retry` settings) says.

    The transport reads `config.retry` when it builds its session, on its first send, so
    replacing the setting before any send takes effect.
    """
    transport.config.retry = retry


def transport_types() -> list[str]:
    """The transport types the client's factory knows by name (`http`, `file`, `kafka`, ...);
    any other `type` is taken as the import path of a Transport class."""
    from openlineage.client.transport import get_default_factory

    return sorted(get_default_factory().transports)


def set_http_adapter(transport: HttpTransport, adapter: HTTPAdapter) -> None:
    """Send every request of a built HTTP transport through `adapter`, whatever its URL.

    The transport mounts `config.adapter` on its session for its own URL when it is given a
    session (its `session` setter), and builds a session of its own on first use otherwise.
    A new session with `adapter` mounted for every http and https URL (the endpoint may lie
    outside the transport's URL, and a redirect anywhere) is handed over before any send;
    the session also refuses to follow redirects itself (`max_redirects = 0`), should a
    3xx answer ever reach it.
    """
    import requests

    transport.config.adapter = adapter
    session = requests.Session()
    session.max_redirects = 0
    for prefix in ("http://", "https://"):
        session.mount(prefix, adapter)
    transport.session = session


def file_path_for(transport: FileTransport, event: Any) -> str:
    """The file a file transport's `emit(event)` would write to."""
    return str(transport._get_file_path(event))


def writes_local_files(transport: FileTransport) -> bool:
    """Whether a file transport writes through the built-in `open` (not fsspec)."""
    from openlineage.client.transport.file import LocalFileHandler

    return type(transport._file_handler) is LocalFileHandler


def local_path(path: str) -> str:
    """The local file name a file transport opens for `path` (a plain path or `file://` URL)."""
    from openlineage.client.transport.file import LocalFileHandler

    return str(LocalFileHandler._to_local_path(path))


#: The logger every module of the client logs under (`openlineage.client.utils`, ...).
CLIENT_LOGGER = "openlineage.client"


class _Keep(logging.Handler):
    """Appends every record it handles to the lists of the blocks that are open now."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lists: list[list[logging.LogRecord]] = []

    def emit(self, record: logging.LogRecord) -> None:
        for records in list(self.lists):
            records.append(record)


_KEEP = _Keep()
_KEEPING = threading.Lock()
_kept_propagate: list[bool] = []  # the logger's own setting while a block is open


@contextmanager
def client_logs_kept() -> Iterator[list[logging.LogRecord]]:
    """While the block runs, the client's log records are kept in the list it yields instead
    of reaching the handlers of the root logger (or Python's last-resort handler, which
    prints warnings on stderr when none is configured): what the client has to say is in the
    exceptions it raises, and the callers say it in their own words. Blocks may overlap (in
    threads); the logger is given back as it was when the last one ends."""
    logger = logging.getLogger(CLIENT_LOGGER)
    records: list[logging.LogRecord] = []
    with _KEEPING:
        if not _KEEP.lists:
            _kept_propagate[:] = [logger.propagate]
            logger.addHandler(_KEEP)
            logger.propagate = False
        _KEEP.lists.append(records)
    try:
        yield records
    finally:
        with _KEEPING:
            _KEEP.lists[:] = [kept for kept in _KEEP.lists if kept is not records]
            if not _KEEP.lists:
                logger.removeHandler(_KEEP)
                logger.propagate = _kept_propagate[0]
