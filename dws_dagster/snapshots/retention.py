"""What a snapshot captures of the workspace's data, and how that data is kept and brought back.

A snapshot holds, beside the lineage, the data version of every ref found on disk when it was
taken: refs with lineage (drift when their data no longer has the version their record says),
source-data resources nothing observed, and code resources. Each local version is *retained*:
its files go into the object store (objects.py) and its manifest (relative path, size, hash,
modification time, mode of every file) into the store's `dws_data_versions`, so a restore can
rebuild it whoever wrote it, and `gc` frees only what no snapshot references.

Versions are computed exactly as `Workspace.version_of` does (same walk, same marker and listing
rules), with each file's hash taken from the machine's stat-keyed cache (file_hashes.py) where
the file did not change, so a snapshot reads only the bytes that changed since the last one.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import orjson
import xxhash

from dws_dagster.errors import WorkspaceConfigError
from dws_dagster.snapshots.file_hashes import FileHashCache, stamp_of
from dws_dagster.snapshots.objects import ObjectStore, Stored
from dws_dagster.workspace.data_files import (
    FileEntry,
    SkipReporter,
    data_file_entries,
    describe_special,
    file_kind,
    report_skipped,
)
from dws_dagster.workspace.definition import RESULTS_SNAPSHOT_DIR, Workspace
from dws_dagster.workspace.gitinfo import git_state
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.trees import make_folders
from dws_dagster.workspace.versions import (
    DESCRIPTION_FILES,
    LISTING_PREFIX,
    MARKER_NAME,
    hash_and_size,
    marked_version,
    untimed_entry,
    version_of_manifest,
)

#: Kinds of data a snapshot row records (see schema.snapshot_data).
LINEAGE, DRIFT, MISSING, RESOURCE, CODE, REMOTE = (
    "lineage",
    "drift",
    "missing",
    "resource",
    "code",
    "remote",
)
KINDS = (LINEAGE, DRIFT, MISSING, RESOURCE, CODE, REMOTE)
#: Roles whose resources a snapshot captures as a whole, beside the refs with lineage in them.
WHOLE_ROLES = ("source-data", "code")
#: Kinds whose version was found on local disk, and retained with the snapshot.
LOCAL_KINDS = (LINEAGE, DRIFT, RESOURCE, CODE)


class RetainedFile(NamedTuple):
    """One file of a retained version."""

    relpath: str
    size: int
    digest: str
    mtime_ns: int
    mode: int


@dataclass
class DataScan:
    """A ref's data as found now: its version (None: nothing there) and every file a restore
    must bring back (data and the sidecar files versions skip, such as Spark's markers)."""

    ref: str
    path: Path
    version: str | None
    files: list[RetainedFile] = field(default_factory=list)
    single_file: bool = False
    #: Written by the Spark IO manager (it has a marker): replaced, never rewritten in place,
    #: so its files may be hard-linked into retention.
    link: bool = False


@dataclass(frozen=True)
class DataRow:
    """What a snapshot records of one ref's data."""

    ref: str
    kind: str
    version: str | None


# ------------------------------------------------------------------------------ scan


def scan(
    ws: Workspace,
    ref: ResourceRef | str,
    hashes: FileHashCache,
    on_skip: SkipReporter | None = None,
) -> DataScan:
    """The data of local `ref` now, versioned as `ws.version_of` would version it.

    Plain strings for paths, and the marker found by the folder's own listing: a snapshot
    scans every ref, and per-ref overhead, not hashing, is then what it costs."""
    parsed = ws.check_ref(ref)
    resource = ws.resource(parsed.name)
    root = os.fspath(ws.resource_root(resource))
    where = root if parsed.subpath is None else f"{root}{os.sep}{parsed.subpath}"
    kind = file_kind(where)
    if kind not in ("file", "dir"):
        return DataScan(str(parsed), Path(where), None)
    hashes.load(where if kind == "dir" else os.path.dirname(where))
    listing = resource.versioning == "listing"
    exclude: tuple[str, ...] = (
        (RESULTS_SNAPSHOT_DIR,) if resource.role == "results" and parsed.subpath is None else ()
    )
    skipped: list[tuple[str, str]] = []
    sidecars: list[tuple[str, str]] = []
    data = data_file_entries(where, exclude, kind, skipped=skipped, sidecars=sidecars)
    marker = kind == "dir" and any(rel == MARKER_NAME for rel, _ in sidecars)
    results = resource.role == "results" and not marker
    if marker and not listing:
        # As effective_version: the description files beside Spark data are not data.
        data, described = _split(data, DESCRIPTION_FILES)
        sidecars += described
    path = Path(where)
    entries: list[FileEntry] = []
    files: list[RetainedFile] = []
    listing_lines: list[bytes] = []
    for rel, absolute in data:
        found = _hashed(absolute, hashes)
        if found is None:
            skipped.append((rel, describe_special(absolute)))
            continue
        info, digest, size = found
        entry = FileEntry(rel, size, digest)
        # As effective_version: results files are versioned without their run's timing (the
        # retained file, below, keeps its bytes).
        entries.append(untimed_entry(entry, absolute) if results else entry)
        files.append(RetainedFile(rel, size, digest, info.st_mtime_ns, stat.S_IMODE(info.st_mode)))
        if listing:
            listing_lines.append(
                os.fsencode(rel) + f"\0{info.st_size}\0{info.st_mtime_ns}\n".encode()
            )
    for rel, absolute in sidecars:
        found = _hashed(absolute, hashes)
        if found is not None:
            info, digest, size = found
            files.append(
                RetainedFile(rel, size, digest, info.st_mtime_ns, stat.S_IMODE(info.st_mode))
            )
    report_skipped(path, skipped, on_skip)
    if listing:
        version = LISTING_PREFIX + xxhash.xxh3_128_hexdigest(b"listing\n" + b"".join(listing_lines))
    else:
        version = version_of_manifest(entries, single_file=kind == "file")
        if marker:
            version = marked_version(path, version)
    files.sort()
    return DataScan(
        str(parsed), path, version, files, single_file=kind == "file", link=marker and not listing
    )


def _split(
    found: list[tuple[str, str]], names: tuple[str, ...]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    kept = [item for item in found if item[0] not in names]
    return kept, [item for item in found if item[0] in names]


def _hashed(absolute: str, hashes: FileHashCache) -> tuple[os.stat_result, str, int] | None:
    """(stat, hash, size) of a regular file, the hash from the cache while the file is
    unchanged; None when it is gone or no longer a regular file."""
    try:
        info = os.stat(absolute)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    digest = hashes.get(absolute, info)
    if digest is not None:
        return info, digest, info.st_size
    started = time.time()
    got = hash_and_size(absolute, None)
    if got is None:
        return None
    try:
        after = os.stat(absolute)
    except OSError:
        return None
    if stamp_of(after) == stamp_of(info):
        hashes.put(absolute, after, got[0], started)
    return after, got[0], got[1]


# --------------------------------------------------------------------------- capture


def capture(
    ws: Workspace,
    recorded: Iterable[tuple[str, str | None]],
    hashes: FileHashCache,
    on_skip: SkipReporter | None = None,
) -> tuple[list[DataRow], dict[str, DataScan]]:
    """The data rows of a snapshot of the workspace now: every ref with lineage (`recorded`:
    ref and the version its record says), and every source-data and code resource as a whole
    (a step that read one file of a source folder leaves the others there, and they are data
    of the workspace too; see `root_rows`). Returns the rows (sorted by ref) and the scans of
    local data, to retain."""
    rows: list[DataRow] = []
    scans: dict[str, DataScan] = {}
    with_lineage: set[str] = set()
    preload(ws, hashes)
    for ref, version in recorded:
        name = ref.split("/", 1)[0]
        with_lineage.add(ref)
        resource = ws.resources.get(name)
        if resource is None or not resource.is_local:
            rows.append(DataRow(ref, REMOTE, version))
            continue
        found = scan(ws, ref, hashes, on_skip)
        if found.version is None:
            rows.append(DataRow(ref, MISSING, None))
            continue
        scans[ref] = found
        rows.append(DataRow(ref, LINEAGE if found.version == version else DRIFT, found.version))
    for resource in ws.resources.values():
        if (
            not resource.is_local
            or resource.name in with_lineage
            or resource.role not in WHOLE_ROLES
        ):
            continue
        found = scan(ws, resource.name, hashes, on_skip)
        kind = CODE if resource.role == "code" else RESOURCE
        rows.append(DataRow(resource.name, kind, found.version))
        if found.version is not None:
            scans[resource.name] = found
    rows.sort(key=lambda row: row.ref)
    return rows, scans


def root_rows(rows: Iterable[DataRow]) -> set[str]:
    """The resources a snapshot captured as a whole (a row for the resource itself): their
    refs' data comes back with them, so a restore restores the root, not refs inside it."""
    return {row.ref for row in rows if "/" not in row.ref}


def inside(ref: str, roots: set[str]) -> bool:
    """Whether `ref` lies strictly inside one of `roots` (resource names)."""
    return "/" in ref and ref.split("/", 1)[0] in roots


def preload(ws: Workspace, hashes: FileHashCache) -> None:
    """Load the cached hashes of every local resource at once (one query each), before
    scanning many refs."""
    for resource in ws.resources.values():
        if resource.is_local:
            hashes.load(ws.resource_root(resource))


def resource_states(ws: Workspace) -> dict[str, dict[str, Any]]:
    """Each code resource's state beyond its files: git's commit and whether its folder
    differs from it (only for code in git)."""
    states: dict[str, dict[str, Any]] = {}
    for resource in ws.resources.values():
        if resource.role != "code" or not resource.is_local:
            continue
        root = ws.resource_root(resource)
        if root.is_dir():
            found = git_state(root)
            if found is not None:
                states[resource.name] = found
    return states


# ---------------------------------------------------------------------------- retain


@dataclass
class RetentionReport:
    """What retaining one snapshot's data cost."""

    versions: int = 0
    new_versions: int = 0
    files_added: int = 0
    bytes_added: int = 0
    linked: int = 0
    cloned: int = 0
    copied: int = 0


def retain(
    objects: ObjectStore,
    found: DataScan,
    hashes: FileHashCache,
    report: RetentionReport,
    added: list[Stored] | None = None,
) -> list[list[Any]]:
    """Put the files of `found` into the object store; returns the manifest's rows. Each file
    newly stored goes to `added` (what to take back if the snapshot does not go ahead)."""
    for entry in found.files:
        absolute = found.path if found.single_file else found.path / entry.relpath
        stored = objects.add(os.fspath(absolute), entry.digest, link=found.link)
        report.bytes_added += stored.added_bytes
        if stored.how == "present":
            continue
        if added is not None:
            added.append(stored)
        report.files_added += 1
        if stored.how == "hardlink":
            report.linked += 1
            # Linking made the file read-only, which moves its change time: remember its
            # hash as of now, or the next snapshot reads it again.
            try:
                hashes.put(os.fspath(absolute), os.stat(absolute), entry.digest, time.time())
            except OSError:
                pass
        elif stored.how == "reflink":
            report.cloned += 1
        else:
            report.copied += 1
    return [manifest_row(entry) for entry in found.files]


#: A manifest row's path whose name is not UTF-8 is stored as {"bytes": "<hex of the path's
#: bytes>"} (JSON text cannot hold it); every other path as text.
_BYTES_KEY = "bytes"


def manifest_row(entry: RetainedFile) -> list[Any]:
    """A retained file as its manifest row (JSON): the path as text, or, for a name that is
    not UTF-8 (bytes on POSIX, surrogate-escaped in Python), as the hex of its bytes."""
    relpath: Any = entry.relpath
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        relpath = {_BYTES_KEY: os.fsencode(entry.relpath).hex()}
    return [relpath, entry.size, entry.digest, entry.mtime_ns, entry.mode]


def _row_path(raw: Any) -> str:
    """A manifest row's path as `manifest_row` wrote it."""
    if isinstance(raw, dict):
        if set(raw) != {_BYTES_KEY} or not isinstance(raw[_BYTES_KEY], str):
            raise ValueError("not a path")
        return os.fsdecode(bytes.fromhex(raw[_BYTES_KEY]))
    return str(raw)


def manifest_files(ref: str, version: str, raw: Any) -> list[RetainedFile]:
    """The files of a retained version as stored: untrusted (the database can be edited), so
    every path must stay inside the ref, every hash name an object."""
    where = f"retained version {version[:12]} of {ref}"
    try:
        rows = orjson.loads(raw)
        files = [
            RetainedFile(_row_path(r[0]), int(r[1]), str(r[2]), int(r[3]), int(r[4])) for r in rows
        ]
    except (orjson.JSONDecodeError, TypeError, ValueError, IndexError, KeyError):
        raise WorkspaceConfigError(
            f"{where} is damaged in the workspace store (its file list is not what "
            "dws_dagster writes); delete the snapshots that hold it, or restore the store "
            "from a backup"
        ) from None
    for entry in files:
        if entry.relpath and not _safe_relpath(entry.relpath):
            raise WorkspaceConfigError(
                f"{where} names the file {entry.relpath[:80]!r}, which would lie outside the "
                "ref; nothing was changed. The store was edited: restore it from a backup"
            )
    if (len(files) == 1 and files[0].relpath == "") or all(f.relpath for f in files):
        return files
    raise WorkspaceConfigError(
        f"{where} mixes a single file with a folder's files; restore the store from a backup"
    )


def _safe_relpath(relpath: str) -> bool:
    """Whether a stored file path stays inside its ref: relative, '/'-separated, no '.' or
    '..' part. A backslash is an ordinary character of a POSIX file name (a landed `a\\b.csv`
    is retained like any file); only where the system takes it for a separator is it one."""
    if "\x00" in relpath or any(
        sep != "/" and sep in relpath for sep in (os.sep, os.altsep) if sep
    ):
        return False
    parts = PurePosixPath(relpath).parts
    return (
        bool(parts)
        and not relpath.startswith("/")
        and all(part not in ("", ".", "..") for part in parts)
        and len(parts) == len(relpath.split("/"))
    )


# ----------------------------------------------------------------------------- stage


def stage(objects: ObjectStore, files: list[RetainedFile], link: bool, staging: Path) -> None:
    """Rebuild a retained version at `staging` (which must not exist) from the objects."""
    single = len(files) == 1 and files[0].relpath == ""
    if not single:
        make_folders(staging)
    for entry in files:
        destination = staging if single else staging / entry.relpath
        objects.checkout(entry.digest, destination, link=link)
        if not link:
            os.chmod(destination, entry.mode | stat.S_IWUSR)
            os.utime(destination, ns=(entry.mtime_ns, entry.mtime_ns))


def missing_objects(objects: ObjectStore, files: list[RetainedFile]) -> list[str]:
    """Objects a retained version needs that the store no longer has."""
    return [entry.digest for entry in files if not objects.has(entry.digest)]


def describe(report: RetentionReport) -> str:
    return (
        f"{report.new_versions} new version(s), {report.files_added} file(s) added "
        f"({report.linked} linked, {report.cloned} cloned, {report.copied} copied), "
        f"{report.bytes_added} bytes"
    )
