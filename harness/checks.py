"""Correctness checks of the judged arm: trials, aliasing, re-checks, and tamper guards."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.gate import check_output_type, compare_outputs, inputs_unchanged
from harness.judge_failures import JudgeStep, judge_step
from harness.models import RejectReason, TrialResult
from harness.poison import count_poisoned, poisoned_allocations
from kernels.workload import Tolerance, TrialSpec, WorkloadRuntime


@dataclass(frozen=True)
class CheckContext:
    """What every correctness check needs."""

    runtime: WorkloadRuntime
    config: Any
    device: str
    tolerance: Tolerance

    def sync(self) -> None:
        """Wait for all device work (side streams included) before reading outputs."""
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()


def _failure(
    trial: TrialSpec, total: int, reason: RejectReason, problem: str, phase: str
) -> TrialResult:
    return TrialResult(
        trial=trial,
        passed=False,
        failed_elements=total,
        total_elements=total,
        max_abs_error=None,
        problem=problem,
        reason=reason,
        phase=phase,
    )


def classify_output(
    trial: TrialSpec, out: Any, expected: torch.Tensor, tol: Tolerance, phase: str
) -> TrialResult:
    """Type, then unwritten (poisoned) elements, then non-finite values, then the comparator."""
    total = int(expected.numel())
    problem = check_output_type(out, expected)
    if problem is not None:
        return _failure(trial, total, RejectReason.OUTPUT_TYPE, problem, phase)
    poisoned = count_poisoned(out)
    comparison = compare_outputs(out, expected, tol)
    failed = comparison.failed
    reason = None
    if poisoned:
        reason = RejectReason.UNWRITTEN_OUTPUT
    elif failed and comparison.non_finite:  # counted by chunks: no whole-output masks
        reason = RejectReason.NON_FINITE_OUTPUT
    elif failed:
        reason = RejectReason.WRONG_OUTPUT
    return TrialResult(
        trial=trial,
        passed=failed == 0,
        failed_elements=failed,
        total_elements=total,
        max_abs_error=comparison.max_abs,
        tolerance_used=comparison.tolerance_used,
        problem=f"{poisoned} output elements were never written" if poisoned else None,
        reason=reason,
        phase=phase,
    )


@dataclass
class ReferenceCache:
    """Reference outputs computed from pristine copies of the inputs."""

    reference: Any
    ctx: CheckContext

    def expected(self, inputs: tuple[Any, ...]) -> torch.Tensor:
        with torch.no_grad():
            out = self.ctx.runtime.call(self.reference, tuple(t.clone() for t in inputs))
        self.ctx.sync()
        return out


def run_trial(
    ctx: CheckContext, judged: Any, refs: ReferenceCache, trial: TrialSpec, phase: str = "gate"
) -> tuple[TrialResult, Any, tuple[Any, ...]]:
    """Fresh inputs, reference from a pristine copy, the judged arm on poisoned memory."""
    with judge_step(JudgeStep.INPUTS):
        inputs = ctx.runtime.generate_inputs(ctx.config, trial, ctx.device)
        pristine = tuple(t.clone() for t in inputs)
    with judge_step(JudgeStep.REFERENCE):
        expected = refs.expected(pristine)
    with ExitStack() as poisoned:
        with judge_step(JudgeStep.POISON):
            nbytes = expected.numel() * expected.element_size()
            poisoned.enter_context(poisoned_allocations(ctx.device, nbytes))
            ctx.sync()  # the poison fill is not the call's
            held = _allocated(ctx.device)
        started = time.perf_counter()
        out = ctx.runtime.call(judged, inputs)
        ctx.sync()
        call_s = time.perf_counter() - started
    measured = {"call_s": call_s, "peak_bytes": _call_peak_bytes(ctx.device, held, inputs)}
    with judge_step(JudgeStep.COMPARISON):
        unchanged = inputs_unchanged(inputs, pristine)
    if not unchanged:
        total = int(expected.numel())
        problem = "the candidate changed its inputs"
        failure = _failure(trial, total, RejectReason.INPUT_MUTATION, problem, phase)
        return failure.model_copy(update=measured), out, inputs
    # Past the output's type check, counting and comparing its elements is the judge's work:
    # running out of memory there (config 14 on an H100) is not the candidate's failure.
    with judge_step(JudgeStep.COMPARISON):
        verdict = classify_output(trial, out, expected, ctx.tolerance, phase)
    return verdict.model_copy(update=measured), out, inputs


def _allocated(device: str) -> float | None:
    """Device memory held now, with the peak reset to it (None off CUDA)."""
    if not device.startswith("cuda"):
        return None
    torch.cuda.reset_peak_memory_stats(device)
    return float(torch.cuda.memory_allocated(device))


def _call_peak_bytes(device: str, held: float | None, inputs: tuple[Any, ...]) -> float | None:
    """The call's inputs plus the most it allocated on top of what the judge held (the
    judge's own copies and reference outputs are no part of serving the call)."""
    if held is None:
        return None
    input_bytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    return float(input_bytes) + float(torch.cuda.max_memory_allocated(device)) - held


def check_aliasing(
    ctx: CheckContext, judged: Any, refs: ReferenceCache, trials: tuple[TrialSpec, TrialSpec]
) -> TrialResult:
    """A second call must not change the output the first call returned."""
    first, first_out, _ = run_trial(ctx, judged, refs, trials[0], phase="aliasing")
    if not first.passed:
        return first
    kept = first_out.clone()
    second, _, _ = run_trial(ctx, judged, refs, trials[1], phase="aliasing")
    if not second.passed:
        return second
    if not torch.equal(first_out, kept):
        total = int(kept.numel())
        problem = "a later call overwrote the tensor an earlier call returned"
        return _failure(trials[0], total, RejectReason.OUTPUT_ALIASING, problem, "aliasing")
    return first


def _timer_identities() -> dict[str, object]:
    ids: dict[str, object] = {
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.perf_counter": time.perf_counter,
        "time.monotonic": time.monotonic,
        "torch.cuda.synchronize": torch.cuda.synchronize,
    }
    for name in ("record", "elapsed_time", "synchronize", "__init__"):
        ids[f"torch.cuda.Event.{name}"] = getattr(torch.cuda.Event, name)
    return ids


@dataclass
class TamperGuard:
    """Timer functions and Python threads as they were before any candidate code ran."""

    timers: dict[str, object] = field(default_factory=_timer_identities)
    threads: set[int] = field(default_factory=lambda: {t.ident or 0 for t in threading.enumerate()})

    def violation(self) -> tuple[RejectReason, str] | None:
        """What a candidate changed that it must not touch, if anything."""
        now = _timer_identities()
        changed = [name for name, fn in self.timers.items() if now[name] is not fn]
        if changed:
            return RejectReason.TIMER_TAMPERING, f"timer functions replaced: {changed}"
        extra = [t.name for t in threading.enumerate() if (t.ident or 0) not in self.threads]
        if extra:
            return RejectReason.BACKGROUND_THREAD, f"threads left running: {extra}"
        return None


Caller = Callable[[], Any]
