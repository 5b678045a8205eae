"""Guards beyond correctness: roofline plausibility, contention taint, qualification, no-run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness.contention import (
    Snapshot,
    compute_pids,
    foreign_cpu_limit,
    judge_taint,
    judged_gpu_row,
)
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


OURS = "GPU-c848f83d-0b16-b318-6c7a-8f85dced8a88"
OTHER = "GPU-0ca43305-1b62-0fae-db5e-6e0723389c11"


def test_only_processes_on_the_judged_gpu_are_contention() -> None:
    """On a host with two GPUs, a job on the other GPU does not taint (seen on the H200 pair:
    a config-14 oracle on GPU 1 made every sweep on GPU 0 inconclusive); one on ours does."""
    apps = [f"751, {OTHER}", f"612, {OURS}"]
    # torch names the device without nvidia-smi's "GPU-" prefix.
    assert compute_pids(apps, OURS.removeprefix("GPU-")) == [612]
    assert compute_pids(apps, None) == [751, 612]  # judged GPU unknown: every process counts
    rows = [f"{OTHER}, 1980, 0x0", f"{OURS}, 1410, 0x40"]
    assert judged_gpu_row(rows, OURS) == ["1410", "0x40"]
    assert judged_gpu_row(rows, None) == ["1980", "0x0"]


def test_cpu_contention_limit_depends_on_what_is_timed() -> None:
    one_core = Snapshot(cpu_busy_ticks=100, wall_ticks=100)
    start = Snapshot()
    # A judge next door (one core) on a 32-core GPU host: GPU timing is untouched, CPU is not.
    assert judge_taint(start, one_core, set(), foreign_cpu_limit("cuda", 32)) == []
    assert judge_taint(start, one_core, set(), foreign_cpu_limit("cpu", 32)) != []
    four_cores = Snapshot(cpu_busy_ticks=400, wall_ticks=100)
    assert judge_taint(start, four_cores, set(), foreign_cpu_limit("cuda", 32)) != []
    assert judge_taint(start, one_core, set(), foreign_cpu_limit("cuda", 2)) != []
