"""The judge's own steps (inputs, reference, poison fill) failing are infrastructure: never
the candidate's failure, and the exception's message is kept."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

import harness.checks as checks
from harness.checks import CheckContext, ReferenceCache, run_trial
from harness.judge_failures import JudgeStep, JudgeStepFailure
from harness.models import Outcome, RejectReason
from harness.runner import RunnerSettings, run_evaluation
from kernels.registry import resolve_workload
from kernels.softmax.runtime import NaiveSoftmax
from kernels.workload import TrialSpec
from tests.harness.conftest import softmax_request
from tests.harness.judge_fault_workload import FAULT

SOFTMAX = resolve_workload("softmax")
FAULT_WORKLOAD = "tests.harness.judge_fault_workload:reference_fault_workload"


def softmax_context() -> CheckContext:
    runtime = SOFTMAX.load_runtime()
    return CheckContext(runtime, SOFTMAX.configs["s1"], "cpu", SOFTMAX.tolerance)


class Raising:
    """A candidate whose call raises."""

    def __call__(self, x: Any) -> Any:
        raise RuntimeError("the candidate's own bug")


def test_a_failing_poison_fill_is_the_judges_step(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextmanager
    def exhausted(device: str, nbytes: int) -> Iterator[None]:
        raise MemoryError("simulated: no memory left for the poison blocks")
        yield

    monkeypatch.setattr(checks, "poisoned_allocations", exhausted)
    ctx = softmax_context()
    refs = ReferenceCache(NaiveSoftmax(), ctx)
    with pytest.raises(JudgeStepFailure) as failed:
        run_trial(ctx, NaiveSoftmax(), refs, TrialSpec(seed=1))
    assert failed.value.step is JudgeStep.POISON
    assert "no memory left for the poison blocks" in failed.value.message


def test_a_failing_reference_is_the_judges_step() -> None:
    ctx = softmax_context()
    refs = ReferenceCache(
        resolve_workload(FAULT_WORKLOAD).load_runtime().build_reference(ctx.config, "cpu"), ctx
    )
    with pytest.raises(JudgeStepFailure) as failed:
        run_trial(ctx, NaiveSoftmax(), refs, TrialSpec(seed=1))
    assert failed.value.step is JudgeStep.REFERENCE and FAULT in failed.value.message


def test_the_candidate_raising_stays_the_candidates_failure() -> None:
    # The guard must not swallow the candidate's own error into infrastructure.
    ctx = softmax_context()
    refs = ReferenceCache(NaiveSoftmax(), ctx)
    with pytest.raises(RuntimeError, match="the candidate's own bug") as failed:
        run_trial(ctx, Raising(), refs, TrialSpec(seed=1))
    assert not isinstance(failed.value, JudgeStepFailure)


def test_a_judge_step_failure_is_an_untrusted_result_not_a_candidate_failure(
    write_candidate: Callable[..., Path], runner_settings: RunnerSettings, tmp_path: Path
) -> None:
    module = write_candidate("fine", "return torch.softmax(x, dim=-1)")
    request = softmax_request(module, timing=False).model_copy(update={"workload": FAULT_WORKLOAD})
    result = run_evaluation(request, tmp_path / "w", runner_settings)
    assert result.outcome is Outcome.NO_RESULT, result.message
    assert result.reason is not RejectReason.RUNTIME_ERROR
    assert result.tainted and "reference step failed" in result.taint[0]
    # The whole exception, not its first lines: what failed is at the end.
    assert FAULT in result.message and "MemoryError" in result.message


def test_the_same_candidate_raising_is_still_a_runtime_error(
    write_candidate: Callable[..., Path], runner_settings: RunnerSettings, tmp_path: Path
) -> None:
    module = write_candidate("bug", "raise RuntimeError('the candidate broke')")
    result = run_evaluation(softmax_request(module, timing=False), tmp_path / "w", runner_settings)
    assert result.outcome is Outcome.RUNTIME_ERROR and result.reason is RejectReason.RUNTIME_ERROR
    assert not result.tainted and "the candidate broke" in result.message


def test_the_output_comparison_running_out_of_memory_is_the_judges_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # H100, 2026-12-07: the unchunked poison count of config 14's output asked for 24.4 GiB.
    def exhausted(out: Any, chunk_elements: int = 0) -> int:
        raise torch.OutOfMemoryError("simulated: CUDA out of memory. Tried to allocate 24.41 GiB")

    monkeypatch.setattr(checks, "count_poisoned", exhausted)
    ctx = softmax_context()
    with pytest.raises(JudgeStepFailure) as failed:
        run_trial(ctx, NaiveSoftmax(), ReferenceCache(NaiveSoftmax(), ctx), TrialSpec(seed=1))
    assert failed.value.step is JudgeStep.COMPARISON and "24.41 GiB" in failed.value.message
