"""The `Examples:` sections of the public API, run: each example's Python, in a workspace laid
out as the examples assume (resources `source-data`, `intermediate-data`, `results`, `code`;
CSV files at `source-data/trips`), after the state it starts from (a step that wrote a ref,
a conflict, a failed step, ...); its YAML through the component's own checks; the
`dws-dagster` commands of its console blocks, whose error lines must be the ones shown.

Each case checks what the example claims: an example catching an error must have met it (its
`print` of the message is looked for), one building definitions must build and pass
`check_definitions`. Examples that run an asset's Spark code use the session's Spark.
Not run: the RangeWriteError example (it continues one about a range asset) and the console
example of RetentionError (a file changing while a snapshot copies it;
tests/snapshots/test_snapshots.py makes that happen).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.cli.main import main as cli_main
from dws_dagster.store.database import forget_databases
from tests.conftest import run_step, write
from tests.support.docstring_examples import blocks_of, console_steps, public_names, shown_pattern

RESOURCES = [
    ("source-data", "source-data", "data/source"),
    ("intermediate-data", "intermediate-data", "data/intermediate"),
    ("results", "results", "results"),
    ("code", "code", "code"),
]


@dataclass
class Place:
    """Where an example runs: the folder (its current directory) and the workspace there."""

    here: Path
    ws: Workspace | None
    monkeypatch: pytest.MonkeyPatch

    @property
    def workspace(self) -> Workspace:
        assert self.ws is not None
        return self.ws


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    """The example workspace, the current directory; a Dagster home and a home folder of its
    own (no OpenLineage configuration from the machine: events go to the workspace's file)."""
    for name in list(os.environ):
        if name.startswith(("OPENLINEAGE", "DWS_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    dagster_home = tmp_path / "dagster_home"
    write(dagster_home / "dagster.yaml", "telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    ws = Workspace.init(tmp_path / "ws")
    for name, role, path in RESOURCES:
        ws.add_resource(name, role, path=path)
    write(ws.root / "data/source/trips/part-0.csv", "zone,hour,day\n1,0,2024-01-01\n")
    monkeypatch.chdir(ws.root)
    yield Place(ws.root, ws, monkeypatch)
    forget_databases()


def _empty(place: Place) -> None:
    """No workspace: an empty folder."""
    folder = place.here.parent / "empty"
    folder.mkdir()
    place.monkeypatch.chdir(folder)
    place.here, place.ws = folder, None


def _clean(place: Place) -> None:
    """Step 'clean' wrote intermediate-data/clean from the trips."""
    run_step(
        place.workspace,
        "clean",
        ["source-data/trips"],
        {"intermediate-data/clean": "zone,trips\n1,12\n"},
        {"min_trips": 10},
    )


def _taken(place: Place) -> None:
    """Step 'prep' writes intermediate-data/clean: step 'clean' may not."""
    run_step(place.workspace, "prep", [], {"intermediate-data/clean": "a\n"})


def _mixed(place: Place) -> None:
    """'features' read prep's first version; prep then wrote a second."""
    ws = place.workspace
    run_step(ws, "prep", ["source-data/trips"], {"intermediate-data/prep": "v1\n"})
    run_step(ws, "features", ["intermediate-data/prep"], {"intermediate-data/features": "f\n"})
    run_step(ws, "prep", ["source-data/trips"], {"intermediate-data/prep": "v2\n"})


def _failed(place: Place) -> None:
    """'prep' failed after writing part of its output: the ref is unknown."""
    ws = place.workspace
    run_step(ws, "prep", ["source-data/trips"], {"intermediate-data/prep": "v1\n"})
    builder = (
        LineageBuilder()
        .with_step_name("prep")
        .with_parameters({})
        .with_input_ref("source-data/trips")
        .with_output_ref("intermediate-data/prep")
    )
    with pytest.raises(RuntimeError), builder.eval():
        write(ws.local_path("intermediate-data/prep") / "part-0.csv", "partial")
        raise RuntimeError("killed half-way")
    assert ws.store.get("intermediate-data/prep").status == "unknown"


def _script(place: Place) -> None:
    """Run as `python code/train.py`, after 'clean'."""
    _clean(place)
    script = write(place.here / "code/train.py", "print('training')\n")
    place.monkeypatch.setattr(sys, "argv", [str(script)])


def _pipe(place: Place) -> None:
    os.mkfifo(place.here / "data/source/trips/incoming.pipe")


def _replaying(place: Place) -> None:
    """A process a replay started: its scratch workspace in the environment; another
    workspace beside this one."""
    Workspace.init(place.here.parent / "another-workspace")
    scratch = Workspace.init(
        place.here.parent / "scratch", replay_of={"snapshot": "0" * 32, "root": str(place.here)}
    )
    place.monkeypatch.setenv("DWS_REPLAY_WORKSPACE", str(scratch.root))


def _missing_ol_config(place: Place) -> None:
    place.monkeypatch.setenv("OPENLINEAGE_CONFIG", str(place.here.parent / "openlineage.yml"))


def _store_down(place: Place) -> None:
    place.monkeypatch.setenv("DWS_STORE_URL", "postgresql://dws@127.0.0.1:1/lineage")


def _argv(name: str) -> Callable[[Place], None]:
    def setup(place: Place) -> None:
        place.monkeypatch.setattr(sys, "argv", [name])

    return setup


# ------------------------------------------------------------------------------- checks


def _printed(*fragments: str) -> Callable[[Place, dict[str, Any], str], None]:
    def check(place: Place, ns: dict[str, Any], out: str) -> None:
        for fragment in fragments:
            assert fragment in out, (fragment, out)

    return check


def _failed_with(error: str) -> Callable[[Place, dict[str, Any], str], None]:
    def check(place: Place, ns: dict[str, Any], out: str) -> None:
        result = ns["result"]
        assert not result.success
        (event,) = result.get_step_failure_events()
        info, texts = event.step_failure_data.error, []
        while info is not None:
            texts.append(f"{info.cls_name}: {info.message}")
            info = info.cause
        assert any(text.startswith(error) for text in texts), texts

    return check


def _checks(place: Place, ns: dict[str, Any], out: str) -> None:
    assert ns["defs"].resolve_asset_graph().asset_check_keys


def _ok(place: Place, ns: dict[str, Any], out: str) -> None:
    pass


def _results(path: str, metric: str) -> Callable[[Place, dict[str, Any], str], None]:
    def check(place: Place, ns: dict[str, Any], out: str) -> None:
        data = json.loads((place.here / path / "results.json").read_text())
        assert metric in data["metrics"], data
        assert place.workspace.store.get(path).status == "ok"

    return check


def _recorded(ref: str) -> Callable[[Place, dict[str, Any], str], None]:
    def check(place: Place, ns: dict[str, Any], out: str) -> None:
        state = place.workspace.store.get(ref)
        assert state is not None and state.status == "ok" and state.version, state

    return check


def _workspace_made(folder: str) -> Callable[[Place, dict[str, Any], str], None]:
    def check(place: Place, ns: dict[str, Any], out: str) -> None:
        assert (place.here / folder / ".dataworkspace" / "config.json").is_file()

    return check


def _report_runs(place: Place, ns: dict[str, Any], out: str) -> None:
    from dagster import materialize

    result = materialize([ns["report"]], resources=dict(ns["defs"].resources))
    assert result.success


def _skipped_pipe(place: Place, ns: dict[str, Any], out: str) -> None:
    assert ns["skipped"] and "incoming.pipe" in str(ns["skipped"][0].message)


def _lake(place: Place, ns: dict[str, Any], out: str) -> None:
    assert Workspace.open().resources["lake"].uri == "s3a://bucket/lake"


def _env_parameter(place: Place, ns: dict[str, Any], out: str) -> None:
    assert ns["batch"].get_value(None) == "512"


#: Per public name: the state its example starts from, and what must hold after it ran.
CASES: dict[str, tuple[Callable[[Place], None] | None, Callable[..., None]]] = {
    "Workspace": (_empty, _workspace_made("forecast")),
    "Resource": (None, _printed("raw source-data s3a://bucket/raw")),
    "ResourceRef": (None, _ok),
    "infer_step_name": (_argv("train.py"), _ok),
    "Lineage": (None, _recorded("intermediate-data/clean")),
    "ResultsLineage": (_clean, _results("results/ridge", "mae")),
    "LineageBuilder": (_script, _results("results/experiment-1", "accuracy")),
    "LineageRecord": (_clean, _printed("clean", "read source-data/trips@")),
    "CmdLineParameter": (None, _ok),
    "BooleanParameter": (None, _ok),
    "ChoiceParameter": (None, _ok),
    "ConstantParameter": (None, _ok),
    "LineageParameter": (None, _env_parameter),
    "add_lineage_parameters_to_arg_parser": (None, _ok),
    "get_lineage_parameter_values": (None, _ok),
    "DwsError": (_taken, _printed("refused: step 'clean' may not write")),
    "InvalidResourceRefError": (None, _printed("contains '..'")),
    "UnknownResourceError": (None, _printed("unknown resource 'nowhere'")),
    "WorkspaceNotFoundError": (_empty, _workspace_made(".")),
    "WorkspaceConfigError": (None, _printed("already exists")),
    "LineageConsistencyError": (_mixed, _printed("re-run, in this order, 'features'")),
    "LineageConflictError": (_clean, _printed("hand the ref over")),
    "UnknownRefStateError": (_failed, _printed("re-run 'prep' to rewrite")),
    "LineageApiError": (None, _printed("needs parameters (with_parameters())")),
    "InvalidParameterError": (None, _printed("parameter 'model' is a builtins.object")),
    "WorkspaceWriteError": (None, _printed("notes.txt")),
    "StoreUnavailableError": (_store_down, _printed("workspace store postgresql://dws@")),
    "StoreLockError": (None, _ok),
    "SpecialFileWarning": (_pipe, _skipped_pipe),
    "ReplayEnvironmentError": (_replaying, _printed("writes only into its scratch workspace")),
    "TransportConfigError": (_missing_ol_config, _printed("OPENLINEAGE_CONFIG names")),
    "process_events": (None, _printed("No new events.")),
    "ConnectUnsupportedError": (None, _lake),
    "SparkWorkspaceIOManager": (None, _ok),
    "WorkspaceResource": (None, _report_runs),
    "dws_ref": (None, _ok),
    "BindingError": (None, _printed("xlsx")),
    "RefBinding": (None, _ok),
    "check_definitions": (None, _ok),
    "dws_source_asset": (None, _ok),
    "dws_metrics": (None, _ok),
    "lineage_sensor": (None, _ok),
    "dws_asset_checks": (None, _checks),
    "with_dws_checks": (None, _checks),
    "CheckConfigError": (None, _printed("unknown check(s) 'freshness'")),
    "PartitionRangeError": (None, _ok),
    "RowsOutsideRangeError": (None, _ok),
    "SchemaDriftError": (None, _ok),
    "OutputTypeError": (None, _failed_with("OutputTypeError")),
    "WorkspaceComponent": (None, _ok),
}

#: Examples that start Spark (an asset's body, or the IO manager reading an input), on the
#: session's Spark.
WITH_SPARK = {
    "MissingPartitionError": (None, _failed_with("MissingPartitionError")),
    "StorageError": (None, _recorded("intermediate-data/zones")),
}


def _run_python(name: str, place: Place, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from dagster import AssetsDefinition, Definitions, SourceAsset
    from dagster_pyspark import PySparkResource

    from dws_dagster import SparkWorkspaceIOManager, WorkspaceResource, check_definitions

    codes = blocks_of(public_names()[name], "python")
    assert codes, name
    ns: dict[str, Any] = {"__name__": f"example_{name}"}
    capsys.readouterr()
    for code in codes:
        # (dont_inherit: not this module's `from __future__ import annotations`)
        exec(compile(code, f"<example of {name}>", "exec", dont_inherit=True), ns)
    # Whatever assets an example defines are bound to refs the example workspace has, and
    # none two to one ref; with the upstream assets examples take from the project (the
    # trips, as dws_source_asset's example lands them, and the hourly actuals made of them).
    assets = [v for v in ns.values() if isinstance(v, AssetsDefinition | SourceAsset)]
    if assets and place.ws is not None:
        assets += _upstream(assets)
        manager = SparkWorkspaceIOManager(workspace=WorkspaceResource(root=str(place.here)))
        resources = {
            "io_manager": manager,
            "workspace": WorkspaceResource(root=str(place.here)),
            "pyspark": PySparkResource(spark_config={}),
        }
        check_definitions(Definitions(assets=assets, resources=resources))
    # Definitions an example builds load as a code location would load them.
    if isinstance(ns.get("defs"), Definitions):
        Definitions.validate_loadable(ns["defs"])
    return ns


def _upstream(assets: list[Any]) -> list[Any]:
    from dagster import AssetKey, asset

    from dws_dagster import dws_ref, dws_source_asset

    keys = {key for a in assets for key in getattr(a, "keys", [getattr(a, "key", None)])}
    found = []
    if AssetKey("trips") not in keys:
        found.append(dws_source_asset("trips", "source-data", "trips", format="csv"))
    if AssetKey("hourly_actuals") not in keys:

        @asset(metadata=dws_ref("intermediate-data", "hourly_actuals"))
        def hourly_actuals(trips):  # type: ignore[no-untyped-def]
            return trips.groupBy("zone", "hour").count()

        found.append(hourly_actuals)
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_example_runs_and_does_what_it_says(
    name: str, place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    setup, check = CASES[name]
    if setup is not None:
        setup(place)
    ns = _run_python(name, place, capsys)
    check(place, ns, capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(WITH_SPARK))
def test_the_example_runs_its_spark_code(
    name: str, spark, place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    setup, check = WITH_SPARK[name]
    if setup is not None:
        setup(place)
    ns = _run_python(name, place, capsys)
    check(place, ns, capsys.readouterr().out)


def test_every_example_with_python_is_run_or_said_not_to_be() -> None:
    with_python = {name for name, obj in public_names().items() if blocks_of(obj, "python")}
    assert with_python - set(CASES) - set(WITH_SPARK) == {"RangeWriteError"}


# ------------------------------------------------------------------------------ YAML


def _attributes(text: str) -> Any:
    import yaml
    from dagster import ResolutionContext

    from dws_dagster.components.workspace_component.yaml_schema import parse_attributes

    document = yaml.safe_load(text)
    assert document["type"] == "dws_dagster.WorkspaceComponent"
    return parse_attributes(document["attributes"], Path("defs.yaml"), ResolutionContext.default())


def test_the_components_yaml_example_is_one_it_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DWS_STORE_URL", "postgresql://dws@db.internal:5432/lineage")
    (text,) = blocks_of(public_names()["WorkspaceComponent"], "yaml")
    settings = _attributes(text)
    assert settings.store_url_env == "DWS_STORE_URL"
    assert [a.ref for a in settings.assets] == [
        "intermediate-data/hourly_actuals",
        "intermediate-data/staging",
    ]


def test_the_refused_yaml_examples_are_refused() -> None:
    from dws_dagster import ComponentConfigError

    texts = blocks_of(public_names()["ComponentConfigError"], "yaml")
    assert len(texts) == 2
    for text, key in zip(texts, ["formt", "secret.key"], strict=True):
        with pytest.raises(ComponentConfigError, match="defs.yaml") as info:
            _attributes(text)
        assert key in str(info.value)


# --------------------------------------------------------------------------- console


def _snapshot_taken_then_changed(place: Place) -> None:
    assert cli_main(["snapshot", "v1"]) == 0
    write(place.here / "data/source/trips/part-1.csv", "zone,hour,day\n2,1,2024-01-02\n")


def _results_snapshot_and_a_full_folder(place: Place) -> None:
    run_step(
        place.workspace, "train", ["source-data/trips"], {}, results={"mae": 1.0},
        results_dir="results/exp",
    )  # fmt: skip
    assert cli_main(["snapshot", "v1"]) == 0
    write(Path(os.environ["HOME"]) / "scratch/notes.txt", "mine\n")


def _retained_data_lost(place: Place) -> None:
    """Snapshot v1, then new data from the step, then the retained copies deleted."""
    ws = place.workspace
    run_step(ws, "prep", ["source-data/trips"], {"intermediate-data/prep": "v1\n"})
    assert cli_main(["snapshot", "v1"]) == 0
    run_step(ws, "prep", ["source-data/trips"], {"intermediate-data/prep": "v2\n"})
    shutil.rmtree(ws.meta_dir / "objects")


#: Per public name with a console example that shows an error: the state it starts from.
CONSOLE: dict[str, Callable[[Place], None] | None] = {
    "SnapshotNotFoundError": None,
    "SnapshotError": _snapshot_taken_then_changed,
    "SnapshotRestoreError": _retained_data_lost,
    "NoLineageError": None,
    "OutboxError": None,
    "ReplayScratchError": _results_snapshot_and_a_full_folder,
}


@pytest.mark.parametrize("name", sorted(CONSOLE))
def test_the_console_example_shows_the_error_the_command_prints(
    name: str, place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = CONSOLE[name]
    if setup is not None:
        setup(place)
    (code,) = blocks_of(public_names()[name], "console")
    steps = [step for step in console_steps(code) if step.error is not None]
    assert len(steps) == 1, code
    (step,) = steps
    for key, value in step.env.items():
        place.monkeypatch.setenv(key, value)
    argv = [os.path.expanduser(arg) for arg in step.argv]
    capsys.readouterr()
    assert cli_main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert shown_pattern(step.error).fullmatch(err), (step.error, err)
