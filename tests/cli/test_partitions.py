"""Partitions in the command line's text: `lineage`, `diff` and `status` show the refs one step
wrote (or one source folder holds) as one line by default, `--expand` lists each, and JSON
keeps every ref. Real workspaces: script steps (LineageBuilder) and records applied as the
lineage sensor applies Dagster's (a partition key, source files read as found)."""

from __future__ import annotations

import json
import re
import shutil
import uuid

import pytest

from dws_dagster import Workspace
from dws_dagster.snapshots.diff import ChangeDetail, RefChange
from dws_dagster.views.diff_text import diff_text
from dws_dagster.views.grouping import group_refs, label_runs
from dws_dagster.views.status.summary import StatusReport
from dws_dagster.workspace.records import LineageRecord, StepInfo, now_iso
from tests.conftest import run_step, write

DAYS = [f"2024-01-{day:02d}" for day in range(1, 9)]


def daily(ws: Workspace, days: list[str], *, scale: int = 1) -> None:
    """Step `daily` writes one partition a day from that day's landed file (a script step, so
    the files are observed as source data)."""
    for day in days:
        write(ws.root / f"data/src/weather/{day}.csv", f"day,scale\n{day},{scale}\n")
        run_step(
            ws,
            "daily",
            [f"src/weather/{day}.csv"],
            {f"inter/daily/{day}": f"{day} x{scale}\n"},
            {"scale": scale},
        )


def forecast(ws: Workspace, days: list[str]) -> None:
    run_step(
        ws,
        "forecast",
        [f"inter/daily/{day}" for day in days],
        {"inter/forecast": f"forecast of {len(days)} days\n"},
    )


@pytest.fixture
def daily_ws(ws: Workspace) -> Workspace:
    daily(ws, DAYS)
    forecast(ws, DAYS)
    return ws


def section(text: str, heading: str) -> list[str]:
    lines = text.split(f"{heading}\n", 1)[1].split("\n\n", 1)[0]
    return lines.splitlines()


# ------------------------------------------------------------------------ grouping rules


def test_groups_follow_the_step_that_wrote_the_refs_not_their_names() -> None:
    groups = group_refs(
        [
            *((f"inter/w/{day}", "w") for day in DAYS),  # a step's partitions
            ("inter/m/2024/01/05", "m"),
            ("inter/m/2024/02/01", "m"),  # a deeper template
            ("src/raw/a.csv", None),
            ("src/raw/b.csv", None),  # landed files
            ("inter/w_other/2024-01-01", "other"),  # another step beside: its own
            ("inter/x", "s"),
            ("results/y", "s"),  # one step, two resources: per folder
            ("src", None),  # a whole resource: never grouped
        ]
    )
    weather = groups[("inter/w/2024-01-03", "w")]
    assert (weather.root, weather.step, len(weather), weather.noun) == (
        "inter/w",
        "w",
        8,
        "partitions",
    )
    assert weather.title() == "inter/w (8 partitions 2024-01-01 … 2024-01-08)"
    assert groups[("inter/m/2024/02/01", "m")].labels == ("01/05", "02/01")
    files = groups[("src/raw/b.csv", None)]
    assert files.title() == "src/raw (2 files a.csv, b.csv)"
    assert len(groups[("inter/w_other/2024-01-01", "other")]) == 1
    assert len(groups[("inter/x", "s")]) == len(groups[("results/y", "s")]) == 1
    assert len(groups[("src", None)]) == 1
    picked = [
        f"inter/w/{day}"
        for day in ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-05", "2024-01-08")
    ]
    assert (
        weather.selection(picked, "changed")
        == "inter/w: 5 of 8 partitions changed: 2024-01-01 … 2024-01-03, 2024-01-05, 2024-01-08"
    )
    assert (
        label_runs(list(range(0, 20, 2)), [str(i) for i in range(20)], limit=3)
        == "0, 2, and 8 more"
    )


def test_diff_text_names_inputs_with_and_without_lineage_apart() -> None:
    """Inputs of one folder, some observed (in the lineage) and some only read: each kind is
    named within its own group, never as members of the other."""

    def moved(ref: str) -> ChangeDetail:
        return ChangeDetail(f"input {ref} a -> b", "input", ref, "a" * 32, "b" * 32)

    change = RefChange("inter/x", "changed")
    change.details[:] = [
        moved(ref) for ref in ("src/w/a.csv", "src/w/b.csv", "src/w/c.csv", "src/w/d.csv")
    ]
    change.changes[:] = [detail.text for detail in change.details]
    owners = [("inter/x", "s"), ("src/w/a.csv", None), ("src/w/b.csv", None), ("src/w/z.csv", None)]
    assert diff_text([change], owners, owners) == [
        "changed  inter/x",
        "           inputs src/w: 2 of 3 files changed: a.csv, b.csv",
        "           inputs src/w: 2 files changed: c.csv, d.csv",
    ]


# ------------------------------------------------------------------------------ lineage


def test_lineage_groups_partitions_by_default_and_expand_lists_each(
    daily_ws: Workspace, cli
) -> None:
    ws = daily_ws
    code, out, err = cli("lineage", "inter/forecast", "-w", ws.root)
    assert code == 0, err
    version = ws.store.get("inter/forecast").version
    assert section(out, "Upstream") == [
        f"  inter/forecast@{version[:12]}  <- forecast  [ok]",
        "  └── inter/daily (8 partitions 2024-01-01 … 2024-01-08)  <- daily  [all ok]",
        "      └── src/weather (8 files 2024-01-01.csv … 2024-01-08.csv)  [all source]",
    ]
    assert "--expand lists each" in out

    code, out, err = cli("lineage", "inter/forecast", "--expand", "-w", ws.root)
    assert code == 0, err
    upstream = section(out, "Upstream")
    assert len(upstream) == 1 + 2 * len(DAYS)
    for day in DAYS:
        assert any(f"inter/daily/{day}@" in line and "<- daily  [ok]" in line for line in upstream)
        assert any(f"src/weather/{day}.csv@" in line for line in upstream)

    code, out, _ = cli("lineage", "inter/forecast", "--format", "json", "-w", ws.root)
    refs = {node["ref"] for node in json.loads(out)["nodes"]}
    assert {f"inter/daily/{day}" for day in DAYS} <= refs  # JSON keeps every node


def test_lineage_group_says_how_many_versions_are_not_current(daily_ws: Workspace, cli) -> None:
    ws = daily_ws
    daily(ws, ["2024-01-03", "2024-01-04"], scale=2)  # rewritten after the forecast read them
    code, out, err = cli("lineage", "inter/forecast", "-w", ws.root)
    assert code == 0, err
    upstream = section(out, "Upstream")
    assert upstream[1] == (
        "  └── inter/daily (8 partitions 2024-01-01 … 2024-01-08)  "
        "<- daily  [all ok, 2 not current] (stale)"
    )
    # Downstream of one partition: its step's other partitions are not dragged in.
    code, out, err = cli("lineage", "src/weather/2024-01-05.csv", "-w", ws.root)
    assert code == 0, err
    assert [line.split("@")[0].strip(" └─") for line in section(out, "Downstream")] == [
        "src/weather/2024-01-05.csv",
        "inter/daily/2024-01-05",
        "inter/forecast",
    ]


# --------------------------------------------------------------------------------- diff


@pytest.mark.both_stores
def test_diff_summarises_changed_partitions_in_words(daily_ws: Workspace, cli) -> None:
    ws = daily_ws
    assert cli("snapshot", "v1", "-w", ws.root)[0] == 0
    old = {day: ws.store.get(f"inter/daily/{day}").version for day in DAYS}
    changed = ["2024-01-02", "2024-01-03", "2024-01-06"]
    daily(ws, changed, scale=2)
    daily(ws, ["2024-01-09"])
    forecast(ws, [*DAYS, "2024-01-09"])
    assert cli("snapshot", "v2", "-w", ws.root)[0] == 0
    new = {day: ws.store.get(f"inter/daily/{day}").version for day in [*DAYS, "2024-01-09"]}

    code, out, err = cli("diff", "v1", "v2", "-w", ws.root)
    assert code == 0, err
    assert " - -> " not in out and "- ->" not in out
    lines = out.splitlines()
    at = lines.index(
        "changed  inter/daily: 3 of 9 partitions changed: 2024-01-02, 2024-01-03, 2024-01-06"
    )
    assert lines[at + 1 : at + 4] == [
        "           versions changed",
        "           parameter scale: 1 -> 2",
        "           inputs src/weather: 3 of 9 files changed: 2024-01-02.csv, 2024-01-03.csv, "
        "2024-01-06.csv",
    ]
    assert "added    inter/daily/2024-01-09" in lines
    at = lines.index("changed  inter/forecast")
    forecast_lines = lines[at + 1 :]
    assert (
        "           inputs inter/daily: 3 of 9 partitions changed: 2024-01-02, 2024-01-03, "
        "2024-01-06" in forecast_lines
    )
    assert (
        f"           input inter/daily/2024-01-09 added at {new['2024-01-09'][:12]}"
        in forecast_lines
    )
    assert (
        "changed  src/weather: 3 of 9 files changed: 2024-01-02.csv, 2024-01-03.csv, "
        "2024-01-06.csv" in lines
    )

    code, out, err = cli("diff", "v2", "v1", "-w", ws.root)
    assert code == 0, err
    assert (
        f"           input inter/daily/2024-01-09 removed (was {new['2024-01-09'][:12]})"
        in out.splitlines()
    )
    assert "removed  inter/daily/2024-01-09" in out

    code, out, err = cli("diff", "v1", "v2", "--expand", "-w", ws.root)
    assert code == 0, err
    for day in changed:
        assert f"changed  inter/daily/{day}" in out
        assert f"input inter/daily/{day} changed {old[day][:12]} -> {new[day][:12]}" in out
    assert " - -> " not in out

    code, out, err = cli("diff", "v1", "v2", "--format", "json", "-w", ws.root)
    assert code == 0, err
    entries = {entry["ref"]: entry for entry in json.loads(out)}
    assert {f"inter/daily/{day}" for day in changed} <= set(entries)  # one entry a ref
    assert (
        f"input inter/daily/2024-01-09 - -> {new['2024-01-09'][:12]}"
        in entries["inter/forecast"]["changes"]
    )  # JSON lines as they always were


def test_diff_groups_partitions_changed_outside_any_step(daily_ws: Workspace, cli) -> None:
    ws = daily_ws
    assert cli("snapshot", "v1", "-w", ws.root)[0] == 0
    was = ws.store.get("inter/daily/2024-01-07").version
    for day in ("2024-01-02", "2024-01-05"):
        write(ws.local_path(f"inter/daily/{day}") / "part-0.csv", "edited\n")
    shutil.rmtree(ws.local_path("inter/daily/2024-01-07"))
    assert cli("snapshot", "v2", "-w", ws.root)[0] == 0
    code, out, err = cli("diff", "v1", "v2", "-w", ws.root)
    assert code == 0, err
    assert out.splitlines() == [
        "changed  inter/daily: 3 of 8 partitions changed: 2024-01-02, 2024-01-05, 2024-01-07",
        "           changed outside any step (drift) (in 2 of 3)",
        "           data missing (in 1 of 3)",
    ]
    code, out, err = cli("diff", "v1", "v2", "--expand", "-w", ws.root)
    assert code == 0, err
    assert f"           data missing (was {was[:12]})" in out.splitlines()
    assert out.count("changed outside any step (drift): data ") == 2


# ------------------------------------------------------------------------------- status


def dagster_like(
    ws: Workspace, step: str, ref: str, content: str, inputs: list[str], partition: str | None
) -> None:
    """A materialization as the lineage sensor applies one from Dagster's event log: the
    files it read are inputs at their version now, not observed."""
    write(ws.local_path(ref) / "part-0.parquet", content)
    read = tuple((item, ws.version_of(item)) for item in inputs)
    ws.store.apply(
        LineageRecord(
            ref=ref,
            version=ws.version_of(ref),
            step=StepInfo(
                name=step, kind="dagster-asset", run_id=uuid.uuid4().hex, partition=partition
            ),
            inputs=read,
            provenance=dict(read),
            start_time=now_iso(),
            end_time=now_iso(),
        )
    )


@pytest.fixture
def landed_ws(ws: Workspace) -> Workspace:
    """Source files a Dagster asset read as found: no lineage of their own."""
    for day in DAYS:
        write(ws.root / f"data/src/landed/weather_{day}.csv", f"day\n{day}\n")
        dagster_like(
            ws,
            "staging",
            f"inter/staging/{day}",
            f"{day}\n",
            [f"src/landed/weather_{day}.csv"],
            day,
        )
    return ws


@pytest.mark.both_stores
def test_status_counts_source_data_steps_read_and_groups_partitions(
    landed_ws: Workspace, cli
) -> None:
    ws = landed_ws
    code, out, err = cli("status", "--format", "json", "-w", ws.root)
    assert code == 0, err
    data = json.loads(out)
    counts = {res["name"]: res["refs"] for res in data["resources"]}
    assert counts == {"src": len(DAYS), "inter": len(DAYS), "results": 0, "code": 0}
    rows = {row["ref"]: row for row in data["refs"]}
    landed = rows["src/landed/weather_2024-01-01.csv"]
    assert landed["status"] == "source" and landed["step"] is None
    assert landed["version"] == ws.version_of("src/landed/weather_2024-01-01.csv")
    assert landed["read_by"] == [{"ref": "inter/staging/2024-01-01", "step": "staging"}]
    assert data["verdict"] == "clean" and data["verified"] is False

    code, out, err = cli("status", "-w", ws.root)
    assert code == 0, err
    assert re.search(rf"^  src\s+source-data\s+data/src\s+\[{len(DAYS)} refs\]$", out, re.MULTILINE)
    refs = section(out, "Refs:")
    assert len(refs) == 2
    assert refs[0].startswith("  inter/staging (8 partitions)  ")
    assert "2024-01-01 … 2024-01-08" in refs[0] and " staging " in refs[0]
    assert refs[1].startswith("  src/landed (8 files)  ")
    assert "read by staging" in refs[1]

    code, out, err = cli("status", "--expand", "-w", ws.root)
    assert code == 0, err
    assert len(section(out, "Refs:")) == 2 * len(DAYS)

    # Each of those files has its lineage: what read it.
    code, out, err = cli("lineage", "src/landed/weather_2024-01-02.csv", "-w", ws.root)
    assert code == 0, err
    assert "inter/staging/2024-01-02@" in section(out, "Downstream")[1]
    code, _, err = cli("lineage", "src/landed", "-w", ws.root)
    assert code == 1 and "steps read 8 ref(s) inside it" in err


# ----------------------------------------------------------------------- status --verify


def test_status_verify_exits_0_when_the_data_is_what_the_lineage_says(
    daily_ws: Workspace, cli
) -> None:
    ws = daily_ws
    code, out, err = cli("status", "--verify", "-w", ws.root)
    assert code == 0, err
    assert out.rstrip().splitlines()[-1] == (
        f"Verified {len(DAYS) * 2 + 1} ref(s): the data of every one is the version its "
        "lineage says; nothing needs attention"
    )
    assert "need attention" not in out
    code, out, err = cli("status", "--verify", "--format", "json", "-w", ws.root)
    data = json.loads(out)
    assert code == 0 and data["exit_code"] == 0, err
    assert (data["verified"], data["verdict"], data["attention"], data["to_run"]) == (
        True,
        "clean",
        [],
        [],
    )
    assert {row["data"] for row in data["refs"]} == {"matches"}


def test_status_verify_exits_3_on_drift_and_says_what_to_run(daily_ws: Workspace, cli) -> None:
    ws = daily_ws
    for day in ("2024-01-02", "2024-01-05"):  # edited by hand, outside any step
        write(ws.local_path(f"inter/daily/{day}") / "part-0.csv", "edited\n")
    code, out, err = cli("status", "-w", ws.root)
    assert code == 0 and "need attention" not in out, err  # not verified: not found
    code, out, err = cli("status", "--verify", "-w", ws.root)
    assert code == 3, err
    refs = section(out, "Refs:")
    assert any(
        line.startswith("  inter/daily (8 partitions)") and "data 6 match, 2 changed" in line
        for line in refs
    )
    after = out.split("\n\n")
    assert after[-3].splitlines() == [
        "2 ref(s) need attention: inter/daily (2 of 8 partitions) (data changed)",
        "  inter/daily (2 of 8 partitions: 2024-01-02, 2024-01-05): their data changed "
        "outside step 'daily'",
    ]
    assert after[-2].splitlines() == [
        "To run:",
        "  re-run step 'daily' for inter/daily (2 of 8 partitions: 2024-01-02, 2024-01-05) "
        "(data changed outside the step)",
    ]
    assert after[-1].strip() == (
        "2 refs need attention: run what is listed above, then 'dws-dagster status --verify' again"
    )

    code, out, err = cli("status", "--verify", "--expand", "-w", ws.root)
    assert code == 3, err
    recorded = ws.store.get("inter/daily/2024-01-02").version
    assert (
        f"  inter/daily/2024-01-02: its data changed outside step 'daily' (lineage says "
        f"{recorded[:12]}, found {ws.version_of('inter/daily/2024-01-02')[:12]}); re-run "
        "'daily' to rewrite it, or bring back a snapshot's data with 'dws-dagster restore "
        "SNAPSHOT'"
    ) in out.splitlines()

    code, out, err = cli("status", "--verify", "--format", "json", "-w", ws.root)
    data = json.loads(out)
    assert code == 3 and data["exit_code"] == 3, err
    assert data["verdict"] == "attention"
    assert [(item["ref"], item["problem"], item["step"]) for item in data["attention"]] == [
        ("inter/daily/2024-01-02", "drift", "daily"),
        ("inter/daily/2024-01-05", "drift", "daily"),
    ]
    assert data["to_run"] == [
        "re-run step 'daily' for inter/daily (2 of 8 partitions: 2024-01-02, 2024-01-05) "
        "(data changed outside the step)"
    ]
    assert data["summary"].startswith("2 refs need attention")

    # Rewritten by their step, the data is its lineage again.
    daily(ws, ["2024-01-02", "2024-01-05"])
    assert cli("status", "--verify", "-w", ws.root)[0] == 0


def test_status_verify_names_the_readers_of_changed_source_data(landed_ws: Workspace, cli) -> None:
    ws = landed_ws
    write(ws.root / "data/src/landed/weather_2024-01-03.csv", "day\nchanged\n")
    shutil.rmtree(ws.local_path("inter/staging/2024-01-07"))
    code, out, err = cli("status", "--verify", "-w", ws.root)
    assert code == 3, err
    lines = out.splitlines()
    assert (
        "2 ref(s) need attention: inter/staging/2024-01-07 (data missing), "
        "src/landed/weather_2024-01-03.csv (data changed)" in lines
    )
    assert any(
        line.startswith(
            "  src/landed/weather_2024-01-03.csv: its source data changed "
            "since step 'staging' read it ("
        )
        for line in lines
    )
    assert (
        "  re-run step 'staging' for inter/staging/2024-01-03 (read source data that "
        "changed)" in lines
    )
    assert "  re-run step 'staging' for inter/staging/2024-01-07 (data missing)" in lines
    code, out, _ = cli("status", "--verify", "--format", "json", "-w", ws.root)
    rows = {row["ref"]: row for row in json.loads(out)["refs"]}
    assert code == 3
    assert rows["src/landed/weather_2024-01-03.csv"]["data"] == "changed"
    assert rows["inter/staging/2024-01-07"]["data"] == "missing"


def test_status_verify_exits_3_for_failed_or_unknown_refs_too(daily_ws: Workspace, cli) -> None:
    ws = daily_ws
    from dws_dagster import LineageBuilder

    with pytest.raises(RuntimeError):
        with (
            LineageBuilder()
            .with_step_name("forecast")
            .with_parameters({})
            .with_input_ref("inter/daily/2024-01-01")
            .with_workspace_directory(ws.root)
            .eval() as lineage
        ):
            lineage.add_output_ref("inter/forecast")
            write(ws.local_path("inter/forecast") / "part-0.csv", "partial")
            raise RuntimeError("crash")
    code, out, err = cli("status", "-w", ws.root)
    assert code == 0 and "need attention: inter/forecast (unknown)" in out, err
    code, out, err = cli("status", "--verify", "-w", ws.root)
    assert code == 3, err
    assert "  re-run step 'forecast' for inter/forecast (data may be partial)" in out


def test_a_ref_claimed_by_a_running_step_needs_no_attention() -> None:
    """No version is recorded yet for a ref a step claimed and is writing: its data (there or
    not yet) is compared with nothing."""
    rows = [
        {
            "ref": ref,
            "version": None,
            "status": "pending",
            "step": step,
            "finished": None,
            "data": data,
        }
        for ref, step, data in (("inter/new", "s", "missing"), ("inter/other", "t", "changed"))
    ]
    report = StatusReport(rows, verified=True)
    assert report.verdict == "clean" and report.problems == []
