"""Throughput of versioning a ref's files versus reading the same bytes from disk.

A source-data resource gets three refs of plain files: `many/` (many small CSV-like files),
`big/` (a few big ones) and `fresh/` (as many and as big, written in 8 KiB pieces). For each,
in the same run and alternating, the median of `--repeats`:

  raw read      every file read whole: `os.walk`, then `os.read` in 1 MiB chunks (the
                fastest plain-Python read into memory we found; no hashing)
  raw map       every file touched whole through a read-only memory map, with no copy:
                `find` of a byte the data never holds (memchr) looks at every byte
  version_of    `Workspace.version_of(ref)`: walk, hash every file (xxh3-128), hash the manifest

The baseline is whichever raw pass is faster by median, so that a way of reading that is
faster than `os.read` counts against version_of too. Each is timed *cold* — before each timed
pass every file is evicted from the page cache with posix_fadvise(DONTNEED) (files are fsynced
first, so the eviction is complete; `fincore`, when installed, confirms it), which touches
only this benchmark's files, not the shared machine's cache — and *warm* — all read from the
page cache. `fresh/` is timed warm only, as written: never evicted, so the page cache still
holds it in the small folios its small writes made (read back after an eviction, a file is
held in large folios, as `big/` is). Throughput is data bytes / second; the ratio is
version_of throughput / baseline throughput (target ≥ 0.8).

    python bench/versioning_throughput.py --many 20000 --many-kib 32 --big 4 --big-mib 256
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import xxhash

from dws_dagster.workspace.data_files import iter_data_files
from dws_dagster.workspace.definition import Workspace

_CHUNK = 1 << 20


def write_files(folder: Path, count: int, size: int, seed: int, piece: int | None = None) -> None:
    """`count` CSV-like files of `size` bytes, fsynced so that they can be evicted; written in
    pieces of up to 1.8 MB, or of `piece` bytes."""
    rng = random.Random(seed)
    pool = b"".join(
        f"2026-01-{rng.randrange(1, 29):02d} {rng.randrange(24):02d}:00:00,{rng.randrange(1, 266)},"
        f"{rng.randrange(1, 266)},{rng.randrange(1, 5)},{rng.random() * 20:.2f},"
        f"{rng.random() * 80:.2f}\n".encode()
        for _ in range(80_000)
    )
    folder.mkdir(parents=True)
    for index in range(count):
        sub = folder / f"month={index % 12 + 1:02d}" if count > 100 else folder
        sub.mkdir(exist_ok=True)
        with open(sub / f"trips_{index:06d}.csv", "wb") as handle:
            left = size
            while left:
                offset = rng.randrange(len(pool) // 2)
                data = pool[offset : offset + min(left, piece or len(pool) // 2)]
                handle.write(data)
                left -= len(data)
            handle.flush()
            os.fsync(handle.fileno())


def evict(files: list[Path]) -> None:
    """Drop these files' pages from the page cache (clean pages only: they were fsynced)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cached_bytes(files: list[Path]) -> int | None:
    """Bytes of these files in the page cache, by `fincore` (None when it is not installed)."""
    tool = shutil.which("fincore")
    if tool is None:
        return None
    total = 0
    for start in range(0, len(files), 2000):
        out = subprocess.run(
            [
                tool,
                "--bytes",
                "--noheadings",
                "--output",
                "RES",
                *map(str, files[start : start + 2000]),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        total += sum(int(value) for value in out.split())
    return total


def raw_read(folder: Path) -> int:
    """Read every file under `folder` whole, as tightly as Python can: `os.walk`, then
    `os.read` in 1 MiB chunks (cheaper than file objects); the bytes read."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                while chunk := os.read(fd, _CHUNK):
                    total += len(chunk)
            finally:
                os.close(fd)
    return total


def raw_map(folder: Path) -> int:
    """Touch every byte of every file under `folder` through a read-only memory map, with no
    copy: `find` of a NUL byte (memchr; the CSV data holds none, checked) must scan them all.
    The bytes scanned."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                if size:
                    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped:
                        if hasattr(mmap, "MADV_SEQUENTIAL"):  # as version_of does
                            mapped.madvise(mmap.MADV_SEQUENTIAL)
                        if mapped.find(b"\0") != -1:
                            raise AssertionError(f"{name} holds a NUL byte: the scan stopped")
                    total += size
            finally:
                os.close(fd)
    return total


def timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def measure(
    ws: Workspace, ref: str, folder: Path, repeats: int, cold: bool = True
) -> dict[str, float]:
    files = [path for _, path in iter_data_files(folder)]
    size = sum(path.stat().st_size for path in files)
    version = ws.version_of(ref)
    passes: dict[str, Callable[[], object]] = {
        "raw": lambda: raw_read(folder),
        "map": lambda: raw_map(folder),
        "version": lambda: ws.version_of(ref),
    }
    times: dict[str, list[float]] = {
        f"{name} {cache}": [] for cache in ("cold", "warm") for name in passes
    }
    residue = 0
    for _ in range(repeats if cold else 0):
        for name, func in passes.items():
            evict(files)
            left = cached_bytes(files)
            residue = max(residue, left or 0)
            times[f"{name} cold"].append(timed(func))
    raw_read(folder)  # warm all
    for _ in range(repeats):
        for name, func in passes.items():
            times[f"{name} warm"].append(timed(func))
    assert ws.version_of(ref) == version
    assert raw_read(folder) == raw_map(folder) == size
    times = {name: values for name, values in times.items() if values}
    median = {name: statistics.median(values) for name, values in times.items()}
    best = {name: min(values) for name, values in times.items()}
    evicted = f"at most {residue:,} B" if shutil.which("fincore") else "unchecked, no fincore"
    print(
        f"\n{ref}: {len(files):,} files, {size / 2**20:,.0f} MiB "
        f"({f'in the page cache after each eviction: {evicted}' if cold else 'warm only'})"
    )
    print(f"  {'case':14} {'median s':>9} {'MiB/s':>9} {'best s':>9} {'MiB/s':>9}")
    for name in times:
        print(
            f"  {name:14} {median[name]:9.3f} {size / 2**20 / median[name]:9.0f} "
            f"{best[name]:9.3f} {size / 2**20 / best[name]:9.0f}"
        )
    # The limit for warm data read into memory: each chunk is copied out of the page cache
    # (as the raw read does) and then hashed from the CPU cache, one after the other: time
    # the hash. Hashing from a map would skip the copy; version_of does not map (SIGBUS).
    block = os.urandom(_CHUNK)

    def hash_chunks() -> None:
        for _ in range(256):
            xxhash.xxh3_128(block).hexdigest()

    hash_speed = 256 * _CHUNK / 2**20 / min(timed(hash_chunks) for _ in range(5))
    copy_speed = size / 2**20 / median["raw warm"]
    print(
        f"  xxh3-128 of a 1 MiB chunk in the CPU cache: {hash_speed:,.0f} MiB/s, so warm "
        f"copy-then-hash can reach at most {1 / (1 + copy_speed / hash_speed):.2f}× raw read"
    )
    ratios = {}
    for cache in ("cold", "warm") if cold else ("warm",):
        base = min(("raw", "map"), key=lambda name: median[f"{name} {cache}"])
        ratio = median[f"{base} {cache}"] / median[f"version {cache}"]
        ratios[cache] = ratio
        print(
            f"  {cache}: version_of throughput = {ratio:.2f}× the baseline ({base}) by "
            f"medians, {best[f'{base} {cache}'] / best[f'version {cache}']:.2f}× by best runs; "
            f"{median[f'raw {cache}'] / median[f'version {cache}']:.2f}× raw read, "
            f"{median[f'map {cache}'] / median[f'version {cache}']:.2f}× raw map "
            "(target ≥ 0.8×)"
        )
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--many", type=int, default=20_000, help="number of small files")
    parser.add_argument("--many-kib", type=int, default=32, help="size of each small file")
    parser.add_argument("--big", type=int, default=4, help="number of big files")
    parser.add_argument("--big-mib", type=int, default=256, help="size of each big file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="where to build the workspace (default: a temp folder)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="dws-bench-versions-", dir=args.dir))
    try:
        ws = Workspace.init(tmp / "ws")
        ws.add_resource("landing", "source-data", path="landing")
        root = ws.resource_root("landing")
        start = time.perf_counter()
        write_files(root / "many", args.many, args.many_kib * 1024, seed=1)
        write_files(root / "big", args.big, args.big_mib * 2**20, seed=2)
        # Written in 8 KiB pieces (as Python's buffered writers do) and never evicted: the
        # page cache holds them in small folios, the case where hashing from a map is slower.
        write_files(root / "fresh", args.big, args.big_mib * 2**20, seed=3, piece=8192)
        print(
            f"wrote the data in {time.perf_counter() - start:.1f} s; repeats={args.repeats}, "
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
        )
        for ref in ("landing/many", "landing/big"):
            measure(ws, ref, ws.local_path(ref), args.repeats)
        measure(ws, "landing/fresh", ws.local_path("landing/fresh"), args.repeats, cold=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
