"""URLs of an asset's source code, for the `sourceCodeLocation` job facet.

Git remotes come in many spellings (scp-like `git@host:org/r.git`, URLs carrying tokens as
user names, local paths); the facet wants URIs, without secrets, and a link a person can
open: the file's page at the commit on the forges whose page URLs are known.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from urllib.parse import quote, urlsplit

__all__ = ["forge_file_url", "path_uri", "repo_uri"]

#: path marker between a project and a revision in a file's page URL, per forge host
_KNOWN_FORGES = {"github.com": "/blob/", "gitlab.com": "/-/blob/", "bitbucket.org": "/src/"}
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^/:]+):(?P<path>(?!//).*)$")
_URI_SAFE = "/:@-._~!$&'()*+,;=%"


def repo_uri(git_url: str) -> str | None:
    """The repository as a URI without secrets: scp-like `git@host:org/r.git` becomes
    `ssh://git@host/org/r.git`; http(s) loses all user-info (tokens are sent as user names),
    other schemes lose passwords; a local path becomes a `file://` URI."""
    text = git_url.strip()
    if os.path.isabs(text):
        return path_uri(text)
    parts = urlsplit(text)
    if parts.scheme.lower() == "file":
        return path_uri(parts.path) if parts.path else None
    match = _SCP_LIKE.match(text) if "://" not in text else None
    if match:
        user = f"{match['user']}@" if match["user"] else ""
        path = match["path"].lstrip("/")
        return f"ssh://{user}{match['host']}/{quote(path, safe=_URI_SAFE)}"
    if not parts.hostname:
        return None
    userinfo, _at, host_port = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    keep_user = bool(user) and ":" not in userinfo and parts.scheme not in ("http", "https")
    authority = f"{user}@{host_port}" if keep_user else host_port
    return f"{parts.scheme.lower()}://{authority}{quote(parts.path, safe=_URI_SAFE)}"


def forge_file_url(repo: str, revision: str | None, path: str | None) -> str | None:
    """The https page of a file at a revision, on GitHub, GitLab and Bitbucket."""
    if not revision or not path or os.path.isabs(path):
        return None
    parts = urlsplit(repo)
    host = (parts.hostname or "").lower()
    marker = _KNOWN_FORGES.get(host)
    if marker is None or parts.scheme not in ("https", "http", "ssh", "git"):
        return None
    project = parts.path.removesuffix("/").removesuffix(".git").strip("/")
    if not project:
        return None
    file_path = quote(PurePosixPath(path).as_posix().lstrip("/"), safe=_URI_SAFE)
    return f"https://{host}/{project}{marker}{quote(revision, safe='')}/{file_path}"


def path_uri(path: str) -> str:
    """A local path as a `file://` URI (normalized, percent-encoded)."""
    return "file://" + quote(os.path.normpath(path), safe=_URI_SAFE)
