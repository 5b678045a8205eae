"""Kill `ratchet run` with SIGKILL mid-step, start it again: nothing lost, nothing duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ledger import Ledger, LedgerError
from orchestrator import service
from orchestrator.events import EvaluationSummary
from orchestrator.state import derive_state

pytestmark = pytest.mark.slow
CODE_ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
[ratchet]
torch_threads = 1
[ratchet.screen_timing]
min_rounds = 4
max_rounds = 8
budget_s = 0.3
target_half_width = 0.05
[ratchet.sweep_timing]
min_rounds = 6
max_rounds = 12
budget_s = 0.5
"""


def start(run_dir: Path, config: Path, candidates: int, *extra: str) -> subprocess.Popen[bytes]:
    """`ratchet run` on the softmax CPU set in its own session (extra: more flags)."""
    argv = [sys.executable, "-m", "orchestrator.cli", "--config", str(config), "run"]
    argv += ["--run-dir", str(run_dir), "--workload", "softmax", "--device", "cpu"]
    argv += ["--max-candidates", str(candidates), "--minutes", "10", *extra]
    env = {**os.environ, "RATCHET_LOCK_DIR": str(run_dir.parent / "locks")}
    return subprocess.Popen(
        argv,
        cwd=CODE_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def mid_step(ledger_path: Path) -> bool:
    """At least two new candidates exist and the newest has no verdict yet."""
    if not ledger_path.exists():
        return False
    try:
        with Ledger.open_path(ledger_path, create=False) as ledger:
            state = derive_state(ledger)
    except LedgerError:
        return False
    new = [c for c in state.candidates.values() if c.parent_sha is not None]
    return len(new) >= 2 and state.open_step is not None and state.open_step.sha is not None


def test_sigkill_then_resume(tmp_path: Path) -> None:
    run_dir, config = tmp_path / "run", tmp_path / "ratchet.toml"
    config.write_text(CONFIG)
    # 3 candidates: the kill lands while the second is judged (the first moment mid_step
    # sees), so the resumed run finishes that step and makes one more after it.
    proc = start(run_dir, config, 3)
    deadline = time.monotonic() + 240
    while not mid_step(run_dir / "ledger.sqlite"):
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "the run never reached a mid-step state"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    again = start(run_dir, config, 3)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out.decode()
    assert "resuming run" in out.decode() and "reached 3 candidates" in out.decode()

    assert service.verify_ledger(run_dir).ok
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        evaluations = [
            EvaluationSummary.model_validate(e.record.payload) for e in ledger.events("evaluation")
        ]
        measurement_keys = [
            (m.record.evaluation_id, m.record.config_id, m.record.arm)
            for m in ledger.measurements()
        ]
        shas = [c.record.sha for c in ledger.candidates()]
    assert len(shas) == len(set(shas)) == 4
    assert state.open_step is None
    assert sorted(state.steps) == list(range(1, len(state.steps) + 1)), "steps are contiguous"
    assert all(step.closed for step in state.steps.values())
    per_stage = Counter((e.sha, e.stage) for e in evaluations)
    assert max(per_stage.values()) == 1, "an evaluation was recorded twice"
    assert len(measurement_keys) == len(set(measurement_keys))
    for cand in state.candidates.values():
        assert cand.verdict is not None, f"{cand.sha[:10]} has no verdict"
