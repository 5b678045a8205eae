"""Per-expansion git worktrees: created at the parent commit, always removed afterwards."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import git


@contextmanager
def worktree_lock(repo: git.Repo) -> Iterator[None]:
    """Serialize changes to the repository's worktree list: expansions run at once (threads
    or processes), and a `worktree prune` racing a `worktree add` can drop the new one."""
    path = Path(repo.git_dir) / "ratchet-worktrees.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def remove_worktree(repo: git.Repo, path: Path) -> None:
    """Remove a (possibly stale) worktree left by an earlier, interrupted expansion."""
    with worktree_lock(repo):
        # A kill during `worktree add` leaves the entry locked, and prune keeps locked ones.
        with contextlib.suppress(git.GitCommandError):
            repo.git.worktree("unlock", str(path))
        if path.exists():
            try:
                repo.git.worktree("remove", "--force", str(path))
            except git.GitCommandError:
                shutil.rmtree(path, ignore_errors=True)
        repo.git.worktree("prune")


def add_worktree(
    repo: git.Repo, root: Path, branch: str, parent_sha: str, start_from: str | None = None
) -> Path:
    """A fresh detached worktree of the parent commit for the expansion of `branch`; with
    start_from, its files and index hold that commit's tree instead (HEAD stays the parent,
    so the commit made there is the parent's child: a repair starts from a failed child)."""
    path = root / branch.replace("/", "-")
    remove_worktree(repo, path)
    with worktree_lock(repo):
        repo.git.worktree("add", "--detach", str(path), parent_sha)
    if start_from is not None and start_from != parent_sha:
        git.Repo(path).git.read_tree("--reset", "-u", start_from)
    return path


class WorktreeCommit(NamedTuple):
    """A worktree's index committed and named by a branch of the run's repository."""

    sha: str
    tree_sha: str


def commit_worktree(
    repo_path: Path, worktree: Path, branch: str, message: str, actor: git.Actor
) -> WorktreeCommit:
    """Commit the worktree's index as `actor` and point `branch` of the run's repository at
    it (the tree must already be staged; its sha is what novelty was checked against)."""
    tree_repo = git.Repo(worktree)
    tree_sha = tree_repo.git.write_tree()
    commit = tree_repo.index.commit(message, author=actor, committer=actor)
    git.Repo(repo_path).create_head(branch, commit.hexsha)
    return WorktreeCommit(sha=commit.hexsha, tree_sha=tree_sha)
