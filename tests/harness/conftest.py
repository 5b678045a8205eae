"""Fixtures for judge tests: candidate files on disk and runner settings in a temp dir."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.models import ArmKind, ArmSpec, EvaluationRequest, TimingPlan
from harness.runner import RunnerSettings
from kernels.workload import TrialSpec

CODE_ROOT = Path(__file__).resolve().parents[2]

SOFTMAX_HEADER = """
import torch
from torch import nn


class OptimizedSoftmax(nn.Module):
    def __init__(self, config):
        super().__init__()

    def forward(self, x):
"""


@pytest.fixture
def write_candidate(tmp_path: Path) -> Callable[..., Path]:
    """Write a softmax candidate whose forward body is `body` (or a whole module)."""

    def write(name: str, body: str, whole: bool = False) -> Path:
        path = tmp_path / "cands" / name / "candidate.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        source = body if whole else SOFTMAX_HEADER + textwrap.indent(textwrap.dedent(body), " " * 8)
        path.write_text(textwrap.dedent(source) if whole else source)
        return path

    return write


@pytest.fixture
def runner_settings(tmp_path: Path) -> RunnerSettings:
    """A runner with a private lock dir and a short timeout."""
    return RunnerSettings(
        python=sys.executable,
        timeout_s=60,
        lock_dir=tmp_path / "locks",
        code_root=CODE_ROOT,
    )


def softmax_request(
    module: Path, timing: bool = True, evaluation_id: str = "test:sweep"
) -> EvaluationRequest:
    """Judge `module` against the naive softmax reference on two small configs."""
    return EvaluationRequest(
        evaluation_id=evaluation_id,
        workload="softmax",
        device="cpu",
        config_ids=["s1", "s3"],
        arms=[
            ArmSpec(
                name="candidate",
                kind=ArmKind.MODULE,
                module_path=str(module),
                entry_point="OptimizedSoftmax",
            ),
            ArmSpec(name="baseline", kind=ArmKind.REFERENCE),
        ],
        trials=[TrialSpec(seed=1), TrialSpec(seed=7, input_scale=3.0)],
        timing=TimingPlan(min_rounds=4, max_rounds=8, budget_s=0.5) if timing else None,
        torch_threads=1,
    )


def host_pid_sleeper(pid_file: Path) -> str:
    """Source of a child process for a candidate to start: `sleep 300` that first writes its
    pid as the host sees it (a judge in a PID namespace sees other numbers), waited for."""
    script = f"read pid rest < /proc/self/stat; echo $pid > {pid_file}; exec sleep 300"
    return (
        f"subprocess.Popen(['sh', '-c', {script!r}]{{session}})\n"
        f"while not os.path.exists({str(pid_file)!r}) or not open({str(pid_file)!r}).read():\n"
        "    time.sleep(0.01)\n"
    )
