"""Content and listing versions over real files written in tmp_path."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import orjson
import pytest
import xxhash

from dws_dagster import Workspace
from dws_dagster.errors import DataNotFoundError, DwsError
from dws_dagster.workspace import versions
from dws_dagster.workspace.data_files import stable_name
from dws_dagster.workspace.versions import (
    LISTING_PREFIX,
    MARKER_NAME,
    MARKER_SCHEME,
    content_manifest,
    content_version,
    data_size,
    effective_version,
    listing_version,
)

ROWS_A = b"id,value\n1,alpha\n2,beta\n"
ROWS_B = b"id,value\n3,gamma\n4,delta\n5,epsilon\n"


def put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def part_name(index: int, ext: str = ".snappy.parquet") -> str:
    return f"part-{index:05d}-{uuid.uuid4()}-c000{ext}"


def spark_write(folder: Path, files: dict[str, list[bytes]]) -> Path:
    """Write like Spark: per partition subfolder ('' = top) part files with fresh UUIDs, plus
    a `_SUCCESS` marker and `.part-...crc` checksums whose bytes differ on every write."""
    folder.mkdir(parents=True, exist_ok=True)
    noise = uuid.uuid4().bytes
    for sub, contents in files.items():
        target = folder / sub if sub else folder
        for index, data in enumerate(contents):
            name = part_name(index)
            put(target / name, data)
            put(target / f".{name}.crc", b"crc" + noise)
    put(folder / "_SUCCESS", noise)
    put(folder / "_committed_" / "x", noise)  # hidden bookkeeping folder
    return folder


def only_data_file(folder: Path) -> Path:
    (found,) = [p for p in folder.rglob("part-*") if p.is_file()]
    return found


# ---------------------------------------------------------------- Spark naming independence


def test_same_content_different_uuids_and_bookkeeping_same_version(tmp_path: Path) -> None:
    one = spark_write(tmp_path / "one", {"": [ROWS_A, ROWS_B]})
    two = spark_write(tmp_path / "two", {"": [ROWS_A, ROWS_B]})
    names_one = sorted(p.name for p in one.iterdir())
    names_two = sorted(p.name for p in two.iterdir())
    assert names_one != names_two  # really different file names
    assert (one / "_SUCCESS").read_bytes() != (two / "_SUCCESS").read_bytes()
    assert content_version(one) == content_version(two)


def test_same_partitioned_content_same_version(tmp_path: Path) -> None:
    layout = {
        "date=2024-01-01": [ROWS_A],
        "date=2024-01-02": [ROWS_B, ROWS_A],
        "date=2024-01-02/hour=3": [ROWS_B],
    }
    one = spark_write(tmp_path / "one", layout)
    two = spark_write(tmp_path / "two", layout)
    assert content_version(one) == content_version(two)
    entries = content_manifest(one)
    assert sorted(e.relpath.split("/")[0] for e in entries) == [
        "date=2024-01-01",
        "date=2024-01-02",
        "date=2024-01-02",
        "date=2024-01-02",
    ]


def test_bookkeeping_files_do_not_count(tmp_path: Path) -> None:
    folder = spark_write(tmp_path / "out", {"date=1": [ROWS_A]})
    before = content_version(folder)
    put(folder / "_SUCCESS", b"something else entirely")
    put(folder / "date=1" / "_metadata", b"meta")
    put(folder / ".hidden", b"x")
    put(folder / "date=1" / "extra.crc", b"checksum")
    put(folder / "_temporary" / "0" / part_name(0), ROWS_B)
    put(folder / ".staging" / "data.csv", ROWS_B)
    assert content_version(folder) == before
    assert data_size(folder) == len(ROWS_A)


# ---------------------------------------------------------------------- changes are detected


def test_every_single_byte_change_changes_version(tmp_path: Path) -> None:
    folder = spark_write(tmp_path / "out", {"": [ROWS_A]})
    target = only_data_file(folder)
    original = target.read_bytes()
    base = content_version(folder)
    seen = {base}
    for position in range(len(original)):
        changed = bytearray(original)
        changed[position] ^= 0x01
        target.write_bytes(bytes(changed))
        seen.add(content_version(folder))
    assert len(seen) == len(original) + 1  # all distinct, and distinct from the original
    target.write_bytes(original)
    assert content_version(folder) == base


def test_same_size_same_mtime_change_is_detected(tmp_path: Path) -> None:
    folder = spark_write(tmp_path / "out", {"": [ROWS_A]})
    target = only_data_file(folder)
    stat = target.stat()
    before = content_version(folder)
    target.write_bytes(ROWS_A.replace(b"alpha", b"ALPHA"))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert target.stat().st_size == stat.st_size
    assert target.stat().st_mtime_ns == stat.st_mtime_ns
    assert content_version(folder) != before


def test_swapping_bytes_within_file_changes_version(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    target = put(folder / "data.csv", b"ab")
    before = content_version(folder)
    target.write_bytes(b"ba")
    assert content_version(folder) != before


def test_renaming_partition_folder_changes_version(tmp_path: Path) -> None:
    folder = spark_write(
        tmp_path / "out", {"date=2024-01-01": [ROWS_A], "date=2024-01-02": [ROWS_B]}
    )
    before = content_version(folder)
    (folder / "date=2024-01-01").rename(folder / "date=2024-01-03")
    assert content_version(folder) != before
    (folder / "date=2024-01-03").rename(folder / "date=2024-01-01")
    assert content_version(folder) == before


def test_moving_file_between_partitions_changes_version(tmp_path: Path) -> None:
    folder = spark_write(tmp_path / "out", {"date=1": [ROWS_A, ROWS_B], "date=2": [ROWS_A]})
    before = content_version(folder)
    moving = next(
        p
        for p in (folder / "date=1").iterdir()
        if p.name.startswith("part-") and p.read_bytes() == ROWS_B
    )
    moving.rename(folder / "date=2" / moving.name)
    assert content_version(folder) != before


def test_moving_file_to_top_level_changes_version(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    put(folder / "sub" / "data.csv", ROWS_A)
    before = content_version(folder)
    (folder / "sub" / "data.csv").rename(folder / "data.csv")
    assert content_version(folder) != before


def test_adding_empty_data_file_changes_version(tmp_path: Path) -> None:
    folder = spark_write(tmp_path / "out", {"": [ROWS_A]})
    before = content_version(folder)
    put(folder / part_name(1), b"")
    after_one = content_version(folder)
    assert after_one != before
    put(folder / part_name(2), b"")
    assert content_version(folder) not in (before, after_one)


def test_duplicated_part_file_changes_version(tmp_path: Path) -> None:
    """Part files lose their names in the manifest but are still counted one by one."""
    folder = spark_write(tmp_path / "out", {"": [ROWS_A]})
    before = content_version(folder)
    put(folder / part_name(1), ROWS_A)
    assert content_version(folder) != before


def test_renaming_ordinary_file_changes_version(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    put(folder / "a.csv", ROWS_A)
    before = content_version(folder)
    (folder / "a.csv").rename(folder / "b.csv")
    assert content_version(folder) != before


def test_changing_part_file_extension_changes_version(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    name = part_name(0, ".csv")
    put(folder / name, ROWS_A)
    before = content_version(folder)
    (folder / name).rename(folder / name.replace(".csv", ".json"))
    assert content_version(folder) != before


def test_adding_empty_subfolder_keeps_version(tmp_path: Path) -> None:
    """Versions cover data files; an empty folder holds none (documented by this test)."""
    folder = tmp_path / "out"
    put(folder / "a.csv", ROWS_A)
    before = content_version(folder)
    (folder / "empty").mkdir()
    assert content_version(folder) == before


# ------------------------------------------------------------------------ per-ref, portability


def test_version_is_per_subpath(ws: Workspace) -> None:
    inter = ws.resource_root("inter")
    spark_write(inter / "a", {"": [ROWS_A]})
    spark_write(inter / "b", {"": [ROWS_B]})
    a1, b1, root1 = ws.version_of("inter/a"), ws.version_of("inter/b"), ws.version_of("inter")
    assert len({a1, b1, root1}) == 3
    put(only_data_file(inter / "a"), ROWS_A + b"3,gamma\n")
    a2, b2, root2 = ws.version_of("inter/a"), ws.version_of("inter/b"), ws.version_of("inter")
    assert a2 != a1
    assert root2 != root1
    assert b2 == b1
    # the ref's version is the content version of its folder
    assert a2 == content_version(inter / "a")


def test_same_content_in_two_workspaces_same_version(tmp_path: Path) -> None:
    versions = []
    for place in ("first/deeply/nested", "second"):
        workspace = Workspace.init(tmp_path / place / "ws")
        workspace.add_resource("inter", "intermediate-data", path=f"elsewhere/{place}")
        spark_write(workspace.resource_root("inter") / "t", {"k=1": [ROWS_A], "k=2": [ROWS_B]})
        versions.append((workspace.version_of("inter/t"), workspace.version_of("inter")))
    assert versions[0] == versions[1]
    assert versions[0][0] != versions[0][1]  # 'inter' root holds 't/...': different manifest


def test_same_content_at_different_paths_same_version(tmp_path: Path) -> None:
    put(tmp_path / "x" / "one" / "d" / "f.csv", ROWS_A)
    put(tmp_path / "y" / "two" / "d" / "f.csv", ROWS_A)
    assert content_version(tmp_path / "x" / "one") == content_version(tmp_path / "y" / "two")
    assert content_version(str(tmp_path / "x" / "one")) == content_version(tmp_path / "y/two")


def test_single_file_vs_folder_with_that_file(tmp_path: Path) -> None:
    single = put(tmp_path / "single.csv", ROWS_A)
    folder = tmp_path / "folder"
    put(folder / "single.csv", ROWS_A)
    assert content_version(single) != content_version(folder)
    # a single file's version depends on its bytes
    other = put(tmp_path / "other.csv", ROWS_B)
    assert content_version(single) != content_version(other)
    assert content_version(single) == content_version(put(tmp_path / "z" / "copy", ROWS_A))


def test_empty_folder_has_a_version(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    version = content_version(tmp_path / "empty")
    assert isinstance(version, str)
    assert len(version) == 32
    int(version, 16)
    put(tmp_path / "empty" / "data.csv", b"")
    assert content_version(tmp_path / "empty") != version
    assert content_version(put(tmp_path / "empty_file", b"")) != version


def test_missing_path_raises_data_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "data"
    with pytest.raises(DataNotFoundError) as info:
        content_version(missing)
    assert str(missing) in str(info.value)
    assert isinstance(info.value, DwsError)
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(DataNotFoundError, match="nope"):
        listing_version(missing)


def test_workspace_missing_ref_raises_data_not_found(ws: Workspace) -> None:
    with pytest.raises(DataNotFoundError) as info:
        ws.version_of("inter/not/there")
    message = str(info.value)
    assert "inter/not/there" in message
    assert str(ws.resource_root("inter") / "not" / "there") in message
    assert isinstance(info.value, DwsError)


# ------------------------------------------------------------------------------- stable_name

UID = "0b6f4f52-2c1e-4a55-9a3b-6f8d2b1c3e4f"


@pytest.mark.parametrize(
    ("name", "stable"),
    [
        (f"part-00000-{UID}-c000.snappy.parquet", "part-*.snappy.parquet"),
        (f"part-00007-{UID}-c000.snappy.parquet", "part-*.snappy.parquet"),
        (f"part-00000-{UID}.csv", "part-*.csv"),
        (f"part-00003-{UID}_00001.c000.json", "part-*.json"),
        (f"part-00000-{UID}-c001.csv.gz", "part-*.csv.gz"),
        (f"part-123456-{UID}-c000.orc", "part-*.orc"),
        (f"part-00000-{UID}-c000", "part-*"),
        (f"part-00000-{UID}", "part-*"),
    ],
)
def test_stable_name_strips_spark_uuid_and_number(name: str, stable: str) -> None:
    assert stable_name(name) == stable


@pytest.mark.parametrize(
    "name",
    [
        "data.csv",
        "part-0.csv",
        "part-00000",
        "part-r-00000",
        "part-00000.csv",
        "part-00000-notauuid.csv",
        f"part-0000-{UID}.csv",
        f"xpart-00000-{UID}.csv",
        f"part-00000-{UID.upper()}.csv",
        f"part-00000-{UID[:-1]}.csv",
        "results.json",
        f"{UID}.csv",
    ],
)
def test_stable_name_leaves_ordinary_names_alone(name: str) -> None:
    assert stable_name(name) == name


def test_stable_names_make_versions_uuid_free_for_all_variants(tmp_path: Path) -> None:
    versions = set()
    for _ in range(2):
        folder = tmp_path / uuid.uuid4().hex
        put(folder / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet", ROWS_A)
        put(folder / f"part-00001-{uuid.uuid4()}.csv", ROWS_B)
        put(folder / f"part-00003-{uuid.uuid4()}_00001.c000.json", ROWS_A)
        versions.add(content_version(folder))
    assert len(versions) == 1


# ---------------------------------------------------------------------- results and snapshots


def test_results_root_ignores_snapshots_folder(ws: Workspace) -> None:
    results = ws.resource_root("results")
    put(results / "exp" / "results.json", b'{"accuracy": 0.9}')
    before = ws.version_of("results")
    put(results / "snapshots" / "x" / "file", b"snapshot copy")
    put(results / "snapshots" / "results.json", b'{"accuracy": 0.5}')
    assert ws.version_of("results") == before
    put(results / "other.json", b"{}")
    after = ws.version_of("results")
    assert after != before
    # only the top-level snapshots/ is special: a nested one is data
    put(results / "exp" / "snapshots" / "y", b"data")
    assert ws.version_of("results") != after
    assert ws.version_of("results/exp") == content_version(results / "exp")


def test_snapshots_folder_counts_in_non_results_resources(ws: Workspace) -> None:
    inter = ws.resource_root("inter")
    put(inter / "t" / "a.csv", ROWS_A)
    before = ws.version_of("inter")
    put(inter / "snapshots" / "x" / "file", b"data")
    assert ws.version_of("inter") != before


# ------------------------------------------------------------------------------ listing mode


def test_listing_version_tracks_names_sizes_mtimes(tmp_path: Path) -> None:
    """By design a listing version reads no bytes: rewriting identical bytes with a new mtime
    gives a new listing version (while the content version stays the same)."""
    folder = tmp_path / "out"
    target = put(folder / "date=1" / "data.csv", ROWS_A)
    put(folder / "_SUCCESS", b"")
    fixed = 1_700_000_000_000_000_000
    os.utime(target, ns=(fixed, fixed))
    first = listing_version(folder)
    assert first.startswith(LISTING_PREFIX)
    assert len(first) == len(LISTING_PREFIX) + 32
    assert listing_version(folder) == first  # stable when nothing changes
    content_before = content_version(folder)

    target.write_bytes(ROWS_A)  # same bytes, new mtime
    os.utime(target, ns=(fixed + 1_000_000_000, fixed + 1_000_000_000))
    assert listing_version(folder) != first
    assert content_version(folder) == content_before

    os.utime(target, ns=(fixed, fixed))
    assert listing_version(folder) == first

    put(folder / "_SUCCESS", b"bookkeeping changes are ignored here too")
    put(folder / ".x.crc", b"")
    assert listing_version(folder) == first

    target.write_bytes(ROWS_A + b"x")  # size change, mtime restored
    os.utime(target, ns=(fixed, fixed))
    assert listing_version(folder) != first


def test_listing_version_sees_renames(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    target = put(folder / "a.csv", ROWS_A)
    before = listing_version(folder)
    target.rename(folder / "b.csv")
    assert listing_version(folder) != before
    assert not content_version(folder).startswith(LISTING_PREFIX)


def test_workspace_listing_resource_uses_listing_version(ws: Workspace) -> None:
    ws.add_resource("lst", "intermediate-data", path="data/lst", versioning="listing")
    reopened = Workspace.open(ws.root)
    assert reopened.resource("lst").versioning == "listing"
    target = put(reopened.resource_root("lst") / "t" / "data.csv", ROWS_A)
    version = reopened.version_of("lst/t")
    assert version.startswith(LISTING_PREFIX)
    assert version == listing_version(reopened.resource_root("lst") / "t")
    stat = target.stat()
    target.write_bytes(ROWS_A)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert reopened.version_of("lst/t") != version
    # content resources are not affected
    put(reopened.resource_root("inter") / "t" / "data.csv", ROWS_A)
    assert not reopened.version_of("inter/t").startswith(LISTING_PREFIX)


# ------------------------------------------------------------------------- progress and size


def test_progress_receives_exactly_the_data_bytes(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    big = os.urandom(3 * (1 << 20) + 12345)
    put(folder / "date=1" / part_name(0), big)
    put(folder / "date=2" / part_name(0), ROWS_A)
    put(folder / "empty.csv", b"")
    put(folder / "_SUCCESS", b"x" * 5000)
    put(folder / f".{part_name(0)}.crc", b"y" * 7000)
    put(folder / "_temporary" / "junk", b"z" * 9000)
    calls: list[int] = []
    version = content_version(folder, progress=calls.append)
    assert sum(calls) == len(big) + len(ROWS_A)
    assert sum(calls) == data_size(folder)
    assert len(calls) >= 5  # the big file is reported chunk by chunk
    assert all(count > 0 for count in calls)
    assert version == content_version(folder)


def test_workspace_version_of_passes_progress(ws: Workspace) -> None:
    put(ws.resource_root("src") / "in" / "a.csv", ROWS_A)
    put(ws.resource_root("src") / "in" / "_SUCCESS", b"ignored")
    calls: list[int] = []
    ws.version_of("src/in", progress=calls.append)
    assert sum(calls) == len(ROWS_A)


def test_large_file(tmp_path: Path) -> None:
    size = 40 * (1 << 20) + 3  # not a multiple of the read chunk
    target = tmp_path / "big" / "data.bin"
    target.parent.mkdir()
    block = os.urandom(1 << 20)
    with open(target, "wb") as handle:
        for _ in range(40):
            handle.write(block)
        handle.write(b"end")
    assert target.stat().st_size == size
    first = content_version(target.parent)
    assert content_version(target.parent) == first
    copy = tmp_path / "copy" / "data.bin"
    copy.parent.mkdir()
    shutil.copyfile(target, copy)
    assert content_version(copy.parent) == first
    with open(target, "r+b") as handle:
        handle.seek(-1, os.SEEK_END)
        last = handle.read(1)
        handle.seek(-1, os.SEEK_END)
        handle.write(bytes([last[0] ^ 0xFF]))
    assert target.stat().st_size == size
    assert content_version(target.parent) != first
    # a change in the first block is seen too
    with open(copy, "r+b") as handle:
        handle.write(b"\x00" if block[0] else b"\x01")
    assert content_version(copy.parent) not in (first, content_version(target.parent))


# ------------------------------------------------------------------------------ file names


def test_non_utf8_file_name_gets_a_version(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    try:
        with open(os.path.join(os.fsencode(folder), b"data-\xff.csv"), "wb") as handle:
            handle.write(ROWS_A)
    except OSError:
        pytest.skip("filesystem refuses non-UTF-8 names")
    version = content_version(folder)
    put(folder / "data-2.csv", ROWS_A)
    assert content_version(folder) != version
    assert listing_version(folder).startswith(LISTING_PREFIX)


# ------------------------------------------------------------------ the format is pinned


def build_golden_tree(root: Path) -> Path:
    """Every kind of entry a version walk meets: Spark part files, an empty file, a file of
    several read chunks, partition and nested folders, a non-UTF-8 name, a symlinked file
    (followed), a symlinked folder (not entered) and bookkeeping files (skipped)."""
    folder = root / "golden"
    put(folder / "a.csv", ROWS_A)
    put(
        folder / "part-00000-0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9-c000.snappy.parquet",
        b"PAR1" * 1000,
    )
    put(folder / "empty.csv", b"")
    big = bytearray()
    block = bytes(range(256))
    while len(big) < 3 * (1 << 20) + 17:
        big += block[len(big) % 251 :] + block[: len(big) % 251]
    put(folder / "big.bin", bytes(big[: 3 * (1 << 20) + 17]))
    put(
        folder / "date=2024-01-01" / "part-00001-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee.csv",
        b"x,y\n1,2\n",
    )
    put(folder / "x" / "y" / "z.txt", b"deep\n")
    try:
        (folder / os.fsdecode(b"caf\xe9.csv")).write_bytes(b"non-utf8 name\n")
        os.symlink("a.csv", folder / "link.csv")
        os.symlink("x", folder / "linkdir")
    except OSError:
        pytest.skip("filesystem refuses non-UTF-8 names or symlinks")
    put(folder / "_SUCCESS", b"")
    put(folder / ".part-00000.crc", b"crc")
    put(folder / "extra.crc", b"crc")
    put(folder / ".hidden" / "h.csv", b"hidden")
    put(folder / "_temporary" / "0" / "part-00000.csv", b"tmp")
    return folder


def test_versions_are_those_of_the_released_format(tmp_path: Path) -> None:
    """Versions recorded by earlier releases must keep matching the same data: these values
    were computed by the first implementation (before the walk and the reads were made
    faster); any change to what is hashed, or how, fails here."""
    folder = build_golden_tree(tmp_path)
    assert content_version(folder) == "1d1e2296d76bb7d08b9bde6fd3b7c425"
    assert effective_version(folder) == "1d1e2296d76bb7d08b9bde6fd3b7c425"
    assert content_version(folder / "big.bin") == "11cf78ee856f5ec315cd6a11702a014c"
    assert effective_version(folder / "big.bin") == "11cf78ee856f5ec315cd6a11702a014c"
    assert content_version(folder, exclude_top=("x", "a.csv")) == "d338c254d5a141f88710603f6309e5b5"
    assert data_size(folder) == 3149820
    assert [(e.relpath, e.size) for e in content_manifest(folder)] == [
        ("a.csv", 24),
        ("big.bin", 3145745),
        ("caf\udce9.csv", 14),
        ("empty.csv", 0),
        ("link.csv", 24),
        ("part-00000-0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9-c000.snappy.parquet", 4000),
        ("date=2024-01-01/part-00001-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee.csv", 8),
        ("x/y/z.txt", 5),
    ]
    # results.json counts without a marker; beside a marker it describes the data
    put(folder / "results.json", b'{"m":1}')
    assert effective_version(folder) == "ee32413246b6963dbf08d03f31cf64a9"
    marker = {
        "format": 1,
        "scheme": MARKER_SCHEME,
        "version": "logical-v",
        "content": "1d1e2296d76bb7d08b9bde6fd3b7c425",
    }
    put(folder / MARKER_NAME, orjson.dumps(marker))
    assert effective_version(folder) == "logical-v"
    put(folder / MARKER_NAME, orjson.dumps({**marker, "content": "stale"}))
    assert effective_version(folder) == "1d1e2296d76bb7d08b9bde6fd3b7c425"


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (5 << 19) + 3])
def test_file_digest_is_xxh3_of_its_bytes_whatever_its_size(tmp_path: Path, size: int) -> None:
    """One-shot hashing of small files and chunked hashing of big ones give the same digest."""
    data = os.urandom(size)
    target = put(tmp_path / "data.bin", data)
    calls: list[int] = []
    assert versions.hash_file(target, progress=calls.append) == xxhash.xxh3_128_hexdigest(data)
    assert sum(calls) == size and all(0 < c <= 1 << 20 for c in calls)


def test_marker_that_is_not_a_file_is_no_marker(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    put(folder / "a.csv", ROWS_A)
    put(folder / "results.json", b"{}")
    before = effective_version(folder)
    (folder / MARKER_NAME).mkdir()
    assert effective_version(folder) == before


def test_special_file_has_no_version(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    try:
        os.mkfifo(fifo)
    except (AttributeError, OSError):
        pytest.skip("no FIFOs here")
    with pytest.raises(DataNotFoundError):
        content_version(fifo)


def test_unreadable_subfolder_is_skipped_as_before(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    folder = tmp_path / "out"
    put(folder / "a.csv", ROWS_A)
    before = content_version(folder)
    put(folder / "locked" / "b.csv", ROWS_B)
    (folder / "locked").chmod(0)
    try:
        assert content_version(folder) == before
    finally:
        (folder / "locked").chmod(0o755)
