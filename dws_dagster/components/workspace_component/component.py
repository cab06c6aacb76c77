"""`dws_dagster.WorkspaceComponent`: a Data Workspace in a `dg` project, from one `defs.yaml`.

It adds what a Python `Definitions` wires by hand: the `WorkspaceResource` (`workspace`), the
PySpark resource (`pyspark`), the `SparkWorkspaceIOManager` (`io_manager`), the lineage sensor
and, if asked, the dws asset checks. The assets stay where the project defines them (plain
Python `@asset` functions anywhere in its defs folder): `assets` in the YAML binds them to
refs by key or by selection, and the IO manager stores every asset it is given.

Binding assets defined elsewhere: Dagster builds each component's definitions on its own and
merges them, so a component cannot change another's assets. This one reads the definitions
the rest of the project builds (each built once by Dagster's component tree), resolves the
YAML's selections against them to asset keys, and hands the bindings to the IO manager, the
sensor and the checks; the whole project is then checked as `check_definitions` checks a
Python `Definitions` (one writer per ref, known resources), when the code location loads.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetKey,
    AssetSelection,
    Component,
    ComponentLoadContext,
    DefaultSensorStatus,
    Definitions,
    scaffold_with,
)
from dagster_pyspark import PySparkResource
from pydantic import BaseModel

from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.binding_config import RefBinding
from dws_dagster.assets.definitions_check import check_definitions
from dws_dagster.assets.io_manager import SparkWorkspaceIOManager
from dws_dagster.assets.workspace_resource import WorkspaceResource
from dws_dagster.checks.asset_checks import CheckTarget, dws_asset_checks
from dws_dagster.components.workspace_component.scaffolder import WorkspaceComponentScaffolder
from dws_dagster.components.workspace_component.yaml_schema import (
    ComponentSettings,
    WorkspaceComponentModel,
    parse_attributes,
)
from dws_dagster.errors import ComponentConfigError, DwsError
from dws_dagster.sensor.lineage_sensor import lineage_sensor

#: The resource keys the component defines (the names a Python `Definitions` uses too).
WORKSPACE_KEY, PYSPARK_KEY, IO_MANAGER_KEY = "workspace", "pyspark", "io_manager"


@scaffold_with(WorkspaceComponentScaffolder)
class WorkspaceComponent(Component):
    """A Data Workspace for the project's Spark assets: the workspace and PySpark resources,
    the Spark IO manager that stores assets at workspace refs with their lineage, the lineage
    sensor (snapshots on results, OpenLineage) and the dws asset checks, from `defs.yaml`.

    Scaffold one with `dg scaffold defs dws_dagster.WorkspaceComponent lineage`; bind assets
    defined anywhere in the project to refs under `assets:` (by `key`, or by `select` with
    each asset at its key path below `ref`). Environment variables through Dagster's templates
    (`{{ env.DWS_WORKSPACE }}`); the store's URL by the name of the variable that holds it
    (`store_url: "{{ env.DWS_STORE_URL }}"`), never the URL itself.

    Examples:
        Scaffolded with `dg scaffold defs dws_dagster.WorkspaceComponent lineage`, then
        `defs/lineage/defs.yaml` says what to build:

        .. code-block:: yaml

            type: dws_dagster.WorkspaceComponent

            attributes:
              workspace:
                root: "{{ env('DWS_WORKSPACE', '.') }}"
                store_url: "{{ env.DWS_STORE_URL }}"  # the variable's name, never the URL
              io_manager:
                keep_versions: 3
              sensor:
                snapshot_on_results: true
              assets:
                - key: hourly_actuals
                  ref: intermediate-data/hourly_actuals
                - select: "group:staging"  # each at its key path below the ref
                  ref: intermediate-data/staging
              checks:
                severity: warning

        The project's assets stay plain Python over Spark DataFrames, with the `pyspark` resource
        the component adds:

        .. code-block:: python

            # defs/trips.py
            from dagster import asset
            from dagster_pyspark import PySparkResource
            from pyspark.sql import DataFrame

            @asset
            def hourly_actuals(pyspark: PySparkResource) -> DataFrame:
                trips = pyspark.spark_session.read.parquet("data/source/trips")
                return trips.groupBy("zone", "hour").count()
    """

    def __init__(self, settings: ComponentSettings) -> None:
        self.settings = settings

    @classmethod
    def get_model_cls(cls) -> type[BaseModel]:
        return WorkspaceComponentModel

    @classmethod
    def load(
        cls, attributes: BaseModel | None, context: ComponentLoadContext
    ) -> WorkspaceComponent:
        file = context.path / "defs.yaml" if context.path.is_dir() else context.path
        raw = attributes.model_dump(exclude_unset=True) if attributes is not None else {}
        return cls(parse_attributes(raw, file, context.resolution_context))

    # ---------------------------------------------------------------- definitions

    def resources(self, bindings: Sequence[RefBinding] = ()) -> dict[str, Any]:
        """The workspace, PySpark and IO manager resources, as YAML configures them."""
        s = self.settings
        workspace = WorkspaceResource(
            root=s.workspace["root"],
            search_parents=s.workspace["search_parents"],
            store_url_env=s.store_url_env,
        )
        pyspark = PySparkResource(spark_config=dict(s.spark_config))
        return {
            WORKSPACE_KEY: workspace,
            PYSPARK_KEY: pyspark,
            IO_MANAGER_KEY: SparkWorkspaceIOManager(
                workspace=workspace, pyspark=pyspark, bindings=list(bindings), **s.io_manager
            ),
        }

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        others = dagster_compat.other_component_definitions(
            context, skip=lambda kind: issubclass(kind, WorkspaceComponent)
        )
        project = Definitions.merge(*others) if others else Definitions()
        # The graph with this component's resources: the project's assets use them.
        graph = Definitions.merge(
            project, Definitions(resources=self.resources())
        ).resolve_asset_graph()
        bindings = self.bindings(graph)
        resources = self.resources(bindings)
        manager = resources[IO_MANAGER_KEY]
        s = self.settings
        sensors = []
        if s.sensor["enabled"]:
            sensors.append(
                lineage_sensor(
                    name=s.sensor["name"],
                    workspace_resource_key=WORKSPACE_KEY,
                    minimum_interval_seconds=s.sensor["minimum_interval_seconds"],
                    default_resource=s.io_manager["default_resource"],
                    snapshot_on_results=s.sensor["snapshot_on_results"],
                    openlineage=s.sensor["openlineage"],
                    default_status=DefaultSensorStatus.RUNNING
                    if s.sensor["running"]
                    else DefaultSensorStatus.STOPPED,
                    bindings=bindings,
                )
            )
        checks = self.checks(graph, manager) if s.checks is not None else []
        defs = Definitions(resources=resources, sensors=sensors, asset_checks=checks)
        try:
            check_definitions(Definitions.merge(project, defs))
        except DwsError as exc:
            raise type(exc)(f"{s.file}: {exc}") from None
        return defs

    def bindings(self, graph: Any) -> list[RefBinding]:
        """The YAML's `assets`, one binding per asset key: a selection gives each asset it
        selects its key path below the ref. A key the project does not define, a selection
        that selects nothing and an asset bound twice are refused, naming the file and key."""
        file = self.settings.file
        found: dict[str, tuple[str, RefBinding]] = {}
        known = graph.get_all_asset_keys()
        for entry in self.settings.assets:
            if entry.key is not None:
                key = AssetKey.from_user_string(entry.key)
                if key not in known:
                    raise ComponentConfigError(
                        f"{file}: {entry.where}.key: the project defines no asset "
                        f"'{entry.key}'{_known(known)}"
                    )
                pairs = [(key, entry.ref)]
            else:
                keys = _select(graph, entry.select or "", file, entry.where)
                pairs = [(key, f"{entry.ref}/{'/'.join(key.path)}") for key in keys]
            for key, ref in pairs:
                asset = key.to_user_string()
                if asset in found:
                    raise ComponentConfigError(
                        f"{file}: {entry.where}: asset '{asset}' is bound already, by "
                        f"{found[asset][0]}; bind each asset once"
                    )
                try:
                    binding = RefBinding(asset=asset, ref=ref, **entry.options)
                    binding.metadata()  # checked as dws_ref checks it
                except DwsError as exc:
                    raise ComponentConfigError(f"{file}: {entry.where}: {exc}") from None
                found[asset] = (entry.where, binding)
        return [binding for _, binding in found.values()]

    def checks(self, graph: Any, manager: SparkWorkspaceIOManager) -> list[Any]:
        """The dws asset checks of the bound assets `checks.select` selects: every
        materializable asset the component's IO manager stores."""
        options = self.settings.checks or {}
        selected = _select(
            graph, options["select"], self.settings.file, "attributes.checks", allow_empty=True
        )
        targets = []
        for key in sorted(selected, key=lambda k: tuple(k.path)):
            node = graph.get(key)
            if node.io_manager_key != IO_MANAGER_KEY or not node.is_materializable:
                continue
            targets.append(CheckTarget(key, node.metadata or {}, node.partitions_def))
        return list(
            dws_asset_checks(
                targets,
                severity=options["severity"],
                full=options["full"],
                checks=options["checks"],
                workspace_resource_key=WORKSPACE_KEY,
                default_resource=manager.default_resource,
                default_format=manager.format,
                bindings=manager.bindings,
            )
        )


def _select(
    graph: Any, text: str, file: Any, where: str, *, allow_empty: bool = False
) -> Sequence[AssetKey]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            keys = AssetSelection.from_string(text).resolve(graph)
    except Exception as exc:  # Dagster's parse and resolve errors have no common class
        raise ComponentConfigError(f"{file}: {where}.select: {text!r}: {exc}") from None
    if not keys and not allow_empty:
        raise ComponentConfigError(
            f"{file}: {where}.select: {text!r} selects no asset of the project"
        )
    return sorted(keys, key=lambda k: tuple(k.path))


def _known(known: Any) -> str:
    names = sorted(key.to_user_string() for key in known)
    if not names:
        return " (it defines none)"
    shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
    return f" (it defines {shown})"
