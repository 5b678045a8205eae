"""Fixtures: the seed candidates loaded from their files, as the judge loads a candidate."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from kernels.softmax.workload import softmax_workload
from kernels.track3.workload import track3_workload


def load_module(path: Path, name: str) -> ModuleType:
    """Import a candidate file by path (it is not part of any package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def track3_seed() -> ModuleType:
    """kernels/track3/seed_candidate.py as a module."""
    return load_module(track3_workload().seed_candidate, "ratchet_test_track3_seed")


@pytest.fixture(scope="session")
def softmax_seed() -> ModuleType:
    """kernels/softmax/seed_candidate.py as a module."""
    return load_module(softmax_workload().seed_candidate, "ratchet_test_softmax_seed")
