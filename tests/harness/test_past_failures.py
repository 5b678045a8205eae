"""time_past_failures: configs a variant got right are timed although it failed others."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.models import EvaluationResult, Outcome, RejectReason
from harness.runner import RunnerSettings, run_evaluation
from kernels.workload import TrialSpec
from tests.harness.conftest import softmax_request

# Wrong on s1 (1024 columns) only; s3 (128 columns) is right.
WRONG_ON_S1 = "out = torch.softmax(x, dim=-1)\nreturn out * 1.01 if x.shape[-1] == 1024 else out"
# Right at the gate (input scales 1 and 3) and while timed (scale 1), wrong on s1's inputs of
# scale 0.5: their largest value is about 2.3 where scale 1's is above 4. Only the re-check
# after timing (the request below draws it at scale 0.5) sees it.
WRONG_AFTER_TIMING = (
    "out = torch.softmax(x, dim=-1)\n"
    "small = x.shape[-1] == 1024 and float(x.abs().max()) < 3.0\n"
    "return out * 1.01 if small else out"
)
RECHECK = [TrialSpec(seed=11, input_scale=0.5)]


def _judge(module: Path, where: Path, settings: RunnerSettings, past: bool) -> EvaluationResult:
    request = softmax_request(module).model_copy(
        update={"time_past_failures": past, "recheck_trials": RECHECK}
    )
    return run_evaluation(request, where, settings)


def _timed(result: EvaluationResult) -> dict[str, bool]:
    return {c.config_id: bool(c.timings and c.ratios) for c in result.configs}


def test_a_gate_failure_leaves_the_other_configs_timed_only_when_asked(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("wrong_s1", WRONG_ON_S1)
    past = _judge(module, tmp_path / "past", runner_settings, past=True)
    assert past.outcome is Outcome.INCORRECT, past.message
    assert "configs ['s1']" in past.message
    assert _timed(past) == {"s1": False, "s3": True}
    assert [c.correct for c in past.configs] == [False, True]
    assert not past.aggregates, "an incorrect candidate has no objective"
    stopped = _judge(module, tmp_path / "stop", runner_settings, past=False)
    assert stopped.outcome is Outcome.INCORRECT
    assert _timed(stopped) == {"s1": False, "s3": False}


def test_a_failed_recheck_goes_on_to_the_next_config_only_when_asked(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("late", WRONG_AFTER_TIMING)
    past = _judge(module, tmp_path / "past", runner_settings, past=True)
    assert past.outcome is Outcome.INCORRECT and past.reason is RejectReason.TIMED_OUTPUT_WRONG
    assert "after timing, config s1 fails on fresh inputs" in past.message
    assert [c.correct for c in past.configs] == [False, True]
    assert _timed(past) == {"s1": True, "s3": True}  # s1 was timed, then failed its re-check
    assert not past.aggregates
    stopped = _judge(module, tmp_path / "stop", runner_settings, past=False)
    assert stopped.reason is RejectReason.TIMED_OUTPUT_WRONG
    assert _timed(stopped) == {"s1": True, "s3": False}


def test_a_wrong_timed_output_still_ends_the_evaluation(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    """Right when gated, wrong while timed (inputs of one pool repeat inside a block): the
    spot check ends it at once, whatever time_past_failures says."""
    module = write_candidate(
        "timed_wrong",
        "self.calls = getattr(self, 'calls', 0) + 1\n"
        "out = torch.softmax(x, dim=-1)\n"
        "return out * 1.01 if self.calls > 8 and x.shape[-1] == 1024 else out",
    )
    result = _judge(module, tmp_path / "w", runner_settings, past=True)
    assert result.outcome is Outcome.INCORRECT and result.reason is RejectReason.TIMED_OUTPUT_WRONG
    assert "correct only when checked" in result.message
    assert _timed(result) == {"s1": False, "s3": False}
