"""The judge reports which tunables a candidate's code read, per config, in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.models import Outcome
from kernels.softmax.workload import softmax_workload
from kernels.track3.workload import track3_workload
from kernels.workload import TrialSpec
from tests.judging import gate_module

pytestmark = pytest.mark.slow
TRIALS = [TrialSpec(seed=1234), TrialSpec(seed=1235, padding_ratio=0.25)]


def test_the_judge_records_the_seeds_reads_per_config(tmp_path: Path) -> None:
    result = gate_module(track3_workload().seed_entry(), "track3", ["cpu-5"], TRIALS, tmp_path)
    assert result.outcome is Outcome.PASSED, result.message
    names = result.configs[0].settings_read
    assert names is not None and {"matmul_precision", "gelu", "graph_capture"} <= set(names)
    assert "fused_projection_operands" not in names  # fused_kernel=none: never consulted


def test_a_candidate_without_a_recorder_reports_nothing(tmp_path: Path) -> None:
    # The softmax seed keeps its tunables in a plain dict.
    result = gate_module(softmax_workload().seed_candidate, "softmax", ["s3"], TRIALS, tmp_path)
    assert result.outcome is Outcome.PASSED, result.message
    assert result.configs[0].settings_read is None


def test_a_failing_candidate_reports_what_its_code_read_where_it_failed(tmp_path: Path) -> None:
    # A repair applies only ideas that act in the code that failed (orchestrator/repair.py).
    sources = track3_workload().seed_sources()
    broken = tmp_path / "broken"
    broken.mkdir()
    for name, text in sources.items():
        (broken / name).write_text(text)
    entry = broken / "candidate.py"
    entry.write_text(
        entry.read_text().replace("return self._eager(x, valid_token_mask)", "return x * 2", 1)
    )
    result = gate_module(entry, "track3", ["cpu-5"], TRIALS, tmp_path)
    assert result.outcome is Outcome.INCORRECT
    names = result.configs[0].settings_read
    # Its forward returns before the layers: what it read is the wrapper's, nothing deeper.
    assert names is not None and {"graph_capture", "batch_chunk"} <= set(names)
    assert "matmul_precision" not in names and "gelu" not in names
