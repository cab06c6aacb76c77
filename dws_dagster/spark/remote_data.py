"""Remote data (HDFS, abfss, s3a, any Hadoop filesystem) for the workspace's restore and gc.

The workspace layer retains a remote version where it lies (workspace/remote.py) but cannot
reach it; this gives it Hadoop's FileSystem API through a Spark session. That API lives in a
classic session's JVM: where Spark Connect is configured (`SPARK_REMOTE`, as a
PySparkResource's `spark.remote`), there is none, and the Connect protocol has no filesystem
operations, so remote data is refused there with what to do instead, before anything remote
is read or changed and without contacting the server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import xxhash
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from dws_dagster.errors import ConnectUnsupportedError, StorageError
from dws_dagster.spark.locations import hadoop_fs
from dws_dagster.spark.version_marker import read_marker
from dws_dagster.workspace.versions import LISTING_PREFIX


@contextmanager
def _filesystem(action: str, location: str) -> Iterator[None]:
    """Hadoop's errors as a StorageError naming what was done where (the JVM's stack trace is
    not a message; its first line is)."""
    try:
        yield
    except Py4JError as exc:
        java = getattr(exc, "java_exception", None)
        reason = str(java.toString()) if java is not None else str(exc).splitlines()[0]
        raise StorageError(
            f"could not {action} {location}: {reason}; check the filesystem's "
            "configuration and permissions (Spark's Hadoop settings), then "
            "retry"
        ) from None


class HadoopData:
    """`workspace.remote.RemoteData` over the Hadoop filesystems of a Spark session (its
    configuration holds the credentials; none pass through here)."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    def _path(self, location: str) -> tuple[Any, Any]:
        fs, jvm = hadoop_fs(self._spark, location)
        return fs, jvm.org.apache.hadoop.fs.Path(location)

    def version(self, location: str) -> str | None:
        with _filesystem("read the version of", location):
            fs, path = self._path(location)
            if not fs.exists(path):
                return None
            marker = read_marker(self._spark, location)
            if marker is not None:
                return str(marker["version"])
            return remote_listing_version(self._spark, location)

    def kept(self, folder: str) -> list[tuple[str, int]]:
        with _filesystem("list", folder):
            fs, path = self._path(folder)
            if not fs.exists(path) or not fs.getFileStatus(path).isDirectory():
                return []
            return [
                (str(status.getPath().getName()), int(status.getModificationTime()))
                for status in fs.listStatus(path)
            ]

    def move(self, source: str, destination: str) -> None:
        with _filesystem("move", source):
            fs, src = self._path(source)
            _, dst = self._path(destination)
            fs.mkdirs(dst.getParent())
            moved = not fs.exists(dst) and fs.rename(src, dst)
        if not moved:
            raise StorageError(
                f"could not move {source} to {destination}; check that the "
                "destination is free and the filesystem writable, then retry"
            )

    def delete(self, location: str) -> None:
        with _filesystem("delete", location):
            fs, path = self._path(location)
            deleted = not fs.exists(path) or fs.delete(path, True)
        if not deleted:
            raise StorageError(
                f"could not delete {location}; check the filesystem's permissions, then retry"
            )


def configured_connect() -> str | None:
    """The Spark Connect server a new session of this process would reach (`SPARK_REMOTE`,
    which pyspark's builder follows), shown as `sc://host:port` (its parameters may hold a
    token), or None when a new session would be classic."""
    raw = os.environ.get("SPARK_REMOTE")
    if not raw:
        return None
    parts = urlsplit(raw)
    return f"{parts.scheme}://{parts.netloc.split(';')[0]}" if parts.netloc else "SPARK_REMOTE"


def refuse_remote_on_connect(location: str) -> None:
    """ConnectUnsupportedError when Spark Connect is configured: `location` (a Hadoop URI) can
    only be reached through a classic session's JVM."""
    server = configured_connect()
    if server is None:
        return
    raise ConnectUnsupportedError(
        f"{location} is remote data (a Hadoop filesystem URI): snapshot, restore, gc and replay "
        "--in-place read, move, list and delete it with Hadoop's FileSystem API in a classic "
        f"Spark session's JVM, and the Spark Connect session configured here ({server}, from "
        "SPARK_REMOTE) has no JVM in this process nor filesystem operations in its protocol; "
        f"nothing at {location} was read or changed. Run this command with a classic session: "
        "unset SPARK_REMOTE (the machine's Spark configuration and the filesystem's Hadoop "
        "settings are then used) (docs/spark-connect.md)"
    )


class ConnectRemoteData:
    """The `RemoteData` of a process configured for Spark Connect: every call is refused."""

    def version(self, location: str) -> str | None:
        refuse_remote_on_connect(location)
        return None

    def kept(self, folder: str) -> list[tuple[str, int]]:
        refuse_remote_on_connect(folder)
        return []

    def move(self, source: str, destination: str) -> None:
        refuse_remote_on_connect(source)

    def delete(self, location: str) -> None:
        refuse_remote_on_connect(location)


def hadoop_data() -> HadoopData | ConnectRemoteData:
    """A `HadoopData` over the active Spark session, or a new one made with the machine's Spark
    configuration (`spark-defaults.conf`, `SPARK_CONF_DIR`): what the CLI uses. Where Spark
    Connect is configured, a `ConnectRemoteData` that refuses (no session is made)."""
    if configured_connect() is not None:
        return ConnectRemoteData()
    return HadoopData(SparkSession.builder.config("spark.ui.enabled", "false").getOrCreate())


def remote_listing_version(spark: SparkSession, location: str) -> str:
    """A listing version (names, sizes, modification times) of remote data, through Hadoop:
    for object-store resources configured with `versioning: listing`."""
    fs, jvm = hadoop_fs(spark, location)
    root = jvm.org.apache.hadoop.fs.Path(location)
    if not fs.exists(root):
        raise StorageError(f"no data at {location}; write it first, or check the URI")
    prefix = fs.getFileStatus(root).getPath().toString().rstrip("/")
    files = fs.listFiles(root, True)
    entries: list[tuple[str, int, int]] = []
    while files.hasNext():
        status = files.next()
        relative = status.getPath().toString()[len(prefix) :].lstrip("/")
        if any(part.startswith((".", "_")) for part in relative.split("/")) or relative.endswith(
            ".crc"
        ):
            continue
        entries.append((relative, int(status.getLen()), int(status.getModificationTime())))
    digest = xxhash.xxh3_128()
    for relative, size, mtime in sorted(entries):
        digest.update(f"{relative}\0{size}\0{mtime}\n".encode())
    return f"{LISTING_PREFIX}{digest.hexdigest()}"
