"""The judge subprocess entry point: captures its timers first, writes one structured result."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.models import (
    ArmSpec,
    EvaluationMode,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    RejectReason,
)
from harness.stage_clock import ProcessPhase, phase_clock, seconds_since_process_start
from harness.watchdog import start_watchdog
from kernels.candidate_tree import load_candidate

# Names of the modules the judge loads candidates under; never a name a candidate could shadow.
MODULE_PREFIX = "ratchet_arm_"


@dataclass(frozen=True)
class ResultWriter:
    """Writes the result with functions captured before any candidate code was imported."""

    path: str
    nonce: str
    dumps: Callable[..., str]
    opener: Callable[..., Any]
    replace: Callable[[str, str], None]

    def write(self, result: EvaluationResult) -> None:
        payload = result.model_copy(update={"nonce": self.nonce}).model_dump(mode="json")
        tmp = self.path + ".tmp"
        with self.opener(tmp, "w", encoding="utf-8") as fh:
            fh.write(self.dumps(payload))
        self.replace(tmp, self.path)


@dataclass(frozen=True)
class RunContext:
    """Clock and start time of this judge process, captured before anything else ran."""

    clock: Callable[[], int]
    started_ns: int
    # The judge process's phases outside every config (harness.stage_clock.ProcessPhase).
    phase_s: dict[str, float]


def load_entry(arm: ArmSpec) -> type:
    """Import an arm's entry module (a single file, or the entry of a flat package whose
    sibling modules it imports relatively) and return its entry class."""
    from harness.judge import EvaluationFailure

    assert arm.module_path is not None and arm.entry_point is not None
    try:
        module = load_candidate(Path(arm.module_path), MODULE_PREFIX + arm.name)
    except BaseException:  # a candidate may raise anything, SystemExit included
        message = f"arm {arm.name} failed to import:\n{traceback.format_exc()[-3000:]}"
        raise EvaluationFailure(
            Outcome.COMPILE_ERROR, message, RejectReason.COMPILE_ERROR
        ) from None
    entry = getattr(module, arm.entry_point, None)
    if not isinstance(entry, type):
        message = f"arm {arm.name}: {arm.module_path} defines no class {arm.entry_point!r}"
        raise EvaluationFailure(Outcome.COMPILE_ERROR, message, RejectReason.COMPILE_ERROR)
    return entry


def _result(
    request: EvaluationRequest, ctx: RunContext, outcome: Outcome, message: str, **extra: Any
) -> EvaluationResult:
    return EvaluationResult(
        evaluation_id=request.evaluation_id,
        nonce="",
        outcome=outcome,
        message=message,
        wall_s=(ctx.clock() - ctx.started_ns) / 1e9,
        phase_s=dict(ctx.phase_s),
        **extra,
    )


def run_evaluate(request: EvaluationRequest, ctx: RunContext) -> EvaluationResult:
    """Gate, time and re-check the judged arm (the normal mode)."""
    with phase_clock(ctx.phase_s, ProcessPhase.IMPORT):
        from harness.judge import EvaluationFailure
        from harness.judge_failures import JudgeStepFailure
        from harness.setup import open_judge

    with phase_clock(ctx.phase_s, ProcessPhase.OPEN):
        judge = open_judge(request, ctx.clock)
    if judge is None:
        message = f"device {request.device} is not available on this machine"
        return _result(request, ctx, Outcome.NO_RUN, message, reason=RejectReason.NO_RUN)
    reason, judge_failed = None, []
    try:
        outcome, message, reason = judge.evaluate(load_entry)
    except EvaluationFailure as failure:
        outcome, message, reason = failure.outcome, failure.message, failure.reason
    except JudgeStepFailure as failure:
        # No result, tainted: infrastructure, never scored as the candidate's failure.
        outcome, message = Outcome.NO_RESULT, failure.message
        judge_failed = [f"the judge's own {failure.step.value} step failed"]
    ctx.phase_s.update(judge.phase_s)
    timed = bool(judge.aggregates)
    return _result(
        request,
        ctx,
        outcome,
        message,
        reason=reason,
        configs=judge.configs,
        aggregates=judge.aggregates,
        fingerprint=judge.fingerprint,
        protocol=f"interleaved-abba/{judge.timer.protocol}",
        timer_resolution_ns=judge.timer.resolution_ns() if timed else None,
        tainted=bool(judge.taint or judge_failed),
        taint=judge_failed + judge.taint,
        environment=judge.environment,
    )


def run_qualify(request: EvaluationRequest, ctx: RunContext) -> EvaluationResult:
    """Measure the device's ceilings, timer and launch overhead (no candidate involved)."""
    from harness.qualify import qualify_device

    report = qualify_device(request.device, ctx.clock)
    if report is None:
        message = f"backend of {request.device} is not supported: no measurement is made"
        return _result(request, ctx, Outcome.NO_RUN, message, reason=RejectReason.NO_RUN)
    from harness.fingerprint import collect_fingerprint

    fingerprint = collect_fingerprint(request.device)
    return _result(
        request, ctx, Outcome.PASSED, "qualified", qualification=report, fingerprint=fingerprint
    )


def run_profile(request: EvaluationRequest, ctx: RunContext) -> EvaluationResult:
    """Top kernels of the judged arm on one config; a failure to build or run is an outcome."""
    from harness.judge import EvaluationFailure
    from harness.profiling import profile_arm

    try:
        rows = profile_arm(request, load_entry)
    except EvaluationFailure as failure:
        return _result(request, ctx, failure.outcome, failure.message, reason=failure.reason)
    except Exception:  # the candidate's own error while it ran
        message = f"the profiled arm failed:\n{traceback.format_exc()[-3000:]}"
        return _result(request, ctx, Outcome.RUNTIME_ERROR, message)
    return _result(request, ctx, Outcome.PASSED, "profiled", profile=rows)


def main(argv: list[str]) -> int:
    """Entry point: `python -m harness.worker REQUEST.json RESULT.json`, nonce on stdin."""
    ctx = RunContext(clock=time.perf_counter_ns, started_ns=time.perf_counter_ns(), phase_s={})
    interpreter_s = seconds_since_process_start()
    if interpreter_s is not None:
        ctx.phase_s[ProcessPhase.INTERPRETER.value] = interpreter_s
    exit_now = os._exit  # captured before any candidate code could replace it
    nonce = sys.stdin.readline().strip()
    if len(argv) != 2:
        print("usage: python -m harness.worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    writer = ResultWriter(argv[1], nonce, json.dumps, open, os.replace)
    request = EvaluationRequest.model_validate_json(Path(argv[0]).read_text(encoding="utf-8"))
    start_watchdog(request.deadline_s)
    if request.mode is EvaluationMode.QUALIFY:
        writer.write(run_qualify(request, ctx))
    elif request.mode is EvaluationMode.PROFILE:
        writer.write(run_profile(request, ctx))
    else:
        writer.write(run_evaluate(request, ctx))
    # No interpreter teardown with candidate code loaded: a thread it left running may abort
    # the process at exit, after the verdict that already names it.
    sys.stdout.flush()
    sys.stderr.flush()
    exit_now(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
