"""The workspace: its root and `.dataworkspace/` layout, the resources it defines
(`resources.json`, each a `resources.Resource`), and path <-> ref resolution."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from filelock import FileLock

from dws_dagster.errors import (
    DataNotFoundError,
    InvalidResourceRefError,
    RemoteDataError,
    UnknownResourceError,
    WorkspaceConfigError,
    WorkspaceNotFoundError,
)
from dws_dagster.workspace import formats
from dws_dagster.workspace.data_files import SkipReporter
from dws_dagster.workspace.files import atomic_write_json, read_json_file, writing
from dws_dagster.workspace.refs import ResourceRef, as_ref
from dws_dagster.workspace.resources import Resource, check_local_root, make_resource
from dws_dagster.workspace.trees import make_folders
from dws_dagster.workspace.versions import effective_version, listing_version

if TYPE_CHECKING:
    from dws_dagster.store.lineage_store import LineageStore
    from dws_dagster.store.settings import StoreSettings

WORKSPACE_DIR = ".dataworkspace"
CONFIG_FORMAT = 1
#: Inside a results resource this folder holds the per-snapshot copies of results.
RESULTS_SNAPSHOT_DIR = "snapshots"
#: In `.dataworkspace/` while a restore swaps data in (see restore.py): its presence is what
#: commands check, cheaply, before loading the code that finishes an interrupted restore.
RESTORE_INTENT_FILE = "restore-in-progress.json"


@dataclass
class Workspace:
    """A Data Workspace: a root folder with `.dataworkspace/` and its named resources.

    Examples:
        .. code-block:: python

            from dws_dagster import Workspace

            ws = Workspace.init("forecast")  # .dataworkspace/, lineage in SQLite there
            ws.add_resource("source-data", "source-data", path="data/source")
            ws.add_resource("intermediate-data", "intermediate-data", path="data/intermediate")
            ws = Workspace.open("forecast/data")  # the nearest workspace at or above a folder
            print(ws.version_of("source-data"))  # the content version of its data now
            state = ws.store.get("intermediate-data/hourly_actuals")  # its lineage; None: none yet
    """

    root: Path
    name: str
    resources: dict[str, Resource] = field(default_factory=dict)
    #: The `store` entry of config.json (None: the default SQLite store), see db/settings.py.
    store_config: Any = field(default=None, repr=False, compare=False)
    #: A replay's scratch workspace: {"snapshot": hash, "root": the replayed workspace's root}
    #: (`replay_of` in config.json); None for every other workspace.
    replay_of: dict[str, str] | None = field(default=None, compare=False)
    _store: LineageStore | None = field(default=None, repr=False, compare=False)
    _store_settings: StoreSettings | None = field(default=None, repr=False, compare=False)
    #: resource_root by resource: restoring or versioning many refs asks for it per ref
    _roots: dict[Resource, Path] = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ opening

    @property
    def meta_dir(self) -> Path:
        return self.root / WORKSPACE_DIR

    @classmethod
    def init(
        cls,
        directory: str | os.PathLike[str] = ".",
        *,
        name: str | None = None,
        exist_ok: bool = False,
        store: dict[str, Any] | None = None,
        replay_of: dict[str, str] | None = None,
    ) -> Workspace:
        """Create `.dataworkspace/` in `directory` (created if needed) and open it.

        `store`: the `store` entry of config.json (`db.settings.store_entry`), for a
        PostgreSQL store; without it the lineage goes to SQLite in `.dataworkspace/`."""
        root = Path(directory).absolute()
        meta = root / WORKSPACE_DIR
        if (meta / "config.json").exists():
            if exist_ok:
                return cls.open(root)
            raise WorkspaceConfigError(
                f"{root} is already a workspace ({meta} exists); open it instead"
            )
        ws_name = name or root.name or "workspace"
        if not ws_name.isprintable():  # it is stored as JSON text and printed
            raise WorkspaceConfigError(
                f"workspace name {ws_name!r} holds characters that are not printable text (a "
                "folder name that is not UTF-8?): choose a name with --name"
            )
        with writing(root, action="create the workspace folder"):
            root.mkdir(parents=True, exist_ok=True)
            meta.mkdir(exist_ok=True)
        atomic_write_json(meta / "resources.json", {"format": CONFIG_FORMAT, "resources": []})
        config: dict[str, Any] = {"format": CONFIG_FORMAT, "name": ws_name}
        if store is not None:
            config["store"] = store
        if replay_of is not None:
            config["replay_of"] = dict(replay_of)
        atomic_write_json(meta / "config.json", config)
        return cls.open(root)

    @classmethod
    def find_root(cls, start: str | os.PathLike[str] | None = None) -> Path:
        """The nearest folder at or above `start` (default: the current one) holding a workspace."""
        here = Path(start if start is not None else os.getcwd()).absolute()
        for candidate in (here, *here.parents):
            if (candidate / WORKSPACE_DIR / "config.json").is_file():
                return candidate
        raise WorkspaceNotFoundError(
            f"no {WORKSPACE_DIR}/ found at or above {here}: run 'dws-dagster init' there, "
            "or pass --workspace DIR"
        )

    @classmethod
    def open(
        cls, directory: str | os.PathLike[str] | None = None, *, search_parents: bool = True
    ) -> Workspace:
        """Open the workspace at `directory` (or the nearest one above it)."""
        if search_parents:
            root = cls.find_root(directory)
        else:
            root = Path(directory or ".").absolute()
            if not (root / WORKSPACE_DIR / "config.json").is_file():
                raise WorkspaceNotFoundError(
                    f"{root} is not a workspace (no {WORKSPACE_DIR}/config.json): "
                    "run 'dws-dagster init' there"
                )
        config_path = root / WORKSPACE_DIR / "config.json"
        config = formats.check(
            formats.CONFIG,
            _format_checked(read_json_file(config_path, what="workspace config"), config_path),
            config_path,
        )
        ws = cls(
            root=root,
            name=str(config.get("name") or root.name),
            store_config=config.get("store"),
            replay_of=config.get("replay_of"),
        )
        ws.resources = ws._load_resources()
        return ws

    def _load_resources(self) -> dict[str, Resource]:
        path = self.meta_dir / "resources.json"
        data = formats.check(
            formats.RESOURCES,
            _format_checked(read_json_file(path, what="resources file"), path),
            path,
        )
        resources: dict[str, Resource] = {}
        for item in data["resources"]:
            resource = Resource.from_json(item, source=path)
            if resource.name in resources:
                raise WorkspaceConfigError(
                    f"{path}: resource '{resource.name}' is defined twice; remove one"
                )
            if resource.path is not None:  # a file:// URI was checked with its resource
                try:
                    check_local_root(resource.name, str(self.root / resource.path))
                except WorkspaceConfigError as exc:
                    raise WorkspaceConfigError(f"{path}: {exc}") from None
            if resource.is_local:
                self._check_apart_from_meta(resource, path)
            resources[resource.name] = resource
        return resources

    def _check_apart_from_meta(self, resource: Resource, source: Path | None = None) -> None:
        """A local resource may neither hold `.dataworkspace/` nor lie inside it: restoring
        its data would move the workspace's own files, or write into them."""
        root = os.path.realpath(self.resource_root(resource))
        meta = os.path.realpath(self.meta_dir)
        if _path_within(meta, root) or _path_within(root, meta):
            raise WorkspaceConfigError(
                f"{f'{source}: ' if source else ''}resource '{resource.name}' at "
                f"{resource.location!r} would contain or lie inside {WORKSPACE_DIR}/; give it "
                "its own folder"
            )

    def _config_lock(self) -> FileLock:
        return FileLock(str(self.meta_dir / "config.lock"))

    # ---------------------------------------------------------------- resources

    def add_resource(
        self,
        name: str,
        role: str,
        *,
        path: str | os.PathLike[str] | None = None,
        uri: str | None = None,
        versioning: str = "content",
        description: str = "",
        create: bool = True,
    ) -> Resource:
        """Register a resource; a local path is stored relative to the workspace root."""
        rel_path = None
        if path is not None:
            absolute = Path(path)
            if not absolute.is_absolute():
                absolute = self.root / absolute
            rel_path = Path(os.path.relpath(os.path.normpath(absolute), self.root)).as_posix()
        resource = make_resource(
            name, role, path=rel_path, uri=uri, versioning=versioning, description=description
        )
        if rel_path is not None:
            check_local_root(name, str(self.root / rel_path))
        lock = self._config_lock()
        with writing(lock.lock_file, action="lock"):
            lock.acquire()
        try:
            self.resources = self._load_resources()
            if name in self.resources:
                raise WorkspaceConfigError(
                    f"resource '{name}' already exists in workspace {self.root}; "
                    "choose another name"
                )
            if resource.is_local:
                self._check_no_overlap(resource)
            if rel_path is not None and create:
                folder = self.resource_root(resource)
                with writing(folder, action="create the resource folder"):
                    make_folders(folder)
            resources = {**self.resources, name: resource}
            atomic_write_json(
                self.meta_dir / "resources.json",
                {
                    "format": CONFIG_FORMAT,
                    "resources": [r.to_json() for r in resources.values()],
                },
            )
            self.resources = resources
        finally:
            lock.release()
        return resource

    def _check_no_overlap(self, new: Resource) -> None:
        new_root = os.path.realpath(self.resource_root(new))
        self._check_apart_from_meta(new)
        for other in self.resources.values():
            if not other.is_local:
                continue
            other_root = os.path.realpath(self.resource_root(other))
            if _path_within(new_root, other_root) or _path_within(other_root, new_root):
                raise WorkspaceConfigError(
                    f"resource '{new.name}' at {new.location!r} overlaps resource "
                    f"'{other.name}' at {other.location!r}; resources may not nest"
                )

    def resource(self, name: str) -> Resource:
        try:
            return self.resources[name]
        except KeyError:
            known = ", ".join(sorted(self.resources)) or "none yet"
            raise UnknownResourceError(
                f"unknown resource '{name}' in workspace {self.root} (known: {known}); "
                f"add it with 'dws-dagster add {name} --role ROLE --path PATH'"
            ) from None

    def resource_root(self, resource: Resource | str) -> Path:
        """Local folder of a resource (file:// URIs included)."""
        res = self.resource(resource) if isinstance(resource, str) else resource
        found = self._roots.get(res)
        if found is not None:
            return found
        if res.uri is not None:
            if not res.uri.startswith("file://"):
                raise WorkspaceConfigError(
                    f"resource '{res.name}' is remote ({res.uri}); it has no local folder"
                )
            found = Path(urlsplit(res.uri).path)
        else:
            found = (self.root / str(res.path)).absolute()
        if self.root.is_absolute():  # else the answer depends on the working directory
            self._roots[res] = found
        return found

    # ---------------------------------------------------------------------- refs

    def check_ref(self, ref: ResourceRef | str) -> ResourceRef:
        """Validate a ref against this workspace: its resource exists, its subpath is allowed."""
        resolved = as_ref(ref)
        resource = self.resource(resolved.name)
        if resource.role == "results" and resolved.parts[:1] == (RESULTS_SNAPSHOT_DIR,):
            raise InvalidResourceRefError(
                f"ref {resolved} lies in '{RESULTS_SNAPSHOT_DIR}/', which results resource "
                f"'{resource.name}' keeps for snapshot copies; choose another subpath"
            )
        return resolved

    def ref_for_path(self, path: str | os.PathLike[str]) -> ResourceRef:
        """The ref of a local path that lies inside one of the workspace's resources."""
        target = os.path.realpath(os.path.abspath(path))
        for resource in self.resources.values():
            if not resource.is_local:
                continue
            root = os.path.realpath(self.resource_root(resource))
            if _path_within(target, root):
                relative = os.path.relpath(target, root)
                subpath = None if relative == "." else Path(relative).as_posix()
                return self.check_ref(ResourceRef(resource.name, subpath))
        raise UnknownResourceError(
            f"path {os.fspath(path)!r} is not inside any local resource of workspace "
            f"{self.root}; add its folder with 'dws-dagster add NAME --role ROLE --path PATH'"
        )

    def ref_for_location(self, location: str) -> ResourceRef | None:
        """The ref of a local path, file:// URI or remote URI inside one of the resources, or
        None when no resource holds it (data read from outside the workspace)."""
        parts = urlsplit(location)
        if parts.scheme in ("", "file") or (len(parts.scheme) == 1 and os.name == "nt"):
            path = parts.path if parts.scheme == "file" else location
            try:
                return self.ref_for_path(path)
            except (UnknownResourceError, InvalidResourceRefError):
                return None
        for resource in self.resources.values():
            if resource.uri is None or resource.is_local:
                continue
            root = resource.uri.rstrip("/")
            if location == root or location.startswith(root + "/"):
                relative = location[len(root) :].strip("/")
                try:
                    return self.check_ref(ResourceRef(resource.name, relative or None))
                except InvalidResourceRefError:
                    return None
        return None

    def local_path(self, ref: ResourceRef | str) -> Path:
        """Local filesystem path of a ref in a local resource."""
        resolved = self.check_ref(ref)
        root = self.resource_root(resolved.name)
        return root if resolved.subpath is None else root / resolved.subpath

    def check_writable(self, ref: ResourceRef | str) -> ResourceRef:
        """`check_ref`, and for a local resource: the ref must not leave its resource through a
        symlink inside it. Reading through symlinks is allowed (data linked into a source
        resource); writing through one would replace or delete files elsewhere."""
        resolved = self.check_ref(ref)
        resource = self.resource(resolved.name)
        if resolved.subpath is None or not resource.is_local:
            return resolved
        root = self.resource_root(resource)
        if not _links_below(root, resolved.subpath):
            return resolved  # no symlink on the way: the ref is inside its resource
        real_root = os.path.realpath(root)
        probe = root / resolved.subpath
        while probe != root and not os.path.lexists(probe):
            probe = probe.parent  # the deepest part of the ref that exists decides
        real = os.path.realpath(probe)
        if not _path_within(real, real_root):
            raise InvalidResourceRefError(
                f"ref {resolved} leaves resource '{resource.name}' through the symlink "
                f"{probe} (to {real}); writes do not follow symlinks out of a resource: "
                "replace the symlink with a folder, or add the real location as a resource"
            )
        return resolved

    def location(self, ref: ResourceRef | str) -> str:
        """Where a ref's data lives: a local path, or the resource URI joined with the subpath."""
        resolved = self.check_ref(ref)
        resource = self.resource(resolved.name)
        if resource.uri is not None and not resource.uri.startswith("file://"):
            if resolved.subpath is None:
                return resource.uri
            return f"{resource.uri}/{resolved.subpath}"
        return str(self.local_path(resolved))

    def version_of(
        self,
        ref: ResourceRef | str,
        *,
        at: Path | None = None,
        progress: Callable[[int], None] | None = None,
        on_skip: SkipReporter | None = None,
    ) -> str:
        """The version of a local ref's data now, by its resource's versioning mode.

        `at` versions data staged elsewhere as if it were at the ref (same rules). Files that
        are not data (pipes, sockets, devices, broken links) are skipped and reported to
        `on_skip` (default: a `SpecialFileWarning`).
        """
        resolved = self.check_ref(ref)
        resource = self.resource(resolved.name)
        if not resource.is_local:
            raise RemoteDataError(
                f"ref {resolved} lives in remote resource '{resource.name}' ({resource.uri}); "
                "its version is computed where the data is written (the Spark IO manager)"
            )
        path = self.local_path(resolved) if at is None else at
        exclude = (
            (RESULTS_SNAPSHOT_DIR,)
            if resource.role == "results" and resolved.subpath is None
            else ()
        )
        try:
            if resource.versioning == "listing":
                return listing_version(path, exclude_top=exclude, on_skip=on_skip)
            return effective_version(
                path,
                exclude_top=exclude,
                progress=progress,
                on_skip=on_skip,
                results=resource.role == "results",
            )
        except DataNotFoundError:
            raise DataNotFoundError(
                f"ref {resolved} has no data at {path}: write it first, or check the path"
            ) from None

    # --------------------------------------------------------------------- store

    @property
    def store_settings(self) -> StoreSettings:
        """Which database holds this workspace's lineage (resolved on first use)."""
        if self._store_settings is None:
            from dws_dagster.store.settings import resolve

            self._store_settings = resolve(self.meta_dir, self.store_config)
        return self._store_settings

    def use_store_url(self, url: str, *, origin: str) -> None:
        """Keep this workspace's lineage in the store at `url` (a full SQLAlchemy URL, as
        `$DWS_STORE_URL` takes it) instead of the one its configuration names; `origin` says
        where the URL came from. Before the store is first opened only."""
        from dws_dagster.store.settings import from_url

        if self._store is not None:
            raise WorkspaceConfigError(
                f"workspace {self.name}: its store is already open; give the store URL "
                "before anything reads the lineage"
            )
        self._store_settings = from_url(url, origin=origin)

    @property
    def store(self) -> LineageStore:
        """The lineage store of this workspace (opened on first use)."""
        if self._store is None:
            from dws_dagster.store.lineage_store import LineageStore

            self._store = LineageStore(self)
        return self._store


def _links_below(root: Path, subpath: str) -> bool:
    """Whether an existing part of `root/subpath` below `root` is a symlink: one `lstat` per
    part (refs have no `..`), where resolving the whole path costs one per part from `/`."""
    path = os.fspath(root)
    for part in subpath.split("/"):
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False  # nothing deeper exists
        if stat.S_ISLNK(mode):
            return True
    return False


def _path_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _format_checked(data: Any, path: Path) -> Any:
    _check_format(data, path)
    return data


def _check_format(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise WorkspaceConfigError(f"{path} must hold a JSON object; fix or restore the file")
    fmt = data.get("format")
    if fmt != CONFIG_FORMAT:
        raise WorkspaceConfigError(
            f"{path} has format {fmt!r}; this dws_dagster reads format {CONFIG_FORMAT}: "
            "upgrade dws_dagster or restore the file"
        )
