"""The openlineage-python internals dws_dagster relies on (`dws_dagster._compat.openlineage`),
each exercised against the installed client so that an upgrade that moves one fails here,
loudly."""

import logging
from pathlib import Path

import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    dataset_version_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    processing_engine_run,
)
from openlineage.client.serde import Serde
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

from dws_dagster._compat import openlineage as ol_compat
from dws_dagster.ol.transport.factory import NO_RETRY


def test_http_retry_set_before_the_first_send_is_the_one_used() -> None:
    """The session, built on first use, mounts an adapter retrying as set, not the default."""
    transport = HttpTransport(HttpConfig.from_dict({"url": "http://127.0.0.1:1"}))
    assert transport.config.retry["total"] > 0  # the client's default retries
    ol_compat.set_http_retry(transport, dict(NO_RETRY))
    retries = transport.session.get_adapter("http://127.0.0.1:1/api/v1/lineage").max_retries
    assert (retries.total, retries.connect, retries.read, retries.status) == (0, 0, 0, 0)
    assert list(retries.status_forcelist) == []
    transport.close()


def test_file_transport_paths_and_handler(tmp_path: Path) -> None:
    """Where a file transport writes an event (one file when appending, a file per event
    otherwise), whether it writes through `open`, and the local name of a `file://` URL."""
    events = tmp_path / "events.jsonl"
    appending = FileTransport(FileConfig(log_file_path=str(events), append=True))
    assert ol_compat.file_path_for(appending, {"eventType": "START"}) == str(events)
    assert ol_compat.writes_local_files(appending)
    per_event = FileTransport(FileConfig(log_file_path=str(events)))
    first = ol_compat.file_path_for(per_event, {"eventType": "START"})
    assert first.startswith(f"{events}-") and first.endswith(".json")
    assert ol_compat.local_path(str(events)) == str(events)
    assert ol_compat.local_path(events.as_uri()) == str(events)
    assert ol_compat.local_path("file://localhost" + str(events)) == str(events)


def test_schema_url_of_a_class_is_the_one_its_instances_carry() -> None:
    """What the client writes as an event's `schemaURL` and a facet's `_schemaURL` (run, job,
    dataset and output facets alike) is each class's own URL, known without an instance."""
    now = "2024-05-01T12:00:00Z"
    built = [
        RunEvent(
            eventType=RunState.START,
            eventTime=now,
            run=Run(runId="0b6f3b52-8c1e-4f5e-9a43-2f7f6b1f1c11"),
            job=Job(namespace="dagster", name="asset"),
        ),
        processing_engine_run.ProcessingEngineRunFacet(version="1.10.3", name="dagster"),
        error_message_run.ErrorMessageRunFacet(message="boom", programmingLanguage="python"),
        job_type_job.JobTypeJobFacet(processingType="BATCH", integration="DAGSTER"),
        dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion="v1"),
        output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=1),
    ]
    for instance in built:
        generated = type(instance)
        written = Serde.to_dict(instance)
        url = ol_compat.schema_url(generated)
        assert url == written.get("schemaURL", written.get("_schemaURL")), generated
        assert url.startswith("https://openlineage.io/spec/"), url
        assert url.endswith(f"#/$defs/{generated.__name__}"), url  # the class's, not its base's


def test_a_facet_class_of_this_package_carries_its_own_schema_url() -> None:
    """The client's way to declare a facet of one's own (`custom_facets`): an attrs subclass
    whose `_get_schema` the client writes as the facet's `_schemaURL`, which names the schema
    file shipped with the package."""
    import json

    from dws_dagster.ol.custom_facets import METRICS_SCHEMA_FILE, DwsMetricsDatasetFacet

    written = Serde.to_dict(DwsMetricsDatasetFacet(metrics={"mae": 1.5, "model": "naive"}))
    url = ol_compat.schema_url(DwsMetricsDatasetFacet)
    assert written["_schemaURL"] == url
    assert written["metrics"] == {"mae": 1.5, "model": "naive"}
    schema = json.loads(METRICS_SCHEMA_FILE.read_text())
    assert url == f"{schema['$id']}#/$defs/{DwsMetricsDatasetFacet.__name__}"


def test_client_logs_kept_keeps_what_the_client_logs_from_every_handler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The client logs a failed import under `openlineage.client.utils` before raising; inside
    the block the record is kept in the list, reaches no handler (not even Python's
    last-resort one, which prints on stderr), and the logger is as it was afterwards, also
    when blocks overlap."""
    from openlineage.client.utils import import_from_string

    logger = logging.getLogger(ol_compat.CLIENT_LOGGER)
    propagate, handlers = logger.propagate, list(logger.handlers)
    seen: list[logging.LogRecord] = []

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    root = logging.getLogger()
    root.addHandler(spy := Seen())
    try:
        with ol_compat.client_logs_kept() as outer:
            with ol_compat.client_logs_kept() as inner, pytest.raises(ImportError):
                import_from_string("zzcarrierpigeon")
            with pytest.raises(ImportError):
                import_from_string("zz.carrier")
        assert [r.name for r in inner] == ["openlineage.client.utils"]
        assert "not enough values to unpack" in inner[0].getMessage()
        assert len(outer) == 2 and seen == []
        assert (logger.propagate, logger.handlers) == (propagate, handlers)
        with pytest.raises(ImportError):  # outside a block the client logs as usual
            import_from_string("zzcarrierpigeon")
        assert len(seen) == 1
    finally:
        root.removeHandler(spy)
    assert capsys.readouterr().err == ""


def test_transport_types_are_those_the_client_builds_by_name() -> None:
    from openlineage.client.transport import get_default_factory

    types = ol_compat.transport_types()
    assert {"http", "file", "kafka", "console", "composite", "noop"} <= set(types)
    for kind in types:
        assert get_default_factory().transports[kind] is not None
    assert "zzcarrierpigeon" not in types


def test_an_http_adapter_set_before_the_first_send_carries_every_request() -> None:
    """Every URL the transport may post to (its endpoint, another host a redirect names)
    goes through the adapter given, on a session that follows no redirect itself; and a
    real send goes through it."""
    from requests.adapters import HTTPAdapter

    from tests.ol.ol_receiver import Receiver

    sent: list[str] = []

    class Counting(HTTPAdapter):
        def send(self, request, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            sent.append(str(request.url))
            return super().send(request, *args, **kwargs)

    with Receiver() as receiver:
        transport = HttpTransport(HttpConfig.from_dict({"url": receiver.url}))
        adapter = Counting()
        ol_compat.set_http_adapter(transport, adapter)
        session = transport.session
        for url in (f"{receiver.url}/api/v1/lineage", "https://elsewhere.example/x"):
            assert session.get_adapter(url) is adapter
        assert session.max_redirects == 0
        event = RunEvent(
            eventType=RunState.START,
            eventTime="2024-05-01T12:00:00Z",
            run=Run(runId="0b6f3b52-8c1e-4f5e-9a43-2f7f6b1f1c11"),
            job=Job(namespace="dagster", name="asset"),
        )
        transport.emit(event)
        transport.close()
    assert sent == [f"{receiver.url}/api/v1/lineage"] and len(receiver.events) == 1
