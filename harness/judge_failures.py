"""How the judge fails a candidate: the failure it raises, its outcome, and its message."""

from __future__ import annotations

import enum
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from harness.models import PROGRESS_PREFIX, Outcome, RejectReason, TrialResult
from kernels.workload import TrialSpec

INTEGRITY = {
    RejectReason.TIMER_TAMPERING,
    RejectReason.BACKGROUND_THREAD,
    RejectReason.SIDE_STREAM_WORK,
    RejectReason.IMPLAUSIBLE_TIME,
}


class EvaluationFailure(Exception):
    """A candidate-caused failure that ends the evaluation with an outcome and a reason."""

    def __init__(self, outcome: Outcome, message: str, reason: RejectReason | None) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        self.reason = reason


class JudgeStep(enum.StrEnum):
    """A step of a trial that is the judge's own work, not the candidate's."""

    INPUTS = "input generation"
    REFERENCE = "reference"
    POISON = "poison fill"
    COMPARISON = "output comparison"


class JudgeStepFailure(Exception):
    """The judge's own step failed (infrastructure): it says nothing of the candidate, so it
    is never scored as the candidate's failure (run 18: the judge's poison fill ran an 80 GB
    card out of memory on config 14 and the frontier was failed as 'candidate raised')."""

    def __init__(self, step: JudgeStep, message: str) -> None:
        super().__init__(message)
        self.step = step
        self.message = message


@contextmanager
def judge_step(step: JudgeStep) -> Iterator[None]:
    """Within the block, an exception is the judge's: raised again as JudgeStepFailure."""
    try:
        yield
    except JudgeStepFailure:
        raise
    except Exception as exc:
        message = f"the judge's own {step.value} step failed (not the candidate):\n"
        raise JudgeStepFailure(step, message + tail_traceback()) from exc


def tail_traceback() -> str:
    """The end of the exception being handled, for a message."""
    return traceback.format_exc()[-3000:]


def inference_failure(trial: TrialSpec, problem: str) -> TrialResult:
    """A candidate that works only outside torch.inference_mode()."""
    return TrialResult(
        trial=trial,
        passed=False,
        failed_elements=0,
        total_elements=0,
        max_abs_error=None,
        problem=problem[-1500:],
        reason=RejectReason.RUNTIME_ERROR,
        phase="inference_mode",
    )


def say(text: str) -> None:
    """A progress line for the launcher (the log's PROGRESS_PREFIX lines)."""
    print(PROGRESS_PREFIX + text, flush=True)


def describe_failure(trial: TrialResult) -> str:
    """What went wrong in one trial, never an empty cause."""
    reason = trial.reason.value if trial.reason else "wrong_output"
    where = f"trial seed {trial.trial.seed} ({trial.phase})"
    if trial.problem:
        return f"{reason}: {trial.problem} [{where}]"
    error = f", largest |out - ref| {trial.max_abs_error:.3g}" if trial.max_abs_error else ""
    return (
        f"{reason}: {trial.failed_elements} of {trial.total_elements} output elements outside "
        f"the tolerance{error} [{where}]"
    )


def reject(reason: RejectReason, message: str) -> EvaluationFailure:
    """The failure for a rejection reason (integrity reasons are REJECTED, others INCORRECT)."""
    outcome = Outcome.REJECTED if reason in INTEGRITY else Outcome.INCORRECT
    return EvaluationFailure(outcome, message, reason)
