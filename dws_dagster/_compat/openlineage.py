"""Every use of openlineage-python internals, in one place, each behind one small function.

The client's documented API builds transports from configuration; it offers no way to change a
built HTTP transport's retries (the `OPENLINEAGE_URL` transport is built without the factory,
so its config cannot be edited first), nor to ask a file transport where it writes an event
and whether that is a local file. `Emitter` needs the latter to append spooled lines itself.
Nor does it name the schema URL of an event or facet class without building an instance;
`ol/facets.py` builds events as plain dicts and takes each URL from the class.
`tests/test_ol_compat.py` exercises each function against the installed client, so an upgrade
that moves one fails there rather than silently retrying or writing elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openlineage.client.generated.base import BaseEvent, BaseFacet
    from openlineage.client.transport.file import FileTransport
    from openlineage.client.transport.http import HttpTransport


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
