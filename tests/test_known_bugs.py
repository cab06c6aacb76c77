"""Two known bugs, each reproduced with the real thing: a git repository whose HEAD moves while
one process records steps (a notebook), and a lineage sensor tick during which another process
forgets a ref."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dagster import (
    AssetCheckResult,
    Definitions,
    asset,
    asset_check,
    build_sensor_context,
    materialize,
)

from dws_dagster import Workspace, WorkspaceResource, dws_ref, lineage_sensor
from dws_dagster.sensor import apply_lineage
from dws_dagster.workspace import gitinfo
from tests.conftest import run_python, run_step


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def head(cwd: Path) -> str:
    return git(cwd, "rev-parse", "HEAD")


def recorded_commit(ws: Workspace, n: int) -> str | None:
    """Run a script step in this process (as a notebook cell would) and return the commit its
    record holds."""
    run_step(ws, "cell", [], {"inter/out": f"run {n}\n"}, parameters={"n": n})
    return ws.store.get("inter/out").record["step"].get("git_commit")


# ------------------------------------------------------------------ the git commit


def test_a_step_records_the_commit_checked_out_now(ws: Workspace) -> None:
    repo = ws.root
    assert recorded_commit(ws, 0) is None  # not a repository (yet)
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    assert recorded_commit(ws, 1) == head(repo)  # the repository made since is seen
    first = head(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    second = head(repo)
    assert second != first
    assert recorded_commit(ws, 2) == second
    git(repo, "pack-refs", "--all")  # the branch now lives in packed-refs only
    assert not (repo / ".git/refs/heads/main").exists()
    assert recorded_commit(ws, 3) == second
    git(repo, "commit", "-q", "--allow-empty", "-m", "third")
    assert recorded_commit(ws, 4) == head(repo)
    git(repo, "checkout", "-q", "--detach", first)
    assert recorded_commit(ws, 5) == first
    git(repo, "checkout", "-q", "main")
    git(repo, "reset", "-q", "--hard", second)
    assert recorded_commit(ws, 6) == second


def test_a_linked_worktree_sees_commits_made_in_it(ws: Workspace, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    git(repo, "worktree", "add", "-q", "-b", "work", str(tmp_path / "linked"))
    linked = tmp_path / "linked"
    assert gitinfo.git_commit(linked) == head(linked)
    assert gitinfo.git_branch(linked) == "work"
    git(linked, "commit", "-q", "--allow-empty", "-m", "in the worktree")
    assert gitinfo.git_commit(linked) == head(linked) != head(repo)
    git(linked, "checkout", "-q", "-b", "other")
    assert gitinfo.git_branch(linked) == "other"


def test_the_commit_is_asked_of_git_only_when_head_moved(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cost side: a warm step pays a few file reads, not a git process."""
    git(ws.root, "init", "-q")
    git(ws.root, "commit", "-q", "--allow-empty", "-m", "first")
    asked: list[tuple[str, ...]] = []
    real = gitinfo._git

    def counting(directory: Path, *args: str) -> str | None:
        asked.append(args)
        return real(directory, *args)

    monkeypatch.setattr(gitinfo, "_git", counting)
    for _ in range(5):
        assert gitinfo.git_commit(ws.root) == head(ws.root)
    assert asked.count(("rev-parse", "HEAD")) <= 1
    git(ws.root, "commit", "-q", "--allow-empty", "-m", "second")
    assert gitinfo.git_commit(ws.root) == head(ws.root)
    assert asked.count(("rev-parse", "HEAD")) <= 2


def test_a_process_records_the_commit_after_a_commit_made_by_another(ws: Workspace) -> None:
    """The notebook case across processes: one long-lived interpreter records two steps, the
    repository gets a commit in between from a `git` run outside it."""
    git(ws.root, "init", "-q")
    git(ws.root, "commit", "-q", "--allow-empty", "-m", "first")
    code = (
        "import subprocess, sys\n"
        "from dws_dagster import Workspace\n"
        "from tests.conftest import run_step\n"
        "ws = Workspace.open('.')\n"
        "seen = []\n"
        "for n in range(2):\n"
        "    run_step(ws, 'cell', [], {'inter/out': f'{n}\\n'}, parameters={'n': n})\n"
        "    seen.append(ws.store.get('inter/out').record['step'].get('git_commit'))\n"
        "    if n == 0:\n"
        "        subprocess.run(['git', '-c', 'user.name=t', '-c', 'user.email=t@e.com',\n"
        "                        '-c', 'commit.gpgsign=false', 'commit', '-q',\n"
        "                        '--allow-empty', '-m', 'second'], check=True)\n"
        "print(' '.join(seen))\n"
    )
    done = run_python(code, ws.root)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split()
    assert second == head(ws.root) != first


# ------------------------------------------------------------------ forget during a tick


def test_a_ref_forgotten_by_another_process_during_a_tick(
    ws: Workspace, instance, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A lineage sensor tick applies a check's verdict to the checked ref's record; another
    process runs `dws-dagster forget` on that ref while the tick is at it. The tick completes,
    the ref stays forgotten, and the next tick is clean.

    The race is timing-dependent, so the forget is injected at a seam: between the tick's
    first read of the ref and its read under the store's lock (the `replace` that builds the
    enriched record), it runs in another process and returns when done. The sensor snapshots
    per run (`snapshot_on_results`), so it does not hold the store's lock across the batch;
    with the lock held across a batch the other process would wait for it instead.
    """
    ref = "inter/checked"
    run_step(ws, "checked", [], {ref: "x\n"})

    @asset(name="checked", metadata=dws_ref("inter", "checked"))
    def checked() -> int:
        return 1

    @asset_check(asset="checked")
    def sane() -> AssetCheckResult:
        return AssetCheckResult(passed=True)

    workspace = WorkspaceResource(root=str(ws.root))
    sensor = lineage_sensor(snapshot_on_results=True, openlineage=False)
    defs = Definitions(
        assets=[checked], asset_checks=[sane], sensors=[sensor], resources={"workspace": workspace}
    )
    assert materialize([checked, sane], instance=instance).success

    real_replace = apply_lineage.replace
    forgotten: list[str] = []

    def replace_after_a_forget(obj, /, **changes):
        if "extra" in changes and not forgotten:
            done = run_python(
                "from dws_dagster import Workspace\n"
                f"print(Workspace.open('.').store.forget({ref!r}))\n",
                ws.root,
            )
            assert done.returncode == 0, done.stderr
            forgotten.append(done.stdout.strip())
        return real_replace(obj, **changes)

    monkeypatch.setattr(apply_lineage, "replace", replace_after_a_forget)
    context = build_sensor_context(
        instance=instance, definitions=defs, resources={"workspace": workspace}
    )
    with caplog.at_level("WARNING", logger="dws_dagster.sensor"):
        result = sensor(context)
    assert forgotten == ["True"]  # the other process did forget the ref mid-tick
    assert f"the lineage of {ref} was forgotten meanwhile; verdict not recorded" in caplog.text
    assert Workspace.open(ws.root).store.get(ref) is None
    assert ws.store.get(ref) is None
    assert "records" in result.skip_reason.skip_message
    # The next tick, from the saved cursor, has nothing left to do and changes nothing.
    context = build_sensor_context(
        instance=instance,
        definitions=defs,
        cursor=result.cursor,
        resources={"workspace": workspace},
    )
    assert sensor(context).cursor == result.cursor
    assert Workspace.open(ws.root).store.get(ref) is None
