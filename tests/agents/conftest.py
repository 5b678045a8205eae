"""Fixtures: seed-candidate sources and real git repositories holding them."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from kernels.softmax.workload import softmax_workload
from kernels.track3.workload import track3_workload

ACTOR = git.Actor("ratchet tests", "tests@ratchet.invalid")


@pytest.fixture(scope="session")
def track3_source() -> str:
    """Source text of the track3 seed candidate."""
    return track3_workload().seed_bundle()


@pytest.fixture(scope="session")
def softmax_source() -> str:
    """Source text of the softmax seed candidate."""
    return softmax_workload().seed_candidate.read_text()


def make_repo(root: Path, source: str) -> tuple[git.Repo, str]:
    """A repository whose first commit holds `source` as candidate.py; returns (repo, sha)."""
    repo = git.Repo.init(root, initial_branch="main")
    (root / "candidate.py").write_text(source)
    repo.index.add(["candidate.py"])
    commit = repo.index.commit("seed candidate", author=ACTOR, committer=ACTOR)
    return repo, commit.hexsha
