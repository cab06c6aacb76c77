"""Where a DataFrame's data lives, and how this process reaches it: a plain path is written and
read with local renames; any URI (file:// too) through Hadoop's FileSystem API in the driver's
JVM, which a Spark Connect client does not have, so such a location is refused there before
anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

from dws_dagster.spark.session_kind import refuse_on_connect


def is_local(location: str) -> bool:
    """Plain paths are written with local renames; any URI (file:// too) through Hadoop."""
    scheme = urlsplit(location).scheme
    return scheme == "" or (len(scheme) == 1 and os.name == "nt")


def local_path(location: str) -> Path:
    return Path(location)


def check_reachable(spark: SparkSession | None, location: str, what: str) -> None:
    """Refuse, before anything is written, remote data on a Spark Connect session: dws_dagster
    reaches Hadoop filesystem URIs (staging, atomic rename, markers, listings) through the
    driver's JVM, which a Connect client does not have."""
    if is_local(location):
        return
    refuse_on_connect(
        spark,
        f"{what}: {location} is a Hadoop filesystem URI; reaching it (staging, atomic rename, "
        "version markers, listings)",
        "Use a classic Spark session (with the filesystem's Hadoop settings) for this resource, "
        "or a local or mounted path that this process and the Connect server share",
    )


def hadoop_fs(spark: SparkSession, location: str) -> tuple[Any, Any]:
    check_reachable(spark, location, "remote data")
    jvm: Any = spark.sparkContext._jvm  # the Hadoop FileSystem API has no Python face
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), jvm
