"""What `dg scaffold defs dws_dagster.WorkspaceComponent NAME` writes: a `defs.yaml` that runs
as it is on one machine (local Spark, the workspace named by `$DWS_WORKSPACE` or the project's
folder, SQLite lineage store unless `$DWS_STORE_URL` names another), with every section a
team changes written out and commented."""

from __future__ import annotations

from typing import Any

from dagster import Scaffolder, ScaffoldRequest

DEFS_YAML = """\
type: {type_name}

attributes:
  # The Data Workspace: a folder holding .dataworkspace/ ('dws-dagster init DIR'), or one
  # inside it. Templates read the environment where the code runs.
  workspace:
    root: "{{{{ env('DWS_WORKSPACE', '.') }}}}"
    # The lineage store's URL, password included, stays in this variable (only its name is
    # configuration); unset: .dataworkspace/config.json's store, else SQLite in the workspace.
    store_url: "{{{{ env.DWS_STORE_URL }}}}"

  # How the assets' DataFrames are stored (SparkWorkspaceIOManager).
  io_manager:
    format: parquet
    versioning: rows
    keep_versions: 3

  # The Spark session (dagster-pyspark's PySparkResource). No credentials here: the Dagster
  # UI shows resource configuration; give them to Spark through the environment.
  pyspark:
    spark_config:
      spark.master: "local[2]"
      spark.driver.host: 127.0.0.1
      spark.driver.bindAddress: 127.0.0.1
      spark.ui.enabled: "false"
      spark.sql.shuffle.partitions: "2"
      spark.sql.session.timeZone: UTC

  # The lineage sensor: lineage records, results, snapshots and OpenLineage events.
  sensor:
    snapshot_on_results: true
    openlineage: true

  # Assets defined anywhere in the project, bound to workspace refs: by key, or by a
  # selection (each asset at its key path below ref). Unbound assets the IO manager stores
  # live at their key path in the workspace's intermediate-data resource.
  assets: []
  #  - key: hourly_actuals
  #    ref: intermediate/hourly_actuals
  #  - select: "group:staging"
  #    ref: intermediate/staging

  # dws asset checks on every bound asset: data matches its recorded version, inputs
  # consistent, reproduced (after 'dws-dagster replay'). blocking: ERROR, stops downstream.
  checks:
    select: "*"
    severity: warning
"""


class WorkspaceComponentScaffolder(Scaffolder):
    """Writes the commented `defs.yaml` above."""

    def scaffold(self, request: ScaffoldRequest[Any]) -> None:
        if request.scaffold_format != "yaml":
            from dagster.components.component_scaffolding import scaffold_component

            scaffold_component(request, {})
            return
        path = request.target_path if request.append else request.target_path / "defs.yaml"
        text = DEFS_YAML.format(type_name=request.type_name)
        if request.append:
            text = "---\n" + text
        with open(path, "a" if request.append else "w", encoding="utf-8") as handle:
            handle.write(text)
