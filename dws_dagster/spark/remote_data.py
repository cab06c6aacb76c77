"""Remote data (HDFS, abfss, s3a, any Hadoop filesystem) for the workspace's restore and gc.

The workspace layer retains a remote version where it lies (workspace/remote.py) but cannot
reach it; this gives it Hadoop's FileSystem API through a Spark session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from dws_dagster.spark.storage import StorageError, _hadoop_fs, read_marker, remote_listing_version


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
        fs, jvm = _hadoop_fs(self._spark, location)
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


def hadoop_data() -> HadoopData:
    """A `HadoopData` over the active Spark session, or a new one made with the machine's Spark
    configuration (`spark-defaults.conf`, `SPARK_CONF_DIR`): what the CLI uses."""
    return HadoopData(SparkSession.builder.config("spark.ui.enabled", "false").getOrCreate())
