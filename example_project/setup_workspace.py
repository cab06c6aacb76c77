"""The example's workspace: created and filled with landed data on first use.

`dg dev -w workspace.yaml` on a fresh clone must work with no other command, so loading
the definitions calls `ensure_workspace`: it creates the workspace (at `$DWS_EXAMPLE_WORKSPACE`,
default `example_workspace/` at the repository root) with its four resources and lands the
synthetic TLC data that is not there yet. The data's size is kept in `example.json` at the
workspace root, so every later load (the code server, the daemon, a launched run) builds the
same partitions as the data that was landed.

Run `python -m example_project.setup_workspace [DIR] [--months N ...]` to set one up, or to
land again files that were removed, by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from dws_dagster import DwsError, Workspace
from dws_dagster.workspace.files import atomic_write_json
from example_project.generator import (
    DEFAULT_SEED,
    ZONES,
    Landed,
    days_in,
    land,
    month_starts,
    next_month,
)

ENV_VAR = "DWS_EXAMPLE_WORKSPACE"
PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_ROOT = PACKAGE_DIR.parent / "example_workspace"
SETTINGS_FILE = "example.json"

#: (name, role, path relative to the workspace root); the code resource is this package.
RESOURCES = (
    ("source-data", "source-data", "data/source"),
    ("intermediate-data", "intermediate-data", "data/intermediate"),
    ("results", "results", "results"),
)
TRIPS_SUBPATH = "yellow_tripdata"
WEATHER_SUBPATH = "weather"


class ExampleSetupError(DwsError):
    """The example workspace cannot be set up as asked."""


@dataclass(frozen=True)
class ExampleSize:
    """How much data the example lands: whole months from `start`, or `days` days when set
    (a window shorter than a month, for tests)."""

    start: dt.date = dt.date(2024, 1, 1)
    months: int = 2
    days: int | None = None
    trips_per_month: int = 100_000
    zones: int = 50
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.months < 1 or (self.days is not None and self.days < 1):
            raise ExampleSetupError("example size: months and days must be at least 1")
        if self.trips_per_month < 1 or not 1 <= self.zones <= len(ZONES):
            raise ExampleSetupError(
                f"example size: trips_per_month must be positive and zones between 1 and "
                f"{len(ZONES)} (got {self.trips_per_month}, {self.zones})"
            )

    @property
    def end(self) -> dt.date:
        """First day after the data (exclusive)."""
        if self.days is not None:
            return self.start + dt.timedelta(days=self.days)
        end = self.start
        for _ in range(self.months):
            end = next_month(end)
        return end

    @property
    def month_keys(self) -> list[dt.date]:
        return month_starts(self.start, self.end)

    @property
    def day_keys(self) -> list[dt.date]:
        return days_in(self.start, self.end)

    def describe(self) -> str:
        span = f"{self.start:%Y-%m-%d} to {self.end - dt.timedelta(days=1):%Y-%m-%d}"
        return (
            f"{span}: {len(self.month_keys)} month(s), {len(self.day_keys)} days, "
            f"~{self.trips_per_month:,} trips per month, {self.zones} zones"
        )

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "start": self.start.isoformat()}

    @classmethod
    def from_json(cls, data: Any, *, source: Path) -> ExampleSize:
        try:
            fields = dict(data)
            fields["start"] = dt.date.fromisoformat(fields["start"])
            return cls(**fields)
        except (TypeError, KeyError, ValueError) as exc:
            raise ExampleSetupError(
                f"{source} does not describe an example size ({exc}); delete it and the "
                "workspace's data to start over"
            ) from None


#: The smallest size the whole example runs on: two months, two weeks and a day, so the
#: forecast has a week of history (168 hours) before the week it scores.
SMALL = ExampleSize(start=dt.date(2024, 1, 25), days=15, trips_per_month=6_000, zones=12)


@dataclass(frozen=True)
class ExampleWorkspace:
    workspace: Workspace
    size: ExampleSize
    landed: Landed

    @property
    def root(self) -> Path:
        return self.workspace.root


def workspace_root() -> Path:
    """`$DWS_EXAMPLE_WORKSPACE`, else `example_workspace/` at the repository root."""
    configured = os.environ.get(ENV_VAR)
    return Path(configured).expanduser().absolute() if configured else DEFAULT_ROOT


def ensure_workspace(
    root: str | os.PathLike[str] | None = None, size: ExampleSize | None = None
) -> ExampleWorkspace:
    """Create the workspace if missing, add missing resources, land missing data.

    Safe to call from several processes at once (`dg dev` loads the definitions in its
    code server and its daemon): the work is done under a file lock and files are renamed into
    place. A workspace set up before keeps its size; asking for another one is refused.
    """
    target = Path(root).expanduser().absolute() if root is not None else workspace_root()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExampleSetupError(
            f"cannot create the example workspace folder {target}: {exc}; "
            f"set {ENV_VAR} to a writable folder"
        ) from None
    with FileLock(str(target / ".example-setup.lock")):
        ws = Workspace.init(target, exist_ok=True)
        settings = target / SETTINGS_FILE
        if settings.is_file():
            try:
                stored = ExampleSize.from_json(
                    json.loads(settings.read_text("utf-8")), source=settings
                )
            except json.JSONDecodeError as exc:
                raise ExampleSetupError(
                    f"{settings} is not valid JSON ({exc}); delete it and "
                    "the workspace's data to start over"
                ) from None
            if size is not None and size != stored:
                raise ExampleSetupError(
                    f"workspace {target} was set up for {stored.describe()}, not "
                    f"{size.describe()}; use another folder, or the same size"
                )
            size = stored
        else:
            size = size or ExampleSize()
        wanted = [
            (name, role, path, f"example NYC taxi forecast: {role}")
            for name, role, path in RESOURCES
        ]
        wanted.append(
            ("code", "code", str(PACKAGE_DIR), "the example's Dagster code (example_project)")
        )
        for name, role, path, description in wanted:
            if name in ws.resources:
                continue
            try:
                ws.add_resource(
                    name, role, path=path, description=description, create=name != "code"
                )
            except DwsError as exc:
                raise ExampleSetupError(
                    f"cannot add the example's resource '{name}' to workspace {target}: {exc}. "
                    f"Use a new folder for the example (set {ENV_VAR}, or pass another DIR)"
                ) from None
        if not settings.is_file():  # before any data lands: the data's size is never unknown
            atomic_write_json(settings, size.to_json())
        source = ws.local_path("source-data")
        landed = land(
            source / TRIPS_SUBPATH,
            source / WEATHER_SUBPATH,
            size.start,
            size.end,
            trips_per_month=size.trips_per_month,
            zones=size.zones,
            seed=size.seed,
        )
    return ExampleWorkspace(ws, size, landed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m example_project.setup_workspace",
        description="Create the example workspace and land its synthetic NYC taxi data.",
    )
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help=f"workspace folder (default: ${ENV_VAR} or {DEFAULT_ROOT})",
    )
    parser.add_argument(
        "--start",
        type=dt.date.fromisoformat,
        help=f"first day of data (default: {ExampleSize.start})",
    )
    parser.add_argument("--months", type=int, help=f"default: {ExampleSize.months}")
    parser.add_argument(
        "--days", type=int, help="a window of this many days instead of whole months"
    )
    parser.add_argument(
        "--trips-per-month", type=int, help=f"default: {ExampleSize.trips_per_month}"
    )
    parser.add_argument("--zones", type=int, help=f"default: {ExampleSize.zones}")
    args = parser.parse_args(argv)
    given = {
        name: value
        for name, value in (
            ("start", args.start),
            ("months", args.months),
            ("days", args.days),
            ("trips_per_month", args.trips_per_month),
            ("zones", args.zones),
        )
        if value is not None
    }
    try:
        # No size given: the workspace's own (example.json), or the default for a new one.
        size = ExampleSize(**given) if given else None
        example = ensure_workspace(args.directory, size)
    except DwsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"workspace {example.root}: {example.size.describe()}; landed "
        f"{example.landed.trip_files} trip file(s) ({example.landed.trips:,} trips) and "
        f"{example.landed.weather_files} weather file(s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
