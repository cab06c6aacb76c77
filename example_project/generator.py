"""Deterministic synthetic NYC TLC yellow-taxi trips and daily weather, landed as TLC does.

Real TLC files are large downloads; the example needs data that looks and behaves like them
(the public schema, real pickup zones, daily and weekly seasonality, airport trips and fares,
the usual dirty rows) and is the same on every machine, so lineage versions and metrics are
reproducible. Only the standard library is used: the project's environment has no pyarrow, so
each month is landed as `yellow_tripdata_YYYY-MM.csv` (TLC's name, CSV instead of Parquet) and
the staging asset gives it TLC's Parquet types (`TLC_SCHEMA`).
"""

from __future__ import annotations

import bisect
import calendar
import csv
import datetime as dt
import math
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: Columns and types of TLC's yellow-trip Parquet files (2024 schema), in file order.
TLC_SCHEMA: tuple[tuple[str, str], ...] = (
    ("VendorID", "int"),
    ("tpep_pickup_datetime", "timestamp"),
    ("tpep_dropoff_datetime", "timestamp"),
    ("passenger_count", "bigint"),
    ("trip_distance", "double"),
    ("RatecodeID", "bigint"),
    ("store_and_fwd_flag", "string"),
    ("PULocationID", "int"),
    ("DOLocationID", "int"),
    ("payment_type", "bigint"),
    ("fare_amount", "double"),
    ("extra", "double"),
    ("mta_tax", "double"),
    ("tip_amount", "double"),
    ("tolls_amount", "double"),
    ("improvement_surcharge", "double"),
    ("total_amount", "double"),
    ("congestion_surcharge", "double"),
    ("Airport_fee", "double"),
)
TLC_COLUMNS = tuple(name for name, _ in TLC_SCHEMA)
WEATHER_SCHEMA: tuple[tuple[str, str], ...] = (
    ("date", "date"),
    ("temperature_c", "double"),
    ("precipitation_mm", "double"),
)
WEATHER_COLUMNS = tuple(name for name, _ in WEATHER_SCHEMA)

#: Real TLC LocationIDs of the busiest yellow-taxi pickup zones, most popular first.
ZONES: tuple[tuple[int, str], ...] = (
    (237, "Upper East Side South"),
    (161, "Midtown Center"),
    (236, "Upper East Side North"),
    (132, "JFK Airport"),
    (162, "Midtown East"),
    (230, "Times Sq/Theatre District"),
    (186, "Penn Station/Madison Sq West"),
    (142, "Lincoln Square East"),
    (170, "Murray Hill"),
    (138, "LaGuardia Airport"),
    (163, "Midtown North"),
    (239, "Upper West Side South"),
    (141, "Lenox Hill West"),
    (48, "Clinton East"),
    (68, "East Chelsea"),
    (234, "Union Sq"),
    (79, "East Village"),
    (107, "Gramercy"),
    (100, "Garment District"),
    (140, "Lenox Hill East"),
    (164, "Midtown South"),
    (238, "Upper West Side North"),
    (263, "Yorkville West"),
    (262, "Yorkville East"),
    (90, "Flatiron"),
    (249, "West Village"),
    (113, "Greenwich Village North"),
    (43, "Central Park"),
    (229, "Sutton Place/Turtle Bay North"),
    (246, "West Chelsea/Hudson Yards"),
    (233, "UN/Turtle Bay South"),
    (137, "Kips Bay"),
    (143, "Lincoln Square West"),
    (50, "Clinton West"),
    (114, "Greenwich Village South"),
    (75, "East Harlem South"),
    (148, "Lower East Side"),
    (158, "Meatpacking/West Village West"),
    (87, "Financial District North"),
    (231, "TriBeCa/Civic Center"),
    (211, "SoHo"),
    (13, "Battery Park City"),
    (24, "Bloomingdale"),
    (151, "Manhattan Valley"),
    (166, "Morningside Heights"),
    (41, "Central Harlem"),
    (74, "East Harlem North"),
    (125, "Hudson Sq"),
    (144, "Little Italy/NoLiTa"),
    (4, "Alphabet City"),
    (45, "Chinatown"),
    (261, "World Trade Center"),
    (88, "Financial District South"),
    (209, "Seaport"),
    (1, "Newark Airport"),
)
AIRPORTS = {1, 132, 138}
#: Manhattan south of 96th Street: trips there pay the congestion surcharge.
NORTH_OF_96TH = {24, 41, 74, 75, 151, 166, 1, 132, 138}

#: Share of a weekday's rides by hour of day (NYC yellow taxis, rounded).
_WEEKDAY_HOURS = (
    2.2,
    1.3,
    0.8,
    0.6,
    0.6,
    0.9,
    2.1,
    3.6,
    4.6,
    4.7,
    4.6,
    4.8,
    5.0,
    5.1,
    5.4,
    5.6,
    5.5,
    6.2,
    6.8,
    6.3,
    5.5,
    5.3,
    4.9,
    3.7,
)
_WEEKEND_HOURS = (
    4.6,
    3.8,
    2.8,
    1.9,
    1.2,
    0.9,
    1.0,
    1.4,
    2.3,
    3.3,
    4.3,
    5.0,
    5.4,
    5.6,
    5.7,
    5.7,
    5.6,
    5.6,
    5.7,
    5.4,
    5.0,
    4.9,
    4.9,
    4.6,
)
_AIRPORT_HOURS = (
    1.5,
    0.6,
    0.2,
    0.1,
    0.2,
    0.8,
    2.5,
    4.0,
    4.8,
    5.0,
    5.1,
    5.2,
    5.3,
    5.6,
    6.0,
    6.6,
    7.0,
    7.0,
    6.6,
    6.3,
    6.0,
    5.8,
    5.2,
    3.6,
)
#: Monday first.
_WEEKDAY_FACTOR = (0.88, 0.96, 1.0, 1.05, 1.05, 0.98, 0.84)

DEFAULT_SEED = 20240101


@dataclass(frozen=True)
class Weather:
    date: dt.date
    temperature_c: float
    precipitation_mm: float


def month_starts(start: dt.date, end: dt.date) -> list[dt.date]:
    """First days of the months that [start, end) touches."""
    months, current = [], start.replace(day=1)
    while current < end:
        months.append(current)
        current = next_month(current)
    return months


def next_month(day: dt.date) -> dt.date:
    return (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)


def days_in(start: dt.date, end: dt.date) -> list[dt.date]:
    return [start + dt.timedelta(days=i) for i in range((end - start).days)]


def weather_for(day: dt.date, seed: int = DEFAULT_SEED) -> Weather:
    """One day's weather in Central Park: seasonal temperature, rain on about a third of days.

    Seeded per day, so a day's weather never depends on the window generated around it."""
    rng = random.Random(f"{seed}/weather/{day.isoformat()}")
    season = math.cos(2 * math.pi * (day.timetuple().tm_yday - 20) / 365.25)
    temperature = 12.8 - 12.0 * season + rng.gauss(0, 3.2)
    precipitation = 0.0
    if rng.random() < 0.33:
        precipitation = min(rng.expovariate(1 / 7.0), 80.0)
    return Weather(day, round(temperature, 1), round(precipitation, 1))


def rain_factor(precipitation_mm: float) -> float:
    """Rain raises taxi demand (people avoid walking and waiting for buses): +15 % at most."""
    return 1.0 + 0.15 * (1.0 - math.exp(-precipitation_mm / 6.0))


def _poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    if mean > 40:  # normal approximation: exact enough, and O(1)
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, product, count = math.exp(-mean), rng.random(), 0
    while product > limit:
        product *= rng.random()
        count += 1
    return count


def _zone_weights(zones: tuple[tuple[int, str], ...]) -> dict[tuple[bool, int], list[float]]:
    """Cumulative pickup-zone weights per (weekend, hour): Zipf-like popularity, with airports
    following their own hourly pattern."""
    popularity = [1.0 / (rank + 1) ** 0.85 for rank in range(len(zones))]
    table = {}
    for weekend in (False, True):
        city = _WEEKEND_HOURS if weekend else _WEEKDAY_HOURS
        for hour in range(24):
            weights = [
                p * (_AIRPORT_HOURS[hour] / city[hour] if zone in AIRPORTS else 1.0)
                for p, (zone, _) in zip(popularity, zones, strict=True)
            ]
            cumulative, total = [], 0.0
            for weight in weights:
                total += weight
                cumulative.append(total)
            table[(weekend, hour)] = cumulative
    return table


def _fmt(stamp: dt.datetime) -> str:
    return stamp.isoformat(sep=" ")


def _money(value: float) -> float:
    return round(value, 2)


def trip_rows(
    month: dt.date,
    start: dt.date,
    end: dt.date,
    *,
    trips_per_month: int,
    zones: int = 50,
    seed: int = DEFAULT_SEED,
) -> Iterator[list[object]]:
    """Trips picked up in `month` between `start` and `end`, as TLC rows (Python values in
    `TLC_SCHEMA` order; None where TLC has nulls). About `trips_per_month` for a whole month,
    proportionally fewer for a partial one; a few rows are dirty as in the real files."""
    chosen = ZONES[: max(1, min(zones, len(ZONES)))]
    ids = [zone for zone, _ in chosen]
    weights = _zone_weights(chosen)
    rng = random.Random(f"{seed}/trips/{month:%Y-%m}")
    month_days = calendar.monthrange(month.year, month.month)[1]
    first = max(start, month)
    last = min(end, next_month(month))
    # Expected rides per hour: the monthly total spread by weekday and hour-of-day shares.
    per_day = trips_per_month / month_days
    for day in days_in(first, last):
        weekend = day.weekday() >= 5
        hours = _WEEKEND_HOURS if weekend else _WEEKDAY_HOURS
        rain = rain_factor(weather_for(day, seed).precipitation_mm)
        day_mean = per_day * _WEEKDAY_FACTOR[day.weekday()] * rain
        midnight = dt.datetime(day.year, day.month, day.day)
        for hour in range(24):
            count = _poisson(rng, day_mean * hours[hour] / 100.0)
            cumulative = weights[(weekend, hour)]
            top = cumulative[-1]
            for _ in range(count):
                pickup_zone = ids[bisect.bisect(cumulative, rng.random() * top)]
                pickup = midnight + dt.timedelta(hours=hour, seconds=rng.randrange(3600))
                yield _trip(rng, pickup, pickup_zone, ids, hour, weekend)
    # TLC files carry a few trips from other months (meter clock errors).
    for _ in range(max(1, trips_per_month // 5000)):
        wrong = dt.datetime(month.year, month.month, 1) - dt.timedelta(hours=rng.randrange(1, 48))
        yield _trip(rng, wrong, ids[0], ids, wrong.hour, False)


def _trip(
    rng: random.Random, pickup: dt.datetime, zone: int, ids: list[int], hour: int, weekend: bool
) -> list[object]:
    airport = zone in AIRPORTS
    if airport:
        dropoff_zone = ids[min(int(rng.expovariate(1 / 8)), len(ids) - 1)]
        distance = max(0.3, rng.gauss(17.5 if zone == 132 else 10.5, 3.0))
    else:
        dropoff_zone = (
            rng.choice([132, 138])
            if rng.random() < 0.04
            else ids[min(int(rng.expovariate(1 / 10)), len(ids) - 1)]
        )
        distance = rng.lognormvariate(0.55, 0.65)
        if dropoff_zone in AIRPORTS:
            distance += 9.0
    rush = not weekend and 7 <= hour < 20
    speed = rng.uniform(6.5, 11.0) if rush else rng.uniform(10.0, 18.0)
    minutes = distance / speed * 60 + rng.uniform(1.0, 4.0)
    dropoff = pickup + dt.timedelta(seconds=round(minutes * 60))
    ratecode = 2 if {zone, dropoff_zone} & {132} and rng.random() < 0.8 else 1
    if rng.random() < 0.005:
        ratecode = 5  # negotiated fare
    fare = 70.0 if ratecode == 2 else 3.0 + 3.5 * distance + 0.35 * minutes
    extra = (1.0 if hour >= 20 or hour < 6 else 0.0) + (
        2.5 if not weekend and 16 <= hour < 20 else 0.0
    )
    tolls = 6.94 if (airport or dropoff_zone in AIRPORTS) and rng.random() < 0.45 else 0.0
    congestion = 2.5 if zone not in NORTH_OF_96TH or dropoff_zone not in NORTH_OF_96TH else 0.0
    airport_fee = 1.75 if zone in (132, 138) else 0.0
    payment = 1 if rng.random() < 0.8 else (2 if rng.random() < 0.9 else rng.choice([3, 4]))
    tip = _money(fare * rng.uniform(0.12, 0.3)) if payment == 1 else 0.0
    row: list[object] = [
        rng.choice((1, 2, 2, 2)),
        _fmt(pickup),
        _fmt(dropoff),
        min(6, max(0, int(rng.expovariate(1 / 0.5)) + 1 - (rng.random() < 0.01))),
        round(distance, 2),
        ratecode,
        "Y" if rng.random() < 0.004 else "N",
        zone,
        dropoff_zone,
        payment,
        _money(fare),
        extra,
        0.5,
        tip,
        tolls,
        1.0,
        0.0,
        congestion,
        airport_fee,
    ]
    roll = rng.random()
    if roll < 0.01:  # unknown payment: TLC leaves these fields empty
        row[3] = row[5] = row[6] = row[17] = row[18] = None
        row[9] = 0
    elif roll < 0.015:
        row[4] = 0.0  # meter not engaged
    elif roll < 0.018:  # refund / dispute: TLC records the amounts negated
        row[9] = 4
        for index in (10, 11, 12, 13, 14, 15, 17, 18):
            row[index] = -row[index]  # type: ignore[operator]
    elif roll < 0.019:
        row[2] = _fmt(pickup - dt.timedelta(minutes=rng.randrange(1, 30)))
    row[16] = _money(
        sum(v for v in row[10:16] if v is not None)  # type: ignore[misc]
        + (row[17] or 0.0)  # type: ignore[operator]
        + (row[18] or 0.0)  # type: ignore[operator]
    )
    return row


@dataclass(frozen=True)
class Landed:
    """What `land` wrote (files skipped because they were there already are not counted)."""

    trip_files: int = 0
    trips: int = 0
    weather_files: int = 0


def trip_file_name(month: dt.date) -> str:
    return f"yellow_tripdata_{month:%Y-%m}.csv"


def weather_file_name(day: dt.date) -> str:
    return f"weather_{day.isoformat()}.csv"


def _atomic_csv(
    path: Path, header: tuple[str, ...], rows: Iterator[list[object]] | list[list[object]]
) -> int:
    """Write a CSV next to `path` and rename it into place: readers (and a second process
    landing the same file) never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    count = 0
    with open(temporary, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if value is None else value for value in row])
            count += 1
    os.replace(temporary, path)
    return count


def land(
    trips_dir: Path,
    weather_dir: Path,
    start: dt.date,
    end: dt.date,
    *,
    trips_per_month: int,
    zones: int = 50,
    seed: int = DEFAULT_SEED,
    overwrite: bool = False,
) -> Landed:
    """Land one trip file per month and one weather file per day of [start, end), as files
    dropped into source data; files already there are kept unless `overwrite`."""
    trip_files = trips = weather_files = 0
    for month in month_starts(start, end):
        path = trips_dir / trip_file_name(month)
        if overwrite or not path.exists():
            trips += _atomic_csv(
                path,
                TLC_COLUMNS,
                trip_rows(
                    month, start, end, trips_per_month=trips_per_month, zones=zones, seed=seed
                ),
            )
            trip_files += 1
    for day in days_in(start, end):
        path = weather_dir / weather_file_name(day)
        if overwrite or not path.exists():
            weather = weather_for(day, seed)
            _atomic_csv(
                path,
                WEATHER_COLUMNS,
                [[weather.date.isoformat(), weather.temperature_c, weather.precipitation_mm]],
            )
            weather_files += 1
    return Landed(trip_files, trips, weather_files)
