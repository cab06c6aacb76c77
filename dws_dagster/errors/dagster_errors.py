"""Refusals on the Dagster side: library compatibility, the write path, the lineage sensor,
the asset checks, the component and the demo."""

from __future__ import annotations

from dws_dagster.errors.base import DwsError


class DagsterCompatibilityError(DwsError):
    """The installed Dagster no longer offers an internal dws_dagster relies on."""


class BindingError(DwsError):
    """An asset's workspace binding (`dws_ref` metadata) is invalid.

    Examples:
        .. code-block:: python

            from dws_dagster import BindingError, dws_ref

            try:
                dws_ref("intermediate-data", "hourly_actuals", format="xlsx")
            except BindingError as exc:
                print(exc)  # names the binding and the formats to choose from
    """


class OutputTypeError(DwsError):
    """An asset handed the Spark IO manager something other than a DataFrame.

    Examples:
        .. code-block:: python

            from dagster import asset, materialize

            from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource, dws_ref

            @asset(metadata=dws_ref("intermediate-data", "zone_names"))
            def zone_names() -> dict:
                return {"1": "Newark Airport"}  # not a DataFrame

            resources = {"io_manager": SparkWorkspaceIOManager(workspace=WorkspaceResource())}
            result = materialize([zone_names], resources=resources, raise_on_error=False)
            assert not result.success  # OutputTypeError: asset 'zone_names' returned builtins.dict
    """


class MissingPartitionError(DwsError):
    """An input partition has never been materialized.

    Examples:
        .. code-block:: python

            from dagster import DailyPartitionsDefinition, asset, materialize
            from pyspark.sql import DataFrame

            from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource, dws_ref

            daily = DailyPartitionsDefinition(start_date="2024-01-01")

            @asset(partitions_def=daily, metadata=dws_ref("intermediate-data", "daily_trips"))
            def daily_trips() -> DataFrame: ...  # never materialized for 2024-01-02

            @asset(partitions_def=daily, metadata=dws_ref("intermediate-data", "daily_zones"))
            def daily_zones(daily_trips: DataFrame) -> DataFrame:
                return daily_trips.select("zone")

            result = materialize(
                [daily_trips, daily_zones],
                selection=[daily_zones],
                partition_key="2024-01-02",
                resources={"io_manager": SparkWorkspaceIOManager(workspace=WorkspaceResource())},
                raise_on_error=False,
            )
            assert not result.success  # MissingPartitionError: ... materialize 'daily_trips' first
    """


class ReplayOutsideScratchError(DwsError):
    """A run tagged as a replay would write into a workspace that is not a replay's scratch
    workspace (a replay run re-executed from the UI, a tag copied by hand)."""


class PartitionRangeError(DwsError):
    """A step materializing several partitions cannot tell which rows belong to which.

    Examples:
        A range of days in one step needs `partition_expr`, the column telling each row's day:

        .. code-block:: python

            from dagster import BackfillPolicy, DailyPartitionsDefinition, asset
            from pyspark.sql import DataFrame

            from dws_dagster import dws_ref

            @asset(
                partitions_def=DailyPartitionsDefinition(start_date="2024-01-01"),
                backfill_policy=BackfillPolicy.single_run(),
                metadata={**dws_ref("intermediate-data", "daily_trips"), "partition_expr": "day"},
            )
            def daily_trips(trips: DataFrame) -> DataFrame:
                return trips.groupBy("day", "zone").count()

        Without `partition_expr`, a backfill of several days fails with `PartitionRangeError`
        before anything is written; `BackfillPolicy.multi_run(1)` runs one day per run instead.
    """


class SchemaDriftError(DwsError):
    """Partitions read together have different schemas.

    Examples:
        A column added to `hourly_actuals` from one day on makes a read of all its days refused
        before the body runs, naming the partitions on each side and the columns that differ:

        .. code-block:: python

            from dagster import AllPartitionMapping, AssetIn, asset
            from pyspark.sql import DataFrame

            from dws_dagster import dws_ref

            @asset(
                ins={"hourly_actuals": AssetIn(partition_mapping=AllPartitionMapping())},
                metadata=dws_ref("results", "yearly_summary"),
            )
            def yearly_summary(hourly_actuals: DataFrame) -> DataFrame:  # SchemaDriftError
                return hourly_actuals.groupBy("zone").count()

        Re-materialize the older partitions with the new schema (a backfill), then read them
        together.
    """


class CheckConfigError(DwsError):
    """dws asset checks were asked with settings they do not know.

    Examples:
        .. code-block:: python

            from dws_dagster import CheckConfigError, dws_asset_checks

            try:
                dws_asset_checks(["hourly_actuals"], checks=["freshness"])
            except CheckConfigError as exc:
                print(exc)  # dws asset checks: unknown check(s) 'freshness'; choose among ...
    """


class DemoError(DwsError):
    """The demo cannot run as asked."""


class ComponentConfigError(DwsError):
    """A `WorkspaceComponent`'s `defs.yaml` says something it cannot use: an unknown key, a
    ref that leaves its resource, a credential written in the file, a value of the wrong
    kind. The message names the file and the key.

    Examples:
        Raised when the definitions load (`dg check defs`, `dg dev`, a run), naming the file and the
        key. A `defs.yaml` with a misspelt key:

        .. code-block:: yaml

            type: dws_dagster.WorkspaceComponent

            attributes:
              io_manager:
                formt: csv  # ComponentConfigError: .../defs.yaml: attributes.io_manager.formt: ...

        and one with a credential, which would be shown in the UI as resource configuration:

        .. code-block:: yaml

            type: dws_dagster.WorkspaceComponent

            attributes:
              pyspark:
                spark_config:
                  spark.hadoop.fs.s3a.secret.key: "{{ env.S3_SECRET }}"  # ComponentConfigError
    """


class SensorConfigError(DwsError):
    """The lineage sensor was configured with values it cannot work with."""
