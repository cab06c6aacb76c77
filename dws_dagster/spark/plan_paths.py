"""The paths and file formats of a plan's file reads, written the same whichever plan holds
them: the analyzed plan's file relations give Hadoop root paths (`file:/x`), a Spark Connect
client's plan the paths as the body gave them; both walkers of `spark/` report an input by
the path these functions make of it, so that one read is one input on either kind of session.
"""

from __future__ import annotations

import posixpath
from urllib.parse import urlsplit


def normalise_path(raw: str) -> str:
    """Hadoop's `file:/x` and `file:///x` become `/x`; other URIs stay as they are."""
    parts = urlsplit(raw)
    if parts.scheme == "file":
        return parts.path
    return raw


def client_path(raw: str) -> str:
    """A path as a Spark Connect client's plan holds it (as the body gave it), made what the
    classic session's file relations would give: `file:` URIs plain, and normalised as
    Hadoop's Path does (`/a/./b/` is `/a/b`, no trailing slash)."""
    path = normalise_path(raw)
    if path.startswith("/"):
        return posixpath.normpath(path)
    return path.rstrip("/") if "://" in path and not path.endswith("://") else path


def format_name(raw: str) -> str | None:
    lowered = raw.lower()
    for name in ("parquet", "csv", "json", "orc", "text", "avro"):
        if name in lowered:
            return name
    return None
