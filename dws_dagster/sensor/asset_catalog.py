"""What the lineage sensor learns about an asset from the code location's definitions: its
workspace binding, partitions, inputs and data-less deps, source code, owners, description,
tags and kinds, and what its checks say of themselves.

The sensor runs in the code location's process, so the definitions are the ones the runs used
(or the newest, for events of older runs). Each lookup is cached for the catalog's life: one
sensor tick.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any, TypeVar

from dagster import AssetCheckKey, AssetKey, TimeWindowPartitionsDefinition

from dws_dagster import metadata_keys as keys
from dws_dagster._compat import dagster as dagster_compat
from dws_dagster.assets.binding_config import RefBinding, bindings_by_asset, bound_metadata
from dws_dagster.assets.bindings import Binding, binding_from_metadata
from dws_dagster.assets.partitions import partition_key_ref
from dws_dagster.errors import DwsError
from dws_dagster.workspace.definition import Workspace
from dws_dagster.workspace.gitinfo import git_branch, git_commit, git_remote_url, git_toplevel
from dws_dagster.workspace.refs import ResourceRef

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


def _memoized(memo: dict[_Key, _Value], key: _Key, make: Callable[[_Key], _Value]) -> _Value:
    try:
        return memo[key]
    except KeyError:
        value = memo[key] = make(key)
        return value


#: Above this many upstream partitions a START event names the upstream asset's whole ref.
MAX_LISTED_PARTITIONS = 100


@dataclass(frozen=True)
class AssetCode:
    """Where an asset's function is and what it says."""

    source: str | None
    path: str | None
    git_url: str | None
    git_commit: str | None
    git_branch: str | None
    #: the repository's folder (None outside git)
    git_root: str | None = None


class AssetCatalog:
    """Asset facts from a repository definition (None: events only, no definitions)."""

    def __init__(
        self,
        ws: Workspace,
        repository_def: Any | None,
        *,
        default_resource: str | None = None,
        bindings: Sequence[RefBinding] = (),
    ) -> None:
        self.ws = ws
        self.repository_def = repository_def
        self.default_resource = default_resource
        #: assets bound by configuration (the WorkspaceComponent's YAML), by user string
        self.configured = bindings_by_asset(bindings)
        self._owned: dict[str, list[tuple[str, str | None]]] | None = None
        # Per-catalog memos (not functools caches, which would keep every tick's catalog).
        self._bindings: dict[AssetKey, Binding | None] = {}
        self._input_keys: dict[AssetKey, tuple[list[AssetKey], list[AssetKey]]] = {}
        self._codes: dict[AssetKey, AssetCode] = {}
        self._roots: dict[ResourceRef, AssetKey] | None = None
        self._bound: dict[ResourceRef, AssetKey] | None = None
        #: partition key of each upstream partition ref `input_refs` gave
        self._keys_of_refs: dict[ResourceRef, str] = {}
        self._graph = None
        if repository_def is not None:
            try:
                self._graph = repository_def.asset_graph
            except Exception:  # a repository without assets
                self._graph = None

    def node(self, key: AssetKey) -> Any | None:
        if self._graph is None or not self._graph.has(key):
            return None
        return self._graph.get(key)

    def binding(self, key: AssetKey) -> Binding | None:
        """The asset's workspace binding: its `dws_ref` metadata, else the default resource at
        its key path; None when it is not a workspace asset (or its binding is invalid)."""
        return _memoized(self._bindings, key, self._new_binding)

    def _new_binding(self, key: AssetKey) -> Binding | None:
        node = self.node(key)
        try:
            metadata = bound_metadata(
                node.metadata if node is not None else {}, key.path, self.configured
            )
        except DwsError:
            return None
        default = None
        if keys.REF not in (metadata or {}):
            name = self.default_resource
            if name is None:
                return None
            default = ResourceRef(name, "/".join(key.path))
        try:
            binding = binding_from_metadata(
                metadata, default_ref=default, what=f"asset '{key.to_user_string()}'"
            )
            self.ws.check_ref(binding.ref)
        except DwsError:
            return None
        return binding

    def ref_written_by(self, key: AssetKey, partition: str | None) -> ResourceRef | None:
        """The ref a (partition of an) asset writes: from its definition, else from the
        workspace store (the refs the asset's step claimed), for events of assets this code
        location does not define; None when neither tells."""
        binding = self.binding(key)
        if binding is None:
            return self._owned_ref(key.to_user_string(), partition)
        if partition is None:
            return binding.ref
        node = self.node(key)
        if node is None or node.partitions_def is None:
            return None
        try:
            return partition_key_ref(
                binding, node.partitions_def, partition, f"asset '{key.to_user_string()}'"
            )
        except DwsError:
            return None

    def partitioned_root(self, key: AssetKey) -> ResourceRef | None:
        """The root ref of a partitioned asset (its binding's ref, above every partition);
        None for an unpartitioned asset or one this code location does not bind."""
        node = self.node(key)
        binding = self.binding(key)
        if node is None or node.partitions_def is None or binding is None:
            return None
        return binding.ref

    def root_of(self, ref: ResourceRef) -> tuple[ResourceRef, AssetKey] | None:
        """The partitioned asset whose root holds `ref` (a partition's ref, or a folder read
        by path inside one), with that root; None when no partitioned asset's root does."""
        if self._roots is None:
            self._roots = {}
            for key in self._graph.get_all_asset_keys() if self._graph is not None else ():
                root = self.partitioned_root(key)
                if root is not None:
                    self._roots[root] = key
        if not self._roots:
            return None
        for candidate in (*reversed(ref.ancestors()), ref):
            key = self._roots.get(candidate)
            if key is not None:
                return candidate, key
        return None

    def asset_bound_to(self, ref: ResourceRef) -> AssetKey | None:
        """The asset whose data `ref` is: the one bound to it, or to the nearest folder
        holding it (a partition, data read by path inside an asset's folder); None when no
        asset of these definitions is."""
        if self._bound is None:
            self._bound = {}
            for key in self._graph.get_all_asset_keys() if self._graph is not None else ():
                binding = self.binding(key)
                if binding is not None:
                    self._bound.setdefault(binding.ref, key)
        for candidate in (ref, *reversed(ref.ancestors())):
            key = self._bound.get(candidate)
            if key is not None:
                return key
        return None

    def _owned_ref(self, asset: str, partition: str | None) -> ResourceRef | None:
        if self._owned is None:
            self._owned = {}
            for ref, state in self.ws.store.items():
                if state.owner is None:
                    continue
                latest = state.latest or {}
                part = (latest.get("step") or {}).get("partition")
                self._owned.setdefault(state.owner, []).append((ref, part))
        found = [ref for ref, part in self._owned.get(asset, []) if part == partition]
        return ResourceRef.parse(found[0]) if len(found) == 1 else None

    def data_inputs(self, key: AssetKey) -> list[AssetKey]:
        """Upstream assets whose data the asset loads (its function's arguments)."""
        return self._inputs(key)[0]

    def dependencies(self, key: AssetKey) -> list[AssetKey]:
        """Upstream assets the asset depends on without loading their data (`deps=`)."""
        return self._inputs(key)[1]

    def _inputs(self, key: AssetKey) -> tuple[list[AssetKey], list[AssetKey]]:
        return _memoized(self._input_keys, key, self._new_inputs)

    def _new_inputs(self, key: AssetKey) -> tuple[list[AssetKey], list[AssetKey]]:
        data: set[AssetKey] = set()
        nothing: set[AssetKey] = set()
        assets_def = self._assets_def(key)
        try:
            if assets_def is None:
                raise LookupError(key)  # no definition here: as below
            keys_by_input = assets_def.keys_by_input_name
            for input_def in assets_def.node_def.input_defs:
                upstream = keys_by_input.get(input_def.name)
                if upstream is not None and upstream != key:
                    (nothing if input_def.dagster_type.is_nothing else data).add(upstream)
        except Exception:  # no definition here, or a graph-backed asset: every parent as data
            node = self.node(key)
            data, nothing = set(node.parent_keys if node is not None else ()), set()
        return sorted(data, key=lambda k: tuple(k.path)), sorted(
            nothing, key=lambda k: tuple(k.path)
        )

    def input_refs(self, key: AssetKey, partition: str | None) -> list[ResourceRef]:
        """The refs a planned (partition of an) asset will read, as far as the definitions
        tell: each data input's partitions under its partition mapping, else its whole ref."""
        refs: list[ResourceRef] = []
        for upstream in self.data_inputs(key):
            binding = self.binding(upstream)
            if binding is None:
                continue
            keys = (
                dagster_compat.parent_partition_keys(self._graph, partition, upstream, key)
                if self._graph is not None and partition is not None
                else None
            )
            if keys and len(keys) <= MAX_LISTED_PARTITIONS:
                for item in keys:
                    ref = self.ref_written_by(upstream, item)
                    if ref is not None:
                        refs.append(ref)
                        self._keys_of_refs[ref] = item
            else:
                refs.append(binding.ref)
        return refs

    def partition_key_of(self, ref: ResourceRef) -> str | None:
        """The partition key of an upstream partition's ref that `input_refs` gave."""
        return self._keys_of_refs.get(ref)

    def nominal_window(self, key: AssetKey, partition: str | None) -> tuple[Any, Any] | None:
        node = self.node(key)
        if partition is None or node is None:
            return None
        partitions_def = node.partitions_def
        if not isinstance(partitions_def, TimeWindowPartitionsDefinition):
            return None
        try:
            window = partitions_def.time_window_for_partition_key(partition)
        except Exception:
            return None
        return window.start, window.end

    def description(self, key: AssetKey) -> str | None:
        node = self.node(key)
        return node.description if node is not None else None

    def owners(self, key: AssetKey) -> tuple[str, ...]:
        node = self.node(key)
        return tuple(node.owners) if node is not None else ()

    def tags(self, key: AssetKey) -> tuple[tuple[str, str], ...]:
        """The asset's Dagster tags (its kinds among them, as `dagster/kind/...`)."""
        node = self.node(key)
        return tuple(sorted((node.tags or {}).items())) if node is not None else ()

    def kinds(self, key: AssetKey) -> tuple[str, ...]:
        node = self.node(key)
        return tuple(sorted(getattr(node, "kinds", None) or ())) if node is not None else ()

    def check_spec(self, key: AssetKey, name: str) -> Any | None:
        """The spec of the check `name` of an asset (`AssetCheckSpec`: its description and
        metadata), whether an `@asset_check` or a check the asset's own step evaluates; None
        when these definitions do not have it."""
        if self.repository_def is None:
            return None
        check_key = AssetCheckKey(key, name)
        holders = []
        try:
            found = self.repository_def.asset_checks_defs_by_key.get(check_key)
            if found is not None:
                holders.append(found)
            found = self.repository_def.assets_defs_by_key.get(key)
            if found is not None:
                holders.append(found)
        except Exception:  # definitions that fail to resolve: events only
            return None
        for definition in holders:
            for spec in definition.check_specs:
                if spec.key == check_key:
                    return spec
        return None

    def code_version(self, key: AssetKey) -> str | None:
        node = self.node(key)
        return node.code_version if node is not None else None

    def code(self, key: AssetKey) -> AssetCode:
        """The asset function's source and where it lives (git remote, commit, path)."""
        return _memoized(self._codes, key, self._new_code)

    def _new_code(self, key: AssetKey) -> AssetCode:
        fn = self._function(key)
        code = getattr(fn, "__code__", None)
        source, path = _source_of(code) if code is not None else (None, None)
        folder = Path(path).parent if path else self.ws.root
        top = git_toplevel(folder)
        if path and top is not None:
            try:
                path = Path(path).resolve().relative_to(top.resolve()).as_posix()
            except ValueError:
                pass
        commit = git_commit(folder) if top is not None else None
        return AssetCode(
            source=source,
            path=path,
            git_url=git_remote_url(folder) if top else None,
            git_commit=commit,
            git_branch=git_branch(folder) if top else None,
            git_root=str(top) if top is not None else None,
        )

    def _assets_def(self, key: AssetKey) -> Any | None:
        if self.repository_def is None:
            return None
        try:
            return self.repository_def.assets_defs_by_key.get(key)
        except Exception:
            return None

    def _function(self, key: AssetKey) -> Any | None:
        assets_def = self._assets_def(key)
        if assets_def is None:
            return None
        try:
            compute = assets_def.op.compute_fn
        except Exception:
            return None
        return getattr(compute, "decorated_fn", compute)


@functools.lru_cache(maxsize=4096)
def _source_of(code: CodeType) -> tuple[str | None, str | None]:
    """(source, file) of an asset function's code, once per process: every tick's catalog
    asks, a multi-asset's function once per asset, and `inspect.getsource` tokenizes the file.
    Code reloaded by the code server is a new code object, so edits are seen."""
    try:
        return inspect.getsource(code), inspect.getsourcefile(code)
    except (OSError, TypeError):
        return None, None
