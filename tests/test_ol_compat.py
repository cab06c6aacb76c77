"""The openlineage-python internals dws_dagster relies on (`dws_dagster._compat.openlineage`),
each exercised against the installed client so that an upgrade that moves one fails here,
loudly."""

from pathlib import Path

from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

from dws_dagster._compat import openlineage as ol_compat
from dws_dagster.ol.transport import NO_RETRY


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
