"""Configs checked against the blocked float64 oracle: two trials, a feasibility record, no
timing, and a wrong candidate still fails."""

from __future__ import annotations

from pathlib import Path

from harness.models import (
    ArmKind,
    ArmSpec,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    TimingPlan,
)
from harness.runner import RunnerSettings, run_evaluation
from harness.trials import correctness_trials
from kernels.registry import resolve_workload
from tests.judging import CODE_ROOT

WORKLOAD = resolve_workload("track3")


def judge_as_oracle_config(module: Path, work: Path) -> EvaluationResult:
    request = EvaluationRequest(
        evaluation_id="test:oracle",
        workload="track3",
        device="cpu",
        config_ids=["cpu-5"],
        arms=[
            ArmSpec(name="baseline", kind=ArmKind.REFERENCE),
            ArmSpec(
                name="candidate",
                kind=ArmKind.MODULE,
                module_path=str(module),
                entry_point="OptimizedTransformer",
            ),
        ],
        trials=correctness_trials(WORKLOAD.official_trials, 99),
        timing=TimingPlan(warmup_calls=1, min_rounds=3, max_rounds=3),
        oracle_config_ids=["cpu-5"],
        torch_threads=1,
    )
    settings = RunnerSettings(lock_dir=work / "locks", code_root=CODE_ROOT)
    return run_evaluation(request, work / "judge", settings)


def test_an_oracle_config_is_checked_on_two_trials_and_reported_not_timed(tmp_path: Path) -> None:
    result = judge_as_oracle_config(WORKLOAD.seed_entry(), tmp_path)
    assert result.outcome is Outcome.PASSED, result.message
    (config,) = result.configs
    assert [t.trial.padding_ratio > 0 for t in config.trials] == [False, True]
    assert config.timings == [] and config.feasibility is not None
    assert config.feasibility["elements"] == 1 * 32 * 32
    assert config.feasibility["latency_s"] > 0
    # From the trials' own calls, not a third one: the faster of the two.
    calls = [t.call_s for t in config.trials if t.call_s is not None]
    assert len(calls) == 2 and config.feasibility["latency_s"] == min(calls)
    assert "peak_memory_bytes" not in config.feasibility  # measured on CUDA only


def test_feasibility_takes_the_faster_call_and_the_largest_peak() -> None:
    from harness.judge import feasibility_of
    from harness.models import TrialResult
    from kernels.workload import TrialSpec

    def trial(call_s: float | None, peak: float | None, total: int) -> TrialResult:
        return TrialResult(
            trial=TrialSpec(seed=1),
            passed=True,
            failed_elements=0,
            total_elements=total,
            max_abs_error=0.0,
            call_s=call_s,
            peak_bytes=peak,
        )

    report = feasibility_of([trial(9.0, 5e9, 10), trial(4.0, 3e9, 10), trial(None, 8e9, 10)])
    assert report == {"latency_s": 4.0, "elements": 10.0, "peak_memory_bytes": 5e9}
    assert feasibility_of([trial(None, None, 10)]) == {}


def test_a_wrong_candidate_fails_against_the_oracle(tmp_path: Path) -> None:
    source = WORKLOAD.seed_bundle()
    marker = "        return self._eager(x, valid_token_mask)\n"
    assert source.count(marker) == 1
    broken = tmp_path / "off_by_a_bit.py"
    broken.write_text(
        source.replace(marker, "        return self._eager(x, valid_token_mask) + 0.01\n")
    )
    result = judge_as_oracle_config(broken, tmp_path)
    assert result.outcome is Outcome.INCORRECT, result.message
