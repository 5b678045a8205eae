"""Fixtures: the seed candidates loaded from their files, as the judge loads a candidate."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from kernels.candidate_tree import load_candidate
from kernels.softmax.workload import softmax_workload
from kernels.track3.workload import track3_workload


def load_module(path: Path, name: str) -> ModuleType:
    """Import a candidate by path, as the judge does: a module file, or a package directory
    (its entry module, whose siblings load as `name.MODULE`)."""
    entry = path / "candidate.py" if path.is_dir() else path
    return load_candidate(entry, name)


@pytest.fixture(scope="session")
def track3_seed() -> ModuleType:
    """kernels/track3/seed (a package) as the judge loads it: its entry module."""
    return load_module(track3_workload().seed_candidate, "ratchet_test_track3_seed")


@pytest.fixture(scope="session")
def softmax_seed() -> ModuleType:
    """kernels/softmax/seed_candidate.py (a single module) as a module."""
    return load_module(softmax_workload().seed_candidate, "ratchet_test_softmax_seed")
