"""Refusals of the Spark side: storage and ranges of partitions, and what a Spark Connect
session cannot do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dws_dagster.errors.base import DwsError

if TYPE_CHECKING:
    from dws_dagster.spark.storage import WriteResult


class ConnectUnsupportedError(DwsError):
    """A feature that needs the Spark driver's JVM in this process was asked of a Spark
    Connect session (no JVM on the client): the message names the feature and what works
    instead (docs/spark-connect.md).

    Examples:
        A resource on a Hadoop filesystem needs a classic session; on Spark Connect a step writing
        it fails before anything is written:

        .. code-block:: python

            from dagster_pyspark import PySparkResource

            from dws_dagster import SparkWorkspaceIOManager, Workspace, WorkspaceResource

            Workspace.open().add_resource("lake", "intermediate-data", uri="s3a://bucket/lake")
            pyspark = PySparkResource(spark_config={"spark.remote": "sc://spark-connect:15002"})
            workspace = WorkspaceResource(root=".")
            io_manager = SparkWorkspaceIOManager(workspace=workspace, pyspark=pyspark)
            # An asset bound to dws_ref("lake", ...) now fails with ConnectUnsupportedError:
            # use a classic session with the filesystem's Hadoop settings for that resource.
    """


class StorageError(DwsError):
    """A DataFrame could not be written or read at a location.

    Examples:
        .. code-block:: python

            from dagster import asset, materialize
            from pyspark.sql import DataFrame, SparkSession

            from dws_dagster import (
                SparkWorkspaceIOManager,
                StorageError,
                WorkspaceResource,
                dws_ref,
            )

            @asset(metadata=dws_ref("intermediate-data", "zones"))
            def zones() -> DataFrame:
                spark = SparkSession.builder.getOrCreate()
                return spark.createDataFrame([(1, "Newark Airport")], ["zone", "name"])

            io_manager = SparkWorkspaceIOManager(workspace=WorkspaceResource())
            try:
                materialize([zones], resources={"io_manager": io_manager})
            except Exception as exc:  # Dagster wraps the step's error
                cause = exc
                while cause is not None and not isinstance(cause, StorageError):
                    cause = cause.__cause__
                print(cause)  # ... writing ... failed: ...; the previous data is unchanged. ...
    """


class RangeWriteError(StorageError):
    """A range write failed; `written` holds the partitions already swapped in (new data, whole),
    every other partition still holds its previous data.

    Examples:
        Which days a failed range step swapped in (each whole; the others keep their data):

        .. code-block:: python

            from dagster import materialize

            from dws_dagster import RangeWriteError

            # daily_trips: a range asset (BackfillPolicy.single_run()); resources: its IO manager
            try:
                materialize(
                    [daily_trips],
                    resources=resources,
                    tags={
                        "dagster/asset_partition_range_start": "2024-01-01",
                        "dagster/asset_partition_range_end": "2024-01-31",
                    },
                )
            except Exception as exc:  # Dagster wraps the step's error
                cause = exc
                while cause is not None and not isinstance(cause, RangeWriteError):
                    cause = cause.__cause__
                if cause is not None:
                    print(sorted(cause.written))  # the new days; re-run the others
    """

    def __init__(self, message: str, written: Mapping[str, WriteResult]) -> None:
        super().__init__(message)
        self.written = dict(written)


class RowsOutsideRangeError(StorageError):
    """Rows of a range write belong to no partition of the range.

    Examples:
        A range step returns only the rows of its own partitions:

        .. code-block:: python

            from dagster import (
                AssetExecutionContext,
                BackfillPolicy,
                DailyPartitionsDefinition,
                asset,
            )
            from pyspark.sql import DataFrame
            from pyspark.sql import functions as F

            from dws_dagster import dws_ref

            @asset(
                partitions_def=DailyPartitionsDefinition(start_date="2024-01-01"),
                backfill_policy=BackfillPolicy.single_run(),
                metadata={**dws_ref("intermediate-data", "daily_trips"), "partition_expr": "day"},
            )
            def daily_trips(context: AssetExecutionContext, trips: DataFrame) -> DataFrame:
                start, end = context.partition_time_window
                day = F.col("day")
                in_range = (day >= F.lit(start.date())) & (day < F.lit(end.date()))
                # without the filter, a day outside the run: RowsOutsideRangeError, nothing written
                return trips.where(in_range).groupBy("day", "zone").count()
    """
