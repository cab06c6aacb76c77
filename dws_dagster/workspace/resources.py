"""A workspace resource: a named local folder or object-store prefix with a role, validated
where it is defined (`dws-dagster add`, `resources.json`), so everything downstream can trust
its name, role and location."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dws_dagster.errors import InvalidResourceRefError, WorkspaceConfigError
from dws_dagster.workspace.redaction import redact_text, uri_credentials
from dws_dagster.workspace.refs import validate_resource_name

ROLES = ("source-data", "intermediate-data", "code", "results")
#: Folders of the system, never data: a resource may be neither one of them nor inside one
#: (nor the filesystem root). Anything else may be a resource's folder, inside the workspace
#: or not (a shared mount standing in for object storage is named by a `file://` URI).
SYSTEM_FOLDERS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/System",
    "/private/etc",
)
VERSIONING_MODES = ("content", "listing")
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class Resource:
    """A named part of the workspace: a local folder (`path`) or an object-store prefix (`uri`).

    Examples:
        .. code-block:: python

            from dws_dagster import Workspace

            ws = Workspace.open()
            raw = ws.add_resource(
                "raw", "source-data", uri="s3a://bucket/raw", versioning="listing"
            )
            assert raw.location == "s3a://bucket/raw" and not raw.is_local
            for resource in ws.resources.values():  # by name
                print(resource.name, resource.role, resource.location)
    """

    name: str
    role: str
    path: str | None = None
    uri: str | None = None
    versioning: str = "content"
    description: str = ""

    @property
    def location(self) -> str:
        return self.uri if self.uri is not None else str(self.path)

    @property
    def is_local(self) -> bool:
        return self.uri is None or self.uri.startswith("file://")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "role": self.role, "versioning": self.versioning}
        data["uri" if self.uri is not None else "path"] = self.location
        if self.description:
            data["description"] = self.description
        return data

    @classmethod
    def from_json(cls, data: Any, *, source: Path) -> Resource:
        if not isinstance(data, dict) or "name" not in data or "role" not in data:
            raise WorkspaceConfigError(
                f"{source}: each resource needs 'name' and 'role', got {data!r}; fix the file"
            )
        try:
            return make_resource(
                data["name"],
                data["role"],
                path=data.get("path"),
                uri=data.get("uri"),
                versioning=data.get("versioning", "content"),
                description=data.get("description", ""),
            )
        except (InvalidResourceRefError, WorkspaceConfigError) as exc:
            raise WorkspaceConfigError(f"{source}: {exc}") from None


def make_resource(
    name: str,
    role: str,
    *,
    path: str | None = None,
    uri: str | None = None,
    versioning: str = "content",
    description: str = "",
) -> Resource:
    """Validate the parts of a resource definition and build it."""
    validate_resource_name(name)
    if role not in ROLES:
        raise WorkspaceConfigError(
            f"resource '{name}': unknown role {role!r}; choose one of {', '.join(ROLES)}"
        )
    if (path is None) == (uri is None):
        raise WorkspaceConfigError(f"resource '{name}': give exactly one of a path or a URI")
    if versioning not in VERSIONING_MODES:
        raise WorkspaceConfigError(
            f"resource '{name}': unknown versioning {versioning!r}; "
            f"choose one of {', '.join(VERSIONING_MODES)}"
        )
    if uri is not None:
        if not _URI_SCHEME.match(uri):
            raise WorkspaceConfigError(
                f"resource '{name}': "
                + (repr(uri) if "@" not in uri else "the URI given (it holds '@': not shown)")
                + " is not a URI (expected scheme://...); "
                "use a path for local folders"
            )
        # A user name alone is no credential (`abfss://container@account...` names the
        # container); a password or a signed query is one, and is never echoed back.
        credential = uri_credentials(uri)
        if credential is not None:
            raise WorkspaceConfigError(
                f"resource '{name}': the URI carries credentials ({credential}); remove them "
                "and configure credentials through Spark/Hadoop settings or the environment"
            )
        if uri.lower().startswith("file:"):
            _check_file_uri(name, uri)
        uri = uri.rstrip("/") or uri
    if path is not None and ("\x00" in path or not path.strip()):
        raise WorkspaceConfigError(f"resource '{name}': invalid path {path!r}")
    # Free text typed by a user is stored and printed: no credential it quotes may go with it.
    return Resource(name, role, path, uri, versioning, redact_text(description))


def _check_file_uri(name: str, uri: str) -> None:
    """A `file://` URI names one local folder by its absolute path, read the same way by
    dws_dagster (which takes its path as it is) and by Spark (which decodes it): `file:///abs`
    or `file://localhost/abs`, normalised, with nothing else in it."""
    parts = urlsplit(uri.rstrip("/") or uri)
    problem = None
    if not uri.startswith("file://"):
        problem = "write it file:///absolute/path"
    elif parts.netloc not in ("", "localhost"):
        problem = (
            f"it names the host {parts.netloc!r}, and a file:// resource is a folder of this "
            "machine (or a mount of it) named by its absolute path"
        )
    elif parts.query or parts.fragment or "?" in uri or "#" in uri or ";" in uri:
        problem = "it has a query, fragment or parameters, which name no folder"
    elif "%" in parts.path:
        problem = "it has %-escapes, which Spark decodes and a folder name does not: write the name"
    elif (
        not parts.path.startswith("/")
        or parts.path == "/"
        or any(part in ("", ".", "..") for part in parts.path.split("/")[1:])
    ):
        problem = "its path is not a normalised absolute folder (no '.', '..' or '//', not '/')"
    if problem is not None:
        raise WorkspaceConfigError(
            f"resource '{name}': {uri!r} is not a usable file:// URI: {problem}; or give the "
            "folder as a path (--path)"
        )
    check_local_root(name, parts.path)


def check_local_root(name: str, folder: str) -> None:
    """Refuse a local resource whose folder (absolute) is the filesystem root or lies in a
    system folder (`SYSTEM_FOLDERS`): restoring or replacing a resource's data renames its
    folder, so a definition naming `/etc` would let a snapshot, restore or step rewrite it."""
    normal = os.path.normpath(folder)
    for candidate in dict.fromkeys([normal, os.path.realpath(normal)]):
        inside = next(
            (top for top in SYSTEM_FOLDERS if candidate == top or candidate.startswith(top + "/")),
            None,
        )
        if candidate == os.sep or inside is not None:
            where = (
                "the filesystem root" if inside is None else f"inside the system folder {inside}"
            )
            raise WorkspaceConfigError(
                f"resource '{name}' would be {candidate!r}, {where}, which is never data: give "
                "it a folder of its own (inside the workspace, or a data folder elsewhere)"
            )
