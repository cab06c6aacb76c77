"""OpenLineage dataset identity (namespace, name) of the places dws data lives.

Follows https://openlineage.io/docs/spec/naming, through the client's own naming helpers where
they fit, so that a dataset dws writes and one another integration (Spark, Airflow) reads meet
in a catalog as one dataset. Locations are taken the way the workspace writes them: raw paths
and URIs, not percent-encoded (`file://` + path), with Hadoop's path semantics on object stores
and HDFS (repeated and trailing slashes do not make another dataset).

User-info (`user:password@`) never leaves this module: a namespace is an identity that catalogs
show and store, so credentials embedded in a URI, and query strings (SAS tokens), are dropped.
Azure's `container@account` is kept: there the user part is the container, not a secret.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from urllib.parse import SplitResult, urlsplit

from openlineage.client.naming.dataset import (
    ABFSS,
    GCS,
    HDFS,
    S3,
    WASBS,
    DatasetNaming,
    LocalFileSystem,
    RemoteFileSystem,
)

from dws_dagster.errors import InvalidLocationError
from dws_dagster.workspace.redaction import redact_text, without_credentials

__all__ = ["InvalidLocationError", "dataset_name"]

_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
#: schemes whose URI user part names a container (`container@account.host`)
_AZURE_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})
_AZURE_DFS_SUFFIX = ".dfs.core.windows.net"
_LOCAL_HOSTS = frozenset({"", "localhost"})
_SLASHES = re.compile(r"/{2,}")


def dataset_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a local path or URI, per the OpenLineage naming spec.

    Local paths and `file://` URIs: (`file`, absolute normalised path); `s3://`, `s3a://`,
    `s3n://`: (`s3://bucket`, key); `gs://`: (`gs://bucket`, key); `hdfs://host:port/p`:
    (`hdfs://host:port`, `/p`); `abfss://` and `wasbs://`: (`scheme://container@host`, path
    without leading slash); any other scheme: (`scheme://authority`, path). A bucket or
    container root is named `/`.
    """
    if not isinstance(location, str) or not location.strip():
        raise InvalidLocationError(
            f"dataset location {location!r} is empty; give an absolute path or a URI such as "
            "s3a://bucket/key"
        )
    if "\x00" in location:
        raise InvalidLocationError(f"dataset location {location!r} contains a NUL character")
    # A relative path names a dataset under the working directory, so that is part of the key.
    return _cached_name(location, None if location.startswith("/") else os.getcwd())


@functools.lru_cache(maxsize=4096)
def _cached_name(location: str, _cwd: str | None) -> tuple[str, str]:
    """Memoized: the sensor names the same few datasets in every event it renders."""
    naming = _naming(location)
    return naming.get_namespace(), naming.get_name()


def _naming(location: str) -> DatasetNaming:
    location = without_credentials(location)  # also a password holding raw `@` or `/`
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if not scheme or _is_windows_drive(scheme):
        return LocalFileSystem(path=_local_path(location))
    if scheme == "file":
        return _file_uri(location, parts)
    if not parts.netloc:
        raise InvalidLocationError(
            f"dataset location {location!r} has no host, bucket or container after "
            f"'{parts.scheme}:'; give the full URI ({parts.scheme}://authority/path) or an "
            "absolute local path"
        )
    user, host_port = _split_netloc(parts.netloc)
    if not host_port:
        raise InvalidLocationError(
            f"dataset location {_redacted(location)!r} has no host, bucket or container"
        )
    path = _hadoop_path(parts.path)
    if scheme in _S3_SCHEMES:
        return S3(bucket_name=host_port, object_key=_key(path))
    if scheme == "gs":
        return GCS(bucket_name=host_port, object_key=_key(path))
    if scheme == "hdfs":
        port = _port(parts, location)
        if port is not None:
            host = host_port[: host_port.rfind(":")]
            return HDFS(namenode_host=host, namenode_port=str(port), path=path)
        return _Generic(f"hdfs://{host_port}", path)  # an HA nameservice: no port
    if scheme in _AZURE_SCHEMES:
        return _azure(scheme, user, host_port, _key(path))
    return _Generic(f"{scheme}://{host_port}", path)


class _Generic(DatasetNaming):
    """`scheme://authority` and path, for the schemes the client has no helper for."""

    def __init__(self, namespace: str, name: str) -> None:
        self._namespace = namespace
        self._name = name

    def get_namespace(self) -> str:
        return self._namespace

    def get_name(self) -> str:
        return self._name


def _is_windows_drive(scheme: str) -> bool:
    return len(scheme) == 1 and os.name == "nt"


def _local_path(path: str) -> str:
    """Absolute, normalised, no trailing slash: one dataset has one name however it was
    spelled (`a/./b/`, `a//b`, relative to the working directory)."""
    return os.path.normpath(os.path.abspath(path))


def _file_uri(location: str, parts: SplitResult) -> DatasetNaming:
    # The workspace writes `file://` + a raw path, so `?` and `#` belong to the path: take all
    # that follows the authority, not urlsplit's path.
    rest = location[len(parts.scheme) + 1 :]
    if rest.startswith("//"):
        authority, slash, raw = rest[2:].partition("/")
        path = slash + raw
    else:  # Hadoop's `file:/x`
        authority, path = "", rest
    _user, host = _split_netloc(authority)
    if not path:
        raise InvalidLocationError(f"file URI {_redacted(location)!r} has no path")
    if host.lower() in _LOCAL_HOSTS:
        return LocalFileSystem(path=_local_path(path))
    return RemoteFileSystem(host=host, path=_local_path_posix(path))


def _local_path_posix(path: str) -> str:
    """A path on another host: normalised as POSIX, never made absolute against this one."""
    return posixpath.normpath("/" + path.lstrip("/"))


def _split_netloc(netloc: str) -> tuple[str | None, str]:
    """(user name without password or None, host[:port]): secrets are dropped here."""
    userinfo, at, host_port = netloc.rpartition("@")
    if not at:
        return None, netloc
    user = userinfo.split(":", 1)[0]
    return user or None, host_port


def _port(parts: SplitResult, location: str) -> int | None:
    try:
        return parts.port
    except ValueError:
        raise InvalidLocationError(
            f"dataset location {_redacted(location)!r} has an invalid port"
        ) from None


def _hadoop_path(path: str) -> str:
    """Hadoop's normal form: single slashes, no trailing slash, `/` for the root."""
    collapsed = _SLASHES.sub("/", path).rstrip("/")
    if not collapsed:
        return "/"
    return collapsed if collapsed.startswith("/") else "/" + collapsed


def _key(path: str) -> str:
    """An object key: the path without its leading slash; `/` names the bucket root."""
    return path.lstrip("/") or "/"


def _azure(scheme: str, container: str | None, host_port: str, key: str) -> DatasetNaming:
    if container and host_port.lower().endswith(_AZURE_DFS_SUFFIX):
        service = host_port[: -len(_AZURE_DFS_SUFFIX)]
        if scheme == "abfss":
            return ABFSS(container=container, service=service, path=key)
        if scheme == "wasbs":
            return WASBS(container=container, service_name=service, object_key=key)
    # The client's helpers assume `.dfs.core.windows.net`; Blob endpoints
    # (`.blob.core.windows.net`) and plain abfs/wasb keep the host they were given.
    authority = f"{container}@{host_port}" if container else host_port
    return _Generic(f"{scheme}://{authority}", key)


def _redacted(location: str) -> str:
    """A location fit for an error message (`redact_text`)."""
    return redact_text(location)
