"""HTTP delivery to a catalog that redirects or answers slowly, against real local receivers.

A redirect is not a delivery: the client's `requests` session would follow a 301/302/303 with
a bodiless GET and count its answer as delivered. The outbox follows only a 307/308 (method
and body kept) within the configured catalog (same scheme, host and port); every other 3xx
answer leaves the events pending and says why — in `deliver`'s report, the outbox's status
and the sensor's tick. What the receivers actually got is checked, request by request.

A catalog that dribbles its answer (its status line, or its body, a byte at a time) never
trips the client's per-read timeout; every event has a total deadline, after which it stays
pending and the error names the deadline. No timed assertion: the outcome is asserted, with a
short deadline configured and a generous process timeout only as a guard.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from dws_dagster import Workspace, process_events
from dws_dagster.ol.outbox.durable import Outbox
from dws_dagster.ol.transport.factory import make_transport
from tests.conftest import ROOT
from tests.ol.ol_receiver import LINEAGE_PATH, Receiver
from tests.ol.test_outbox import runs

REDIRECTS = [301, 302, 303, 307, 308]
#: A generous bound for a real process, never reached unless delivery hangs: not an assertion.
GUARD_SECONDS = 120


#: No OpenLineage configuration from the machine running the tests.
pytestmark = pytest.mark.usefixtures("clean_ol_env")


@pytest.fixture
def catalog() -> Iterator[Receiver]:
    with Receiver() as receiver:
        yield receiver


@pytest.fixture
def elsewhere() -> Iterator[Receiver]:
    """Another receiver on the same host, another port: not the configured catalog."""
    with Receiver() as receiver:
        yield receiver


def methods(receiver: Receiver) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in receiver.requests]


@pytest.mark.parametrize("status", REDIRECTS)
@pytest.mark.parametrize("target", ["same host", "same host, absolute", "another port"])
@pytest.mark.parametrize("retries", [None, 3])
def test_a_redirect_is_followed_only_with_its_body_and_within_the_catalog(
    ws: Workspace,
    catalog: Receiver,
    elsewhere: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    target: str,
    retries: int | None,
) -> None:
    moved = f"{LINEAGE_PATH}?moved=1"
    location = {
        "same host": moved,
        "same host, absolute": f"{catalog.url}{moved}",
        "another port": f"{elsewhere.url}{LINEAGE_PATH}",
    }[target]
    catalog.redirect(status, location)
    config = {"type": "http", "url": catalog.url}
    if retries is not None:
        config["retry"] = {"total": retries, "backoff_factor": 0}  # type: ignore[assignment]
    import yaml

    (ws.root / "openlineage.yml").write_text(yaml.safe_dump({"transport": config}))
    transport, _ = make_transport(ws)
    events = runs(3)
    outbox = Outbox(ws)
    outbox.spool(events)
    report = outbox.deliver(transport, budget_seconds=60)
    transport.close()

    followed = status in (307, 308) and target != "another port"
    if followed:
        assert (report.sent, report.failed, report.pending) == (6, 0, 0)
        assert catalog.events == events  # every body arrived, in order, by POST
        assert methods(catalog) == [("POST", LINEAGE_PATH), ("POST", moved)] * 6
        redirected = [r for r in catalog.requests if r["path"] == LINEAGE_PATH]
        taken = [r for r in catalog.requests if r["path"] == moved]
        assert [r["body"] for r in redirected] == [r["body"] for r in taken]
        assert elsewhere.requests == []
        return
    # Not followed: one POST reached the catalog and was redirected; nothing else anywhere.
    assert (report.sent, report.failed, report.pending) == (0, 1, 6)
    assert methods(catalog) == [("POST", LINEAGE_PATH)]
    assert catalog.events == [] and elsewhere.requests == []
    error = report.last_error or ""
    assert f"the catalog answered {status} " in error and "redirecting to" in error, error
    assert "events stay pending" in error and "set the transport's url" in error
    if status in (307, 308):
        assert f"within the configured catalog (http://127.0.0.1:{catalog.port})" in error
    else:
        assert "keeps the method and the body (307, 308)" in error
    assert Outbox(ws).status().last_error == error


def test_other_3xx_answers_and_redirect_loops_are_not_deliveries(
    ws: Workspace, catalog: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 3xx without a Location (300, 304) is no delivery either; a 307 back to itself is
    followed a few times, then refused."""
    monkeypatch.setenv("OPENLINEAGE_URL", catalog.url)
    outbox = Outbox(ws)
    outbox.spool(runs(1))
    for status, location, said in (
        (300, "", "which is not a delivery"),
        (304, "", "which is not a delivery"),
        (307, LINEAGE_PATH, "follows at most 5 redirects"),
    ):
        catalog.redirect(status, location)
        catalog.requests.clear()
        transport, _ = make_transport(ws)
        report = outbox.deliver(transport, ignore_backoff=True)
        transport.close()
        assert (report.sent, report.pending) == (0, 2), status
        assert said in (report.last_error or ""), report.last_error
        assert {r["method"] for r in catalog.requests} == {"POST"} and catalog.events == []
    catalog.redirect(None)
    report = outbox.deliver(make_transport(ws)[0], ignore_backoff=True)
    assert report.sent == 2 and len(catalog.events) == 2


def test_the_cli_and_the_sensor_say_why_events_stay_pending(
    ws: Workspace,
    catalog: Receiver,
    elsewhere: Receiver,
    instance: Any,
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENLINEAGE_URL", catalog.url)
    catalog.redirect(302, f"{elsewhere.url}/login")
    Outbox(ws).spool(runs(3))
    code, out, err = cli("openlineage", "deliver", "-w", ws.root)
    assert code == 1 and err == ""
    assert "sent 0 event(s)" in out and "the catalog answered 302 " in out and "6 pending" in out
    code, out, _ = cli("openlineage", "status", "-w", ws.root)
    assert code == 0 and "last error: sending run " in out and "answered 302 " in out

    outcome = process_events(instance, ws, time_budget_seconds=5)
    # During the backoff the tick makes no attempt, and still says why events wait.
    assert outcome.pending == 6 and outcome.delivered == 0
    assert "answered 302 " in (outcome.last_delivery_error or "")
    assert "last delivery error: sending run " in outcome.tick_text()
    assert "answered 302 " in outcome.tick_text()
    assert elsewhere.requests == [] and catalog.events == []


# ------------------------------------------------------------------------------ dribbling


def _deliver_process(ws: Workspace, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(PYTHONPATH=str(ROOT), OPENLINEAGE_URL=url)
    return subprocess.run(
        [sys.executable, "-m", "dws_dagster.cli", "openlineage", "deliver", "-w", ws.root, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
        check=False,
    )


@pytest.mark.parametrize("part", ["status", "body"])
def test_a_catalog_dribbling_its_answer_is_given_up_at_the_deadline(
    ws: Workspace, catalog: Receiver, part: str
) -> None:
    """`deliver --deadline 1` against a catalog answering a byte every half second: the
    first event is given up, every event stays pending, and the report names the deadline;
    the catalog got that one request, nothing after it."""
    catalog.dribble(part, interval=0.5)
    Outbox(ws).spool(runs(3))
    done = _deliver_process(ws, catalog.url, "--budget", "30", "--deadline", "1")
    assert done.returncode == 1 and done.stderr == "", done
    assert "sent 0 event(s)" in done.stdout and "6 pending" in done.stdout, done.stdout
    assert "within the 1 s deadline" in done.stdout, done.stdout
    status = Outbox(ws).status()
    assert status.pending == 6 and "within the 1 s deadline" in (status.last_error or "")
    assert len(catalog.requests) == 1


def test_a_sensor_tick_gives_up_on_a_dribbling_catalog(
    ws: Workspace, catalog: Receiver, instance: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tick's deliveries have a deadline of their own (half its budget): the tick ends,
    its events stay pending, and its text names the deadline."""
    monkeypatch.setenv("OPENLINEAGE_URL", catalog.url)
    catalog.dribble("status", interval=0.5)
    Outbox(ws).spool(runs(2))
    outcome = process_events(instance, ws, time_budget_seconds=2)
    assert (outcome.delivered, outcome.pending) == (0, 4)
    assert "within the 1 s deadline" in (outcome.delivery_error or ""), outcome.delivery_error
    assert "deadline" in outcome.tick_text()


def test_the_catalog_is_its_scheme_host_and_port() -> None:
    """What "within the configured catalog" compares: case and default ports do not matter,
    a scheme, host or port of its own does (an https Location of an http catalog included)."""
    from dws_dagster.ol.transport.http import origin

    catalog = origin("http://Catalog.example/api")
    assert origin("http://catalog.example:80/api/v1/lineage?x") == catalog
    assert origin("HTTP://CATALOG.EXAMPLE/other") == catalog
    for elsewhere in (
        "https://catalog.example/api",
        "http://catalog.example:8080/api",
        "http://catalog.example.evil/api",
        "http://user@other.example/api",
    ):
        assert origin(elsewhere) != catalog, elsewhere
