"""A short real track3 run on the CPU set, its export judged as a standalone submission."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.models import Outcome
from kernels.workload import TrialSpec
from orchestrator import service
from tests.judging import gate_module
from tests.orchestrator.conftest import ListReporter, fast_settings

pytestmark = pytest.mark.slow

PROBE = """
import sys, torch, submission

class Config:  # the organizer's config object: attributes only
    batch_size, seq_len, d_model, num_heads, ffn_dim, num_layers, causal = 2, 16, 32, 4, 32, 2, True

model = submission.OptimizedTransformer(Config())
names = set(model.state_dict())
assert "layers.0.attention.q_proj.weight" in names and "final_norm.bias" in names, names
x = torch.randn(2, 16, 32)
mask = torch.arange(16)[None, :] < torch.tensor([[16], [9]])
y = model(x, valid_token_mask=mask)
assert y.shape == x.shape and bool((y[1, 9:] == 0).all())
ours = {"orchestrator", "agents", "search", "harness", "kernels", "ledger", "prompts"}
assert not ours & {n.split(".")[0] for n in sys.modules}, "imported ratchet code"
"""


def test_track3_run_exports_a_drop_in_submission(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = service.run_search(
        fast_settings(run_dir, workload="track3", max_candidates=2), ListReporter()
    )
    assert summary.reason == "reached 2 candidates"
    assert service.verify_ledger(run_dir).ok
    out = tmp_path / "export"
    manifest = service.export(run_dir, None, out)
    assert manifest.entry_point == "OptimizedTransformer"
    # The seed is a package of modules; the export bundles it into one file.
    assert (manifest.form, manifest.files) == ("bundle", ["submission.py"])
    assert all(row.failed_elements == 0 for row in manifest.per_config.values())
    subprocess.run(
        [sys.executable, "-c", PROBE], cwd=out, check=True, env={"PATH": "/usr/bin:/bin"}
    )
    trials = [TrialSpec(seed=1234), TrialSpec(seed=99, padding_ratio=0.5, input_scale=2.0)]
    result = gate_module(out / "submission.py", "track3", ["cpu-2", "cpu-5"], trials, tmp_path)
    assert result.outcome is Outcome.PASSED, result.message
