"""The script/notebook lineage API: a real workspace, real files, real processes."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dws_dagster import (
    InvalidParameterError,
    LineageApiError,
    LineageBuilder,
    LineageConflictError,
    LineageConsistencyError,
    ResourceRef,
    UnknownRefStateError,
    UnknownResourceError,
    Workspace,
)
from dws_dagster.lineage_api.steps import ResultsLineage
from dws_dagster.workspace.versions import effective_version, short
from tests.conftest import run_python, run_step, tree_state, write
from tests.support.store_db import workspace_state


def builder(ws: Workspace, name: str, params: dict | None = None) -> LineageBuilder:
    return (
        LineageBuilder()
        .with_step_name(name)
        .with_parameters(params or {})
        .with_workspace_directory(ws.root)
    )


def pipeline(ws: Workspace, source_text: str = "a,b\n1,2\n") -> None:
    """src/trips.csv -> prep (inter/prep) -> train (results/exp), train also reads the source."""
    write(ws.root / "data/src/trips.csv", source_text)
    run_step(
        ws, "prep", ["src/trips.csv"], {"inter/prep": source_text.upper()}, parameters={"scale": 2}
    )
    run_step(
        ws,
        "train",
        ["inter/prep", "src/trips.csv"],
        {},
        parameters={"gamma": 0.1},
        results={"mae": 1.5},
        results_dir="results/exp",
    )


def test_dag_source_intermediate_results_records_versions(ws: Workspace) -> None:
    pipeline(ws)
    store = ws.store
    source = store.get("src/trips.csv")
    prep = store.get("inter/prep")
    results = store.get("results/exp")
    assert source is not None and prep is not None and results is not None
    assert source.status == "source"
    assert source.version == ws.version_of("src/trips.csv")
    assert prep.status == "ok" and prep.owner == "prep"
    assert prep.version == ws.version_of("inter/prep")
    assert prep.record["inputs"] == [{"ref": "src/trips.csv", "version": source.version}]
    assert prep.record["parameters"] == {"scale": 2}
    assert results.record["inputs"] == sorted(
        [
            {"ref": "inter/prep", "version": prep.version},
            {"ref": "src/trips.csv", "version": source.version},
        ],
        key=lambda i: i["ref"],
    )
    assert results.record["provenance"] == {
        "inter/prep": prep.version,
        "src/trips.csv": source.version,
    }
    assert results.record["metrics"] == {"mae": 1.5}
    assert results.version == ws.version_of("results/exp")

    written = json.loads((ws.root / "results/exp/results.json").read_text())
    assert set(written) == {
        "step",
        "start_time",
        "execution_time_seconds",
        "parameters",
        "run_description",
        "metrics",
        "version_leaves_out",
    }
    assert written["version_leaves_out"] == ["start_time", "execution_time_seconds"]
    assert written["step"] == "train" and written["metrics"] == {"mae": 1.5}
    assert written["parameters"] == {"gamma": 0.1}
    assert written["execution_time_seconds"] >= 0


def test_lineage_survives_reload_from_disk(ws: Workspace) -> None:
    pipeline(ws)
    before = {ref: (s.version, s.status, s.owner) for ref, s in ws.store.items()}
    reopened = Workspace.open(ws.root)
    after = {ref: (s.version, s.status, s.owner) for ref, s in reopened.store.items()}
    assert after == before and len(after) == 3


def test_rerun_with_same_data_is_idempotent(ws: Workspace) -> None:
    pipeline(ws)
    version = ws.store.get("inter/prep").version
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A,B\n1,2\n"}, {"scale": 2})
    assert ws.store.get("inter/prep").version == version


@pytest.mark.parametrize("claimed", ["inter/prep", "inter/prep/part", "inter"])
def test_rule_a_conflicting_output_refused_before_body(ws: Workspace, claimed: str) -> None:
    pipeline(ws)
    before = workspace_state(ws)
    ran = []
    with pytest.raises(LineageConflictError) as info:
        lineage = builder(ws, "other").with_no_inputs().with_output_ref(claimed).eval()
        with lineage:
            ran.append(True)
    assert not ran, "the step body ran although its output conflicts"
    message = str(info.value)
    assert "'other'" in message and "'prep'" in message and "inter/prep" in message
    assert "forget" in message
    assert workspace_state(ws) == before


def test_rule_a_refused_when_output_added_in_body_before_writing(ws: Workspace) -> None:
    pipeline(ws)
    written = []
    with (
        pytest.raises(LineageConflictError),
        builder(ws, "other").with_no_inputs().eval() as lineage,
    ):
        lineage.add_output_ref("inter/prep")
        written.append(True)
    assert not written
    assert ws.store.get("inter/prep").owner == "prep"


def test_rule_a_other_steps_and_siblings_allowed(ws: Workspace) -> None:
    pipeline(ws)
    run_step(ws, "other", [], {"inter/prep2": "x"})  # bar/b does not cover bar/baz
    assert ws.store.get("inter/prep2").owner == "other"


def test_forget_hands_a_ref_to_another_step(ws: Workspace) -> None:
    pipeline(ws)
    assert ws.store.forget("inter/prep")
    run_step(ws, "prep_v2", ["src/trips.csv"], {"inter/prep": "new"})
    assert ws.store.get("inter/prep").owner == "prep_v2"


def test_rule_b_stale_read_refused_before_body(ws: Workspace) -> None:
    pipeline(ws)
    old_source = ws.store.get("src/trips.csv").version
    write(ws.root / "data/src/trips.csv", "a,b\n9,9\n")  # new source version
    new_source = ws.version_of("src/trips.csv")
    before = workspace_state(ws)
    ran = []
    with pytest.raises(LineageConsistencyError) as info:
        with (
            builder(ws, "report")
            .with_input_ref("inter/prep")
            .with_input_ref("src/trips.csv")
            .with_output_ref("inter/report")
            .eval()
        ):
            ran.append(True)
    assert not ran
    message = str(info.value)
    assert "src/trips.csv" in message and "'report'" in message
    assert short(old_source) in message and short(new_source) in message
    assert "'prep'" in message, "the message must say which step to re-run"
    assert workspace_state(ws) == before

    # Following the advice fixes it.
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "A,B\n9,9\n"})
    run_step(ws, "report", ["inter/prep", "src/trips.csv"], {"inter/report": "ok"})
    assert ws.store.get("inter/report").record["provenance"]["src/trips.csv"] == new_source


def test_rule_b_transitive_names_steps_in_order(ws: Workspace) -> None:
    write(ws.root / "data/src/s.csv", "1")
    run_step(ws, "a", ["src/s.csv"], {"inter/a": "a1"})
    run_step(ws, "b", ["inter/a"], {"inter/b": "b1"})
    write(ws.root / "data/src/s.csv", "2")
    run_step(ws, "a", ["src/s.csv"], {"inter/a": "a2"})
    with pytest.raises(LineageConsistencyError) as info:
        builder(ws, "c").with_input_ref("inter/b").with_input_ref("inter/a").eval()
    message = str(info.value)
    # inter/b carries the old inter/a (and the old src/s.csv): re-run b, then c.
    assert "'b'" in message and "'c'" in message


def test_failure_with_partial_output_marks_unknown_and_blocks_readers(ws: Workspace) -> None:
    pipeline(ws)
    good = ws.store.get("inter/prep").version
    with (
        pytest.raises(RuntimeError, match="disk on fire"),
        builder(ws, "prep").with_input_ref("src/trips.csv").eval() as lineage,
    ):
        lineage.add_output_ref("inter/prep")
        write(ws.local_path("inter/prep") / "part-0.csv", "HALF")
        raise RuntimeError("disk on fire")
    state = ws.store.get("inter/prep")
    assert state.status == "unknown"
    assert state.version == good, "the last good record is kept"
    assert state.attempt["status"] == "failed"
    assert "disk on fire" in state.attempt["error"]

    ran = []
    with pytest.raises(UnknownRefStateError) as info:
        with builder(ws, "train2").with_input_ref("inter/prep").eval():
            ran.append(True)
    assert not ran
    assert "'prep'" in str(info.value) and "inter/prep" in str(info.value)

    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "fixed"})
    assert ws.store.get("inter/prep").status == "ok"
    run_step(ws, "train2", ["inter/prep"], {"inter/train2": "ok"})


def test_failure_without_touching_output_keeps_it_readable(ws: Workspace) -> None:
    pipeline(ws)
    good = ws.store.get("inter/prep").version
    with (
        pytest.raises(ValueError, match="bad config"),
        builder(ws, "prep").with_input_ref("src/trips.csv").eval() as lineage,
    ):
        lineage.add_output_ref("inter/prep")
        raise ValueError("bad config")
    state = ws.store.get("inter/prep")
    assert state.status == "failed" and state.version == good
    run_step(ws, "reader", ["inter/prep"], {"inter/reader": "fine"})


def test_data_changed_outside_lineage_is_detected_not_reused(ws: Workspace) -> None:
    pipeline(ws)
    recorded = ws.store.get("inter/prep").version
    write(ws.local_path("inter/prep") / "part-0.csv", "edited by hand")
    with (
        pytest.warns(UserWarning, match="changed outside any recorded step"),
        builder(ws, "reader").with_input_ref("inter/prep").eval() as lineage,
    ):
        lineage.add_output_ref("inter/reader")
        write(ws.local_path("inter/reader") / "x", "1")
    record = ws.store.get("inter/reader").record
    assert record["inputs"][0]["version"] == ws.version_of("inter/prep") != recorded


def test_secrets_never_reach_the_store(ws: Workspace) -> None:
    write(ws.root / "data/src/s.csv", "1")
    params = {
        "db_password": "hunter2",
        "nested": {"apiKey": "k-123456"},
        "uri": "s3a://AKIAXYZ:s3cr3t@bucket/path",
        "threshold": 3,
    }
    run_step(ws, "secretive", ["src/s.csv"], {"inter/s": "x"}, parameters=params)
    record = ws.store.get("inter/s").record
    assert record["parameters"]["db_password"] == "***REDACTED***"
    assert record["parameters"]["nested"]["apiKey"] == "***REDACTED***"
    assert record["parameters"]["uri"] == "s3a://bucket/path"
    assert record["parameters"]["threshold"] == 3
    blob = b"".join(p.read_bytes() for p in (ws.root / ".dataworkspace").rglob("*") if p.is_file())
    for secret in (b"hunter2", b"k-123456", b"s3cr3t", b"AKIAXYZ"):
        assert secret not in blob


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"model": object()}, "parameter 'model' is a builtins.object"),
        ({"blob": "x" * 70_000}, "'blob' is"),
        ({"a": {1j: 2}}, "key of type complex"),
    ],
)
def test_bad_parameters_refused_and_nothing_written(
    ws: Workspace, params: dict, fragment: str
) -> None:
    write(ws.root / "data/src/s.csv", "1")
    before = workspace_state(ws)
    with pytest.raises(InvalidParameterError) as info:
        builder(ws, "p", params).with_input_ref("src/s.csv").eval()
    assert fragment in str(info.value)
    assert workspace_state(ws) == before


def test_add_param_during_body(ws: Workspace) -> None:
    with builder(ws, "p").with_no_inputs().eval() as lineage:
        lineage.add_output_ref("inter/p")
        lineage.add_param("epochs", 3)
        lineage.add_param("token", "abc")
        write(ws.local_path("inter/p") / "x", "1")
    assert ws.store.get("inter/p").record["parameters"] == {"epochs": 3, "token": "***REDACTED***"}


@pytest.mark.parametrize(
    "make",
    [
        lambda ws: (
            LineageBuilder().with_parameters({}).with_no_inputs().with_workspace_directory(ws.root)
        ),
        lambda ws: (
            LineageBuilder().with_step_name("s").with_no_inputs().with_workspace_directory(ws.root)
        ),
        lambda ws: (
            LineageBuilder()
            .with_step_name("s")
            .with_parameters({})
            .with_workspace_directory(ws.root)
        ),
    ],
)
def test_builder_requires_name_parameters_and_inputs(ws: Workspace, make) -> None:
    with pytest.raises(LineageApiError, match="needs"):
        make(ws).eval()


def test_builder_rejects_inputs_with_no_inputs_and_double_settings(ws: Workspace) -> None:
    with pytest.raises(LineageApiError):
        LineageBuilder().with_no_inputs().with_input_path("x")
    with pytest.raises(LineageApiError):
        LineageBuilder().with_input_ref("src/x").with_no_inputs()
    with pytest.raises(LineageApiError):
        LineageBuilder().with_step_name("a").with_step_name("b")
    with pytest.raises(LineageApiError):
        LineageBuilder().with_parameters({}).with_parameters({})
    with pytest.raises(LineageApiError):
        LineageBuilder().as_results_step("r").as_results_step("r")


def test_input_outside_resources_and_unknown_resource(ws: Workspace, tmp_path: Path) -> None:
    stray = write(tmp_path / "elsewhere.csv", "1")
    with pytest.raises(UnknownResourceError, match="not inside any local resource"):
        builder(ws, "s").with_input_path(stray).eval()
    with pytest.raises(UnknownResourceError, match="unknown resource 'nope'"):
        builder(ws, "s").with_input_ref(ResourceRef("nope", "x")).eval()


def test_complete_twice_warns_and_records_once(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    lineage = builder(ws, "once").with_no_inputs().eval()
    lineage.add_output_ref("inter/once")
    write(ws.local_path("inter/once") / "x", "1")
    lineage.complete()
    lines = sum(1 for _ in ws.store.history())
    lineage.complete()
    assert "called after complete()" in capsys.readouterr().err
    assert sum(1 for _ in ws.store.history()) == lines


def test_an_output_added_again_or_inside_another_is_kept_once(ws: Workspace) -> None:
    """Outputs are merged with the inclusive test (`covers_or_equals`): the same ref, however
    spelled, or one inside an output already there, adds nothing; an enclosing ref replaces
    the outputs inside it."""
    lineage = builder(ws, "merge").with_no_inputs().eval()
    lineage.add_output_ref("inter/m/a")
    lineage.add_output_ref("inter/m/a/")
    lineage.add_output_ref(ResourceRef("inter", "./m//a"))
    assert lineage.outputs == [ResourceRef("inter", "m/a")]
    lineage.add_output_ref("inter/m/a/deeper")
    assert lineage.outputs == [ResourceRef("inter", "m/a")]
    lineage.add_output_ref("inter/m/b")
    lineage.add_output_ref("inter/m")
    assert lineage.outputs == [ResourceRef("inter", "m")]
    lineage.abort()


def test_dataworkspaces_script_runs_with_only_its_import_changed(ws: Workspace) -> None:
    """A script in Data Workspaces style, as a real process, using as_script_step()."""
    write(ws.root / "data/src/raw.csv", "x\n1\n")
    script = write(
        ws.root / "code/prepare.py",
        """
import argparse, os
from dws_dagster.lineage import (LineageBuilder, CmdLineParameter, BooleanParameter,
    add_lineage_parameters_to_arg_parser, get_lineage_parameter_values)

PARAMS = [CmdLineParameter('gamma', 0.01, float, 'regularisation'),
          BooleanParameter('shuffle', True, 'shuffle rows')]
parser = argparse.ArgumentParser()
add_lineage_parameters_to_arg_parser(parser, PARAMS)
parser.add_argument('input_dir')
parser.add_argument('results_dir')
args = parser.parse_args()
builder = LineageBuilder().as_script_step() \\
    .with_parameters(get_lineage_parameter_values(PARAMS, args)) \\
    .with_input_path(args.input_dir).as_results_step(args.results_dir, 'first try')
with builder.eval() as lineage:
    lineage.write_results({'accuracy': 0.9})
""",
    )
    result = run_python(
        "import runpy, sys; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')",
        ws.root,
        str(script),
        "--gamma",
        "0.5",
        "--no-shuffle",
        "data/src/raw.csv",
        "results/prep_run",
    )
    assert result.returncode == 0, result.stderr
    state = Workspace.open(ws.root).store.get("results/prep_run")
    assert state is not None and state.owner == "prepare"
    record = state.record
    assert record["parameters"] == {"gamma": 0.5, "shuffle": False}
    assert record["step"]["code"] == [
        {"ref": "code/prepare.py", "version": ws.version_of("code/prepare.py")}
    ]
    assert record["step"]["command_line"][-2:] == ["data/src/raw.csv", "results/prep_run"]
    results = json.loads((ws.root / "results/prep_run/results.json").read_text())
    assert results["run_description"] == "first try"
    assert results["metrics"] == {"accuracy": 0.9}


def test_exception_in_body_propagates_and_records_failure(ws: Workspace) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), builder(ws, "boom").with_no_inputs().eval() as lineage:
        lineage.add_output_ref("inter/boom")
        raise Boom("x")
    state = ws.store.get("inter/boom")
    assert state.status == "failed" and state.record is None
    assert "Boom" in state.attempt["error"]


def ops_of(ws: Workspace) -> list[str]:
    return [op["op"] for op in Workspace.open(ws.root).store.history()]


def test_steps_in_one_process_see_other_processes_and_append_only_their_record(
    ws: Workspace,
) -> None:
    """The store a process keeps between steps reads what other processes appended since, and
    a re-run that reads unchanged sources and writes refs it already owns appends one record."""
    pipeline(ws)
    before = ops_of(ws)
    run_step(ws, "prep", ["src/trips.csv"], {"inter/prep": "changed"}, {"scale": 3})
    assert ops_of(ws)[len(before) :] == ["record"]

    other = run_python(
        "import sys; from dws_dagster.lineage import LineageBuilder\n"
        "from pathlib import Path\n"
        "with LineageBuilder().with_step_name('other').with_parameters({})"
        ".with_workspace_directory(sys.argv[1]).with_input_path('data/src/trips.csv')"
        ".eval() as lineage:\n"
        "    lineage.add_output_path('data/inter/other')\n"
        "    Path('data/inter/other').mkdir()\n"
        "    Path('data/inter/other/part-0.csv').write_text('from another process')\n",
        ws.root,
        str(ws.root),
    )
    assert other.returncode == 0, other.stderr
    written = Workspace.open(ws.root).store.get("inter/other")
    assert written is not None and written.owner == "other"

    run_step(ws, "reader", ["inter/other"], {"inter/reader": "x"})
    record = ws.store.get("inter/reader").record
    assert record["inputs"] == [{"ref": "inter/other", "version": written.version}]
    assert record["provenance"]["src/trips.csv"] == ws.store.get("src/trips.csv").version
    with pytest.raises(LineageConflictError, match="'other'"):
        run_step(ws, "thief", [], {"inter/other/part": "x"})


def test_workspace_created_again_at_the_same_place_starts_from_its_own_lineage(
    ws: Workspace,
) -> None:
    pipeline(ws)
    root = ws.root
    shutil.rmtree(root / ".dataworkspace")
    again = Workspace.init(root)
    for name, role, path in (
        ("src", "source-data", "data/src"),
        ("inter", "intermediate-data", "data/inter"),
    ):
        again.add_resource(name, role, path=path)
    run_step(again, "prep_v2", ["src/trips.csv"], {"inter/prep": "new"})
    state = Workspace.open(root).store.get("inter/prep")
    assert state.owner == "prep_v2"
    assert [ref for ref, _ in Workspace.open(root).store.items()] == ["inter/prep", "src/trips.csv"]


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    runs=st.lists(
        st.tuples(
            st.datetimes(
                min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1),
                timezones=st.just(dt.UTC),
            ),
            st.sampled_from([0.5, 1.5, 2]),
        ),
        min_size=2, max_size=3,
    )
)  # fmt: skip
def test_a_results_version_says_what_the_step_wrote_not_when(ws: Workspace, runs) -> None:
    """results.json keeps Data Workspaces' layout, its run's start time and duration included;
    it says that the version of the results ref leaves those two out, and it does: runs at any
    time writing the same metrics have one version, other metrics another; a snapshot versions
    it the same way."""
    from dws_dagster.snapshots.file_hashes import FileHashCache
    from dws_dagster.snapshots.retention import scan

    seen: dict[float, str] = {}
    for started, mae in runs:
        with ResultsLineage(
            "train", started, {"gamma": 0.1}, [], ws.root / "results/exp", ws.root
        ) as lineage:
            lineage.write_results({"mae": mae})
        written = json.loads((ws.root / "results/exp/results.json").read_text())
        assert dt.datetime.fromisoformat(written["start_time"]) == started
        assert written["execution_time_seconds"] == pytest.approx(
            (dt.datetime.now(dt.UTC) - started).total_seconds(), abs=60
        )
        version = ws.version_of("results/exp")
        assert ws.store.get("results/exp").version == version
        assert scan(ws, "results/exp", FileHashCache(None)).version == version
        assert seen.setdefault(mae, version) == version
        # Without that key (as earlier releases wrote it) the file counts by its bytes: the
        # versions they recorded still match.
        del written["version_leaves_out"]
        (ws.root / "results/exp/results.json").write_text(json.dumps(written))
        assert ws.version_of("results/exp") == effective_version(ws.root / "results/exp")
    assert len(set(seen.values())) == len(seen)


def test_in_a_replay_the_replayed_workspace_is_never_written(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step a replay runs (DWS_REPLAY_WORKSPACE names the scratch workspace) that opens the
    workspace replayed, by its folder or absolute paths into it, writes the scratch one; a
    third workspace is refused; the variable naming what is not a replay is refused."""
    from dws_dagster.errors import ReplayEnvironmentError
    from dws_dagster.replay.env import REPLAY_WORKSPACE_ENV

    write(ws.root / "data/src/trips.csv", "a\n1\n")
    scratch = Workspace.init(
        tmp_path / "scratch", replay_of={"snapshot": "0" * 32, "root": str(ws.root)}
    )
    for name, resource in ws.resources.items():
        scratch.add_resource(name, resource.role, path=resource.path)
    write(scratch.root / "data/src/trips.csv", "a\n1\n")
    before = tree_state(ws.root)
    monkeypatch.setenv(REPLAY_WORKSPACE_ENV, str(scratch.root))

    with (
        builder(ws, "train")
        .with_input_paths([ws.root / "data/src/trips.csv"])
        .as_results_step(ws.root / "results/exp")
        .eval() as lineage
    ):
        assert lineage.workspace.root == scratch.root
        lineage.add_output_path(ws.root / "data/inter/model")
        write(lineage.workspace.local_path("inter/model") / "m.txt", "1\n")
        lineage.write_results({"mae": 1.0})

    assert tree_state(ws.root) == before
    assert (scratch.root / "results/exp/results.json").is_file()
    assert Workspace.open(scratch.root).store.get("inter/model").version is not None
    other = Workspace.init(tmp_path / "other")
    with pytest.raises(ReplayEnvironmentError, match="a replay writes only into its scratch"):
        builder(other, "x").with_no_inputs().eval()
    monkeypatch.setenv(REPLAY_WORKSPACE_ENV, str(other.root))
    with pytest.raises(ReplayEnvironmentError, match="is not a replay's scratch workspace"):
        builder(ws, "x").with_no_inputs().eval()
    assert tree_state(ws.root) == before
