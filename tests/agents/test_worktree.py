"""Expansion worktrees: at the parent, or holding a repair's source with the parent as HEAD."""

from __future__ import annotations

from pathlib import Path

import git

from agents.worktree import add_worktree, commit_worktree, remove_worktree
from tests.agents.conftest import ACTOR, make_repo


def test_a_worktree_started_from_another_commit_holds_its_tree_over_the_parent(
    tmp_path: Path,
) -> None:
    repo, parent = make_repo(tmp_path / "repo", "x = 1\n")
    (tmp_path / "repo" / "candidate.py").write_text("x = 2\n")
    repo.index.add(["candidate.py"])
    (tmp_path / "repo" / "extra.py").write_text("y = 3\n")
    repo.index.add(["extra.py"])
    source = repo.index.commit("the miss", author=ACTOR, committer=ACTOR).hexsha
    path = add_worktree(repo, tmp_path / "trees", "step-1", parent, start_from=source)
    assert (path / "candidate.py").read_text() == "x = 2\n" and (path / "extra.py").exists()
    (path / "candidate.py").write_text("x = 20\n")
    git.Repo(path).index.add(["candidate.py"])
    made = commit_worktree(tmp_path / "repo", path, "step-1", "repair", ACTOR)
    commit = repo.commit(made.sha)
    # The source's change and the repair's edit, committed as the parent's child.
    assert [p.hexsha for p in commit.parents] == [parent]
    assert commit.tree["candidate.py"].data_stream.read() == b"x = 20\n"
    assert commit.tree["extra.py"].data_stream.read() == b"y = 3\n"
    remove_worktree(repo, path)
    plain = add_worktree(repo, tmp_path / "trees", "step-2", parent)
    assert (plain / "candidate.py").read_text() == "x = 1\n" and not (plain / "extra.py").exists()
