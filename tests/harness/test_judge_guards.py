"""Guards beyond correctness: roofline plausibility, contention taint, qualification, no-run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness.contention import Snapshot, judge_taint
from harness.models import (
    ArmKind,
    ArmSpec,
    DevicePeaks,
    EvaluationMode,
    EvaluationRequest,
    Outcome,
    RejectReason,
    TimingPlan,
)
from harness.runner import RunnerSettings, run_evaluation
from kernels.workload import TrialSpec
from tests.harness.conftest import softmax_request

BURN = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"


def test_a_time_below_the_roofline_is_rejected(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("honest", "return torch.softmax(x, dim=-1)")
    slow_device = DevicePeaks(matmul_flops_per_s=1e3, copy_bytes_per_s=1e3)
    request = softmax_request(module).model_copy(update={"device_peaks": slow_device})
    result = run_evaluation(request, tmp_path / "w", runner_settings)
    assert result.outcome is Outcome.REJECTED and result.reason is RejectReason.IMPLAUSIBLE_TIME
    fast_device = DevicePeaks(matmul_flops_per_s=1e15, copy_bytes_per_s=1e13)
    request = softmax_request(module).model_copy(update={"device_peaks": fast_device})
    result = run_evaluation(request, tmp_path / "w2", runner_settings)
    assert result.outcome is Outcome.PASSED, result.message
    assert all(c.floor_ns is not None and c.floor_ns > 0 for c in result.configs)


def test_other_processes_on_the_cpu_taint_the_measurement(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("honest", "return torch.softmax(x, dim=-1)")
    plan = TimingPlan(min_rounds=6, max_rounds=30, budget_s=2.0, target_half_width=1e-6)
    request = softmax_request(module).model_copy(update={"timing": plan})
    quiet = run_evaluation(request, tmp_path / "quiet", runner_settings)
    assert quiet.outcome is Outcome.PASSED and not quiet.tainted, quiet.taint
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]
    try:
        time.sleep(0.5)
        busy = run_evaluation(request, tmp_path / "busy", runner_settings)
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    assert busy.outcome is Outcome.PASSED and busy.tainted
    assert any("CPU cores" in t for t in busy.taint)


def test_gpu_contention_and_slowdown_are_taint() -> None:
    before = Snapshot(gpu_processes=[10], slowdown=[])
    after = Snapshot(gpu_processes=[10, 99], slowdown=["hw_thermal"])
    taint = judge_taint(before, after, allowed_pids={10})
    assert any("99" in t for t in taint) and any("hw_thermal" in t for t in taint)
    assert judge_taint(before, before, allowed_pids={10}) == []


def _qualify_request(device: str) -> EvaluationRequest:
    return EvaluationRequest(
        evaluation_id=f"q:{device}",
        workload="softmax",
        device=device,
        config_ids=["s1"],
        arms=[ArmSpec(name="candidate", kind=ArmKind.REFERENCE)],
        trials=[TrialSpec(seed=1)],
        mode=EvaluationMode.QUALIFY,
        torch_threads=1,
    )


def test_qualification_measures_the_device(tmp_path: Path, runner_settings: RunnerSettings) -> None:
    result = run_evaluation(_qualify_request("cpu"), tmp_path / "q", runner_settings)
    assert result.outcome is Outcome.PASSED
    q = result.qualification or {}
    for key in (
        "copy_bytes_per_s",
        "matmul_flops_per_s",
        "timer_resolution_ns",
        "launch_overhead_s",
    ):
        assert float(str(q[key])) > 0, key


def test_an_unsupported_backend_is_a_no_run(
    tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    result = run_evaluation(_qualify_request("xpu"), tmp_path / "q", runner_settings)
    assert result.outcome is Outcome.NO_RUN and result.reason is RejectReason.NO_RUN
    assert not result.qualification
