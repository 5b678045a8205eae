"""Per-expansion git worktrees: created at the parent commit, always removed afterwards."""

from __future__ import annotations

import shutil
from pathlib import Path

import git


def remove_worktree(repo: git.Repo, path: Path) -> None:
    """Remove a (possibly stale) worktree left by an earlier, interrupted expansion."""
    if path.exists():
        try:
            repo.git.worktree("remove", "--force", str(path))
        except git.GitCommandError:
            shutil.rmtree(path, ignore_errors=True)
    repo.git.worktree("prune")


def add_worktree(repo: git.Repo, root: Path, branch: str, parent_sha: str) -> Path:
    """A fresh detached worktree of the parent commit for the expansion of `branch`."""
    path = root / branch.replace("/", "-")
    remove_worktree(repo, path)
    repo.git.worktree("add", "--detach", str(path), parent_sha)
    return path
