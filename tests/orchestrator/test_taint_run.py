"""A run on a busy machine: tainted sweeps are recorded, measured again under a new
evaluation id, and a verdict from a tainted sweep is neither a promotion nor a failure."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ledger import Ledger
from orchestrator import service
from orchestrator.events import EvaluationSummary, Stage
from orchestrator.state import derive_state
from tests.orchestrator.conftest import ListReporter, fast_settings

pytestmark = pytest.mark.slow

BURN = "import time\nend = time.time() + 240\nwhile time.time() < end:\n    pass\n"


@contextmanager
def busy_cpu(processes: int = 2) -> Iterator[None]:
    """Other processes spinning on the CPU for the whole block (real contention)."""
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(processes)]
    try:
        yield
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


def test_tainted_sweeps_are_measured_again_and_never_scored(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    settings = fast_settings(run_dir, max_candidates=1, taint_remeasures=1, verify_frontier=False)
    with busy_cpu():
        reporter = ListReporter()
        service.run_search(settings, reporter)
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        sweeps = [
            EvaluationSummary.model_validate(e.record.payload) for e in ledger.events("evaluation")
        ]
        state = derive_state(ledger)
    step_sweeps = [s for s in sweeps if s.step == 1 and s.stage is Stage.SWEEP]
    assert len(step_sweeps) == 2 and all(s.taint for s in step_sweeps), reporter.lines
    ids = [s.evaluation_id for s in step_sweeps]
    assert len(set(ids)) == 2 and ids[1].endswith(":sweep-2")
    assert any("measuring again (1)" in line for line in reporter.lines)
    (candidate,) = [c for c in state.candidates.values() if c.step == 1]
    assert candidate.verdict is not None and candidate.verdict.value != "promoted"
    assert candidate.tainted and state.ideas[candidate.idea_id or ""].failures == 0
