"""The scratch workspace a replay runs in: a separate copy of the workspace holding the snapshot's
source data and the code the steps ran, so that replaying never touches the current state.

The scratch folder is a clone of the workspace's repository that shares its objects (`git clone
--shared`: nothing copied, and unlike a linked worktree nothing registered in the original
repository), detached at the commit the first step ran; each step checks out its own commit
before it runs. Git brings back code exactly. Outside git
the scratch folder is a plain folder and steps must have a code version to match. Source data
comes from the snapshot's retained copy of each source-data resource, never from the current
files, and the scratch workspace has its own SQLite store: the lineage a replay writes is its
own, beside the original's, for the verdict to compare.
"""

from __future__ import annotations

from pathlib import Path

from dws_dagster.errors import ReplayScratchError
from dws_dagster.replay.planning import ReplayPlan
from dws_dagster.snapshots import snapshot_data
from dws_dagster.snapshots.objects import ObjectStore
from dws_dagster.snapshots.retention import LOCAL_KINDS, stage
from dws_dagster.workspace.definition import WORKSPACE_DIR, Workspace
from dws_dagster.workspace.gitinfo import git_toplevel, run_git
from dws_dagster.workspace.refs import ResourceRef
from dws_dagster.workspace.trees import remove_tree

#: Seconds a clone or checkout may take (a large repository, a slow disk).
_SLOW = 60


def prepare_scratch(
    ws: Workspace, plan: ReplayPlan, into: Path, *, chosen_by_replay: bool = False
) -> Workspace:
    """A new workspace in `into` (absent or an empty folder) with `ws`'s resources, the code at
    the first replayable step's commit when the workspace is in git (`into` is then a clone of
    the repository, and the workspace the same folder of it as `ws` is of the repository), and
    the source data of snapshot `plan.snapshot` brought back from retention.
    `chosen_by_replay`: `into` is replay's own default folder under `.dataworkspace/replays/`,
    the one place inside `.dataworkspace/` a scratch folder may be."""
    into = into.absolute()
    if not chosen_by_replay:
        _check_given(ws, into)
    _check_place(ws, into)
    commits = [s.git_commit for s in plan.steps if s.replayable and s.git_commit]
    top = git_toplevel(ws.root)
    replay_of = {"snapshot": plan.snapshot.hash, "root": str(ws.root)}
    if commits and top is not None:
        # The first commit the repository still has (a step whose commit is gone is reported
        # by run_plan, and nothing of it runs).
        clone_at(top, into, next((c for c in commits if has_commit(top, c)), "HEAD"))
        # The workspace may be a folder of the repository: the same folder of the clone.
        root = into / ws.root.resolve().relative_to(top.resolve())
        # The workspace definition at that commit, if it was committed, is not the one to
        # use: the scratch workspace gets today's resources and a store of its own.
        remove_tree(root / WORKSPACE_DIR, ignore_errors=True)
        replay_of["clone"] = str(into)
    else:
        into.mkdir(parents=True, exist_ok=True)
        root = into
    scratch = Workspace.init(
        root, name=f"{ws.name}-replay-{plan.snapshot.name}", replay_of=replay_of
    )
    for resource in ws.resources.values():
        scratch.add_resource(
            resource.name,
            resource.role,
            path=resource.path,
            uri=resource.uri,
            versioning=resource.versioning,
            description=resource.description,
        )
    _bring_back_sources(ws, scratch, plan)
    return scratch


def _check_given(ws: Workspace, into: Path) -> None:
    """A folder the user named is never inside `.dataworkspace/`: the objects, the store and
    the cache there are the workspace's own, and nothing else may be written among them."""
    meta = ws.meta_dir.resolve()
    if into.resolve() == meta or into.resolve().is_relative_to(meta):
        raise ReplayScratchError(
            f"--into {into} is inside the workspace's {WORKSPACE_DIR}/ folder, which holds its "
            "store, objects and caches: replay into a folder outside it (or leave out --into: "
            f"replay then uses a new folder under {WORKSPACE_DIR}/replays/)"
        )


def _check_place(ws: Workspace, into: Path) -> None:
    if into == ws.root or ws.root.is_relative_to(into):
        raise ReplayScratchError(
            f"--into {into} holds the workspace itself: replay into a separate folder"
        )
    for resource in ws.resources.values():
        if not resource.is_local:
            continue
        root = ws.resource_root(resource).absolute()
        if into == root or into.is_relative_to(root) or root.is_relative_to(into):
            raise ReplayScratchError(
                f"--into {into} overlaps resource '{resource.name}' ({root}): replay into a "
                "folder outside the workspace's data"
            )
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise ReplayScratchError(
            f"--into {into} is not an empty folder: replay into a new folder (it is created), "
            "so that nothing there is overwritten"
        )
    for resource in ws.resources.values():
        if resource.path is not None and Path(resource.path).is_absolute():
            raise ReplayScratchError(
                f"resource '{resource.name}' is at an absolute path ({resource.path}): a "
                "replay would write the original's data; give the resource a path inside the "
                "workspace to replay it"
            )


def _bring_back_sources(ws: Workspace, scratch: Workspace, plan: ReplayPlan) -> None:
    """Every source data the snapshot retained, as it retained it: each source-data resource
    whole where the snapshot holds it whole (captured as a resource, or read whole by a step:
    a step may read any file of it, not only the refs the lineage names), else each of its
    refs the snapshot holds."""
    objects = ObjectStore.of_workspace(ws.meta_dir)
    sources = {name for name, r in ws.resources.items() if r.role == "source-data" and r.is_local}
    rows = [
        row
        for row in snapshot_data.rows_of(ws, plan.snapshot.hash)
        if row.kind in LOCAL_KINDS and row.version is not None
        and ResourceRef.parse(row.ref).name in sources
    ]  # fmt: skip
    whole = [row for row in rows if ResourceRef.parse(row.ref).subpath is None]
    covered = {row.ref for row in whole}
    parts = [row for row in rows if ResourceRef.parse(row.ref).name not in covered]
    for row in [*whole, *parts]:
        assert row.version is not None
        found = snapshot_data.manifest(ws, row.ref, row.version)
        if found is None:
            raise ReplayScratchError(
                f"snapshot {plan.snapshot.name} no longer holds the data of source "
                f"'{row.ref}' (freed by gc?): it cannot be replayed"
            )
        _link, files = found
        target = scratch.local_path(ResourceRef.parse(row.ref))
        if target.is_dir() and not target.is_symlink():
            remove_tree(target)  # what git brought is not the snapshot's
        else:
            target.unlink(missing_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        stage(objects, files, False, target)


def has_commit(directory: Path, commit: str) -> bool:
    """Whether the repository holding `directory` has `commit`."""
    return run_git(directory, "cat-file", "-e", f"{commit}^{{commit}}") is not None


def clone_at(repository: Path, into: Path, commit: str) -> None:
    """A clone of `repository` sharing its objects, in `into`, detached at `commit`."""
    cloned = run_git(
        repository.parent, "clone", "--quiet", "--shared", "--no-checkout", str(repository),
        str(into), timeout=_SLOW,
    )  # fmt: skip
    if (
        cloned is None
        or run_git(into, "checkout", "--detach", "--quiet", commit, timeout=_SLOW) is None
    ):
        raise ReplayScratchError(
            f"git could not check out commit {commit[:12]} into {into}; check that the "
            "commit is in the repository (git fetch) and that the folder can be written"
        )


def checkout(worktree: Path, commit: str) -> None:
    """Make the scratch clone hold `commit`'s files (untracked data stays)."""
    if run_git(worktree, "checkout", "--detach", "--quiet", commit, timeout=_SLOW) is None:
        raise ReplayScratchError(
            f"git could not check out commit {commit[:12]} in the replay folder {worktree}"
        )
