"""Throwaway DAGSTER_HOMEs on either of Dagster's SQLite event-log storages."""

from pathlib import Path


def sqlite_home(folder: Path, storage: str) -> str:
    """A DAGSTER_HOME in `folder/storage` whose event log is Dagster's default run-sharded
    SQLite storage ("run-sharded") or one database for all runs ("consolidated")."""
    home = folder / storage
    home.mkdir()
    config = "telemetry:\n  enabled: false\n"
    if storage == "consolidated":
        config += (
            "event_log_storage:\n  module: dagster._core.storage.event_log\n"
            "  class: ConsolidatedSqliteEventLogStorage\n"
            f"  config:\n    base_dir: {folder / 'events'}\n"
        )
    (home / "dagster.yaml").write_text(config)
    return str(home)
