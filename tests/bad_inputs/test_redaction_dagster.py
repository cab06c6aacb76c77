"""No secret reaches the workspace, OpenLineage events, Dagster metadata, logs or CLI output on the
Dagster side (issue 17, classes 2 and 4): real Dagster runs, the lineage sensor's
`process_events`, the workspace's OpenLineage file.

"Dagster metadata" is what dws_dagster puts in Dagster's event log: materialization metadata
and its log messages. Dagster itself keeps the run config it was given and the step failure
it caught (its own STEP_FAILURE event) as they are; dws_dagster does not rewrite those.
"""

import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    Config,
    DagsterInstance,
    Definitions,
    Permissive,
    asset,
    materialize,
)
from dagster._serdes import serialize_value
from hypothesis import HealthCheck, Phase, assume, given, settings
from pyspark.sql import DataFrame

from dws_dagster import InvalidParameterError, Workspace, dws_ref, process_events
from dws_dagster.cli.main import main as cli_main
from dws_dagster.workspace.records import MAX_PARAMETER_DEPTH, REDACTED
from tests.assets.test_io_manager import latest, root_cause
from tests.conftest import tree_state
from tests.lineage_api.test_parameters import nested
from tests.support.pipeline import io_manager, make_workspace
from tests.workspace.test_redaction import secrets_st

REF = "intermediate-data/leaky"


class Login(Config):
    db_password: str
    dsn: str
    note: str


def failing_asset() -> Any:
    @asset(name="leaky", metadata=dws_ref("intermediate-data", "leaky"))
    def leaky(config: Login) -> DataFrame:
        raise ConnectionError(config.note)

    return leaky


def places(
    ws: Workspace,
    instance: DagsterInstance,
    run_id: str,
    caplog: pytest.LogCaptureFixture,
    cli_output: str,
) -> dict[str, str]:
    """Every place a secret could reach, as text."""
    ours = [
        entry
        for entry in instance.all_logs(run_id)
        if entry.dagster_event is None or entry.dagster_event.is_step_materialization
    ]
    return {
        "workspace files": b"".join(
            p.read_bytes() for p in ws.root.rglob("*") if p.is_file()
        ).decode(errors="replace"),
        "OpenLineage events": (ws.meta_dir / "openlineage" / "events.jsonl").read_text(),
        "dws_dagster's Dagster event log entries": "".join(serialize_value(e) for e in ours),
        "Python logs": "\n".join(
            r.getMessage() for r in caplog.records if r.name.startswith("dws_dagster")
        ),
        "CLI output": cli_output,
    }


def cli_text(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> str:
    out = []
    for args in (
        ["lineage", REF],
        ["lineage", REF, "--format", "json"],
        ["status"],
        ["openlineage", "status"],
    ):
        capsys.readouterr()
        cli_main([*args, "-w", str(ws.root)])
        captured = capsys.readouterr()
        out.append(captured.out + captured.err)
    return "\n".join(out)


@pytest.fixture
def quiet_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with tempfile.TemporaryDirectory() as home:
        monkeypatch.setenv("HOME", home)
        for name in list(os.environ):
            if name.startswith("OPENLINEAGE"):
                monkeypatch.delenv(name)
        yield


@pytest.mark.parametrize("position", ["userinfo", "query", "kv", "flag", "bearer", "json", "plain"])
@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(secret=secrets_st)
def test_a_failed_asset_leaves_no_secret_anywhere(
    secret: str,
    position: str,
    quiet_home: None,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The asset's config holds the secret (as a password, inside a DSN, inside free text)
    and its error quotes it in one of every position; the sensor turns the failure into a
    failed-attempt record and an OpenLineage FAIL event. (No shrinking: each example is a
    Dagster run; a failing example is reported as generated.)"""
    assume(
        all(
            secret not in word
            for word in (
                "leaky",
                "intermediate-data",
                "source-data",
                "results",
                "dagster",
                "python",
                "upstream",
                "downstream",
            )
        )
    )  # words the CLI prints in its own output
    error = {
        "userinfo": f"could not reach postgresql://etl:{secret}@db:5432/x",
        "query": f"GET https://acct.blob.core.windows.net/c/x?sv=1&sig={secret}",
        "kv": f"login refused (password={secret})",
        "flag": f"Command '['psql', '--db-password', '{secret}']' returned 2",
        "bearer": f"401 for Authorization: Bearer {secret}",
        "json": f'payload {{"api_key": "{secret}", "rows": 3}}',
        "plain": f"the server said: wrong value {secret}",
    }[position]
    caplog.clear()  # one example's records only (Dagster logs a lot per run)
    with tempfile.TemporaryDirectory() as tmp:
        monkeypatch.chdir(tmp)
        ws = make_workspace(Path(tmp) / "ws")
        leaky = failing_asset()
        config = {"db_password": secret, "dsn": f"postgresql://etl:{secret}@db/x", "note": error}
        with DagsterInstance.ephemeral() as instance, caplog.at_level(logging.DEBUG):
            result = materialize(
                [leaky],
                instance=instance,
                raise_on_error=False,
                resources={"io_manager": io_manager(ws)},
                run_config={"ops": {"leaky": {"config": config}}},
            )
            assert not result.success
            outcome = process_events(
                instance, ws, repository_def=Definitions(assets=[leaky]).get_repository_def()
            )
            assert outcome.applied.failures == 1
            attempt = ws.store.get(REF).attempt
            assert attempt["status"] == "failed" and "ConnectionError" in attempt["error"]
            assert REDACTED in attempt["error"] or position == "userinfo"
            found = places(ws, instance, result.run_id, caplog, cli_text(ws, capsys))
        assert '"FAIL"' in found["OpenLineage events"]
        for where, text in found.items():
            assert secret not in text, f"the secret reached the {where}"


@pytest.mark.spark
def test_a_materialized_asset_records_no_secret_anywhere(
    spark,
    tmp_path: Path,
    clean_ol_env: None,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Success path: the config's secrets in every position reach neither the record, the
    materialization metadata, results on disk, OpenLineage events, logs nor the CLI."""
    secrets = ["hunter2-pw-x", "p@ss@word-2", "sig-value-9", "tok-4242-xy", "ghp_" + "Q7" * 18]

    class Settings(Config):
        db_password: str
        dsn: str
        export_url: str
        header: str
        notes: str
        rows: int

    @asset(name="leaky", metadata=dws_ref("intermediate-data", "leaky"))
    def leaky(context, config: Settings) -> DataFrame:
        context.log.info(f"reading {config.rows} rows")
        return spark.range(config.rows)

    ws = make_workspace(tmp_path / "ws")
    config = {
        "db_password": secrets[0],
        "dsn": f"postgresql://etl:{secrets[1]}@db/x",
        "export_url": f"https://acct.blob.core.windows.net/c/x?sv=1&sig={secrets[2]}",
        "header": f"Authorization: Bearer {secrets[3]}",
        "notes": f"key {secrets[4]}",
        "rows": 3,
    }
    with DagsterInstance.ephemeral() as instance, caplog.at_level(logging.DEBUG):
        result = materialize(
            [leaky],
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            run_config={"ops": {"leaky": {"config": config}}},
        )
        process_events(
            instance, ws, repository_def=Definitions(assets=[leaky]).get_repository_def()
        )
        record = ws.store.get(REF).record
        assert record["parameters"] == {
            "db_password": REDACTED,
            "dsn": "postgresql://db/x",
            "export_url": f"https://acct.blob.core.windows.net/c/x?sv=1&sig={REDACTED}",
            "header": f"Authorization: {REDACTED}",
            "notes": f"key {REDACTED}",
            "rows": 3,
        }
        assert latest(instance, "leaky")["metadata"]["dws/parameters"] == record["parameters"]
        found = places(ws, instance, result.run_id, caplog, cli_text(ws, capsys))
    for where, text in found.items():
        for secret in secrets:
            assert secret not in text, f"{secret!r} reached the {where}"


@pytest.mark.spark
@pytest.mark.parametrize("levels", [MAX_PARAMETER_DEPTH + 1, 200])
def test_asset_config_nested_too_deep_is_refused_naming_asset_and_parameter(
    spark, tmp_path: Path, levels: int
) -> None:
    @asset(
        name="deep",
        metadata=dws_ref("intermediate-data", "deep"),
        config_schema={"grid": Permissive()},
    )
    def deep() -> DataFrame:
        return spark.range(2)

    ws = make_workspace(tmp_path / "ws")
    ws.store  # noqa: B018 - opened before the snapshot of the tree
    before = tree_state(ws.root)
    with DagsterInstance.ephemeral() as instance, pytest.raises(Exception) as info:
        materialize(
            [deep],
            instance=instance,
            resources={"io_manager": io_manager(ws)},
            run_config={"ops": {"deep": {"config": {"grid": nested(levels)}}}},
        )
    cause = root_cause(info.value)
    assert isinstance(cause, InvalidParameterError), f"{type(cause).__name__}: {cause}"
    assert "asset 'deep'" in str(cause) and "'grid" in str(cause)
    assert f"{MAX_PARAMETER_DEPTH} levels" in str(cause)
    assert tree_state(ws.root) == before


@pytest.mark.spark
def test_a_write_failing_in_spark_records_no_secret(
    spark,
    tmp_path: Path,
    clean_ol_env: None,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The IO manager's own failure path: the write fails inside Spark with an error that
    quotes the config's password plainly and in a DSN; the failed attempt it records, the
    sensor's record and event, and the logs hold neither."""
    from pyspark.sql import functions as F

    secret = "pl41n-Secret-77"

    class Creds(Config):
        db_password: str

    @asset(name="leaky", metadata=dws_ref("intermediate-data", "leaky"))
    def leaky(config: Creds) -> DataFrame:
        password = config.db_password

        def boom(v: int) -> int:
            if v == 3:
                raise ValueError(f"login with {password} to postgresql://etl:{password}@db/x")
            return v

        return spark.range(5).withColumn("x", F.udf(boom, "long")("id"))

    ws = make_workspace(tmp_path / "ws")
    with DagsterInstance.ephemeral() as instance, caplog.at_level(logging.DEBUG):
        result = materialize(
            [leaky],
            instance=instance,
            raise_on_error=False,
            resources={"io_manager": io_manager(ws)},
            run_config={"ops": {"leaky": {"config": {"db_password": secret}}}},
        )
        assert not result.success
        attempt = ws.store.get(REF).attempt
        assert attempt["status"] == "failed" and REDACTED in attempt["error"]
        process_events(
            instance, ws, repository_def=Definitions(assets=[leaky]).get_repository_def()
        )
        found = places(ws, instance, result.run_id, caplog, cli_text(ws, capsys))
    for where, text in found.items():
        assert secret not in text, f"the secret reached the {where}"
