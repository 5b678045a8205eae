"""The judge subprocess: correctness gate, then interleaved timing; writes one structured result."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.models import (
    ArmKind,
    ArmSpec,
    ConfigResult,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    RatioStats,
)
from harness.watchdog import start_watchdog
from kernels.workload import Workload

# Names of the modules the judge loads candidates under; never a name a candidate could shadow.
MODULE_PREFIX = "ratchet_arm_"


class EvaluationFailure(Exception):
    """A candidate-caused failure that ends the evaluation with an outcome (never escapes)."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


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


def _tail() -> str:
    return traceback.format_exc()[-3000:]


def load_entry(arm: ArmSpec) -> type:
    """Import an arm's module from its file and return its entry class."""
    assert arm.module_path is not None and arm.entry_point is not None
    name = MODULE_PREFIX + arm.name
    spec = importlib.util.spec_from_file_location(name, arm.module_path)
    if spec is None or spec.loader is None:
        raise EvaluationFailure(Outcome.COMPILE_ERROR, f"cannot load {arm.module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:  # a candidate may raise anything, SystemExit included
        raise EvaluationFailure(
            Outcome.COMPILE_ERROR, f"arm {arm.name} failed to import:\n{_tail()}"
        ) from None
    entry = getattr(module, arm.entry_point, None)
    if not isinstance(entry, type):
        raise EvaluationFailure(
            Outcome.COMPILE_ERROR,
            f"arm {arm.name}: {arm.module_path} defines no class {arm.entry_point!r}",
        )
    return entry


@dataclass(frozen=True)
class RunContext:
    """Clock and start time of this judge process, captured before anything else ran."""

    clock: Callable[[], int]
    started_ns: int


def make_result(
    request: EvaluationRequest,
    ctx: RunContext,
    outcome: Outcome,
    message: str,
    judge: Judge | None = None,
) -> EvaluationResult:
    """A result for the request; measurements come from the judge when there is one."""
    configs = judge.configs if judge else []
    aggregates = judge.aggregates if judge else []
    timed = judge is not None and bool(aggregates)
    return EvaluationResult(
        evaluation_id=request.evaluation_id,
        nonce="",
        outcome=outcome,
        message=message,
        configs=configs,
        aggregates=aggregates,
        fingerprint=judge.fingerprint if judge else {},
        protocol=f"interleaved-abba/{judge.timer.protocol}" if judge else "",
        timer_resolution_ns=judge.timer.resolution_ns() if timed and judge else None,
        wall_s=(ctx.clock() - ctx.started_ns) / 1e9,
    )


@dataclass
class Judge:
    """One evaluation in this process: the workload runtime, timers and loaded arms."""

    request: EvaluationRequest
    workload: Workload
    runtime: Any
    timer: Any
    rng: Any
    clock: Callable[[], int]
    fingerprint: dict[str, Any]
    entries: dict[str, type] = field(default_factory=dict)
    configs: list[ConfigResult] = field(default_factory=list)
    aggregates: list[RatioStats] = field(default_factory=list)

    def evaluate(self) -> tuple[Outcome, str]:
        """Gate every config, then time the arms only if the judged arm passed everywhere."""
        req = self.request
        self.entries = {arm.name: load_entry(arm) for arm in req.arms if arm.kind is ArmKind.MODULE}
        self.configs = [self._check_config(cid) for cid in req.config_ids]
        if not all(c.correct for c in self.configs):
            bad = [c.config_id for c in self.configs if not c.correct]
            return Outcome.INCORRECT, f"failed correctness on configs {bad}"
        if req.timing is None or len(req.arms) < 2:
            return Outcome.PASSED, "correct (no timing requested)"
        logs = {c.config_id: self._time_config(c) for c in self.configs}
        self.aggregates = self._aggregate(logs)
        return Outcome.PASSED, "correct and timed"

    def _build(self, arm: ArmSpec, config: Any, reference: Any) -> Any:
        if arm.kind is ArmKind.REFERENCE:
            return reference
        try:
            return self.runtime.build_candidate(
                self.entries[arm.name], reference, config, self.request.device
            )
        except BaseException:
            raise EvaluationFailure(
                Outcome.RUNTIME_ERROR, f"arm {arm.name} failed to build:\n{_tail()}"
            ) from None

    def _arm(self, name: str) -> ArmSpec:
        return next(a for a in self.request.arms if a.name == name)

    def _check_config(self, config_id: str) -> ConfigResult:
        from harness.gate import inputs_unchanged, judge_trial

        req, runtime = self.request, self.runtime
        config = self.workload.configs[config_id]
        reference = runtime.build_reference(config, req.device)
        judged = self._build(self._arm(req.judged_arm), config, reference)
        result = ConfigResult(config_id=config_id)
        for trial in req.trials:
            inputs = runtime.generate_inputs(config, trial, req.device)
            pristine = tuple(t.clone() for t in inputs)
            expected = runtime.call(reference, tuple(t.clone() for t in pristine))
            try:
                out = runtime.call(judged, inputs)
            except BaseException:
                raise EvaluationFailure(
                    Outcome.RUNTIME_ERROR,
                    f"{req.judged_arm} raised on config {config_id}:\n{_tail()}",
                ) from None
            unchanged = inputs_unchanged(inputs, pristine)
            problem = None if unchanged else "the candidate mutated its inputs"
            result.trials.append(
                judge_trial(trial, out, expected, self.workload.tolerance, problem)
            )
            if not result.trials[-1].passed:
                break  # a failing candidate gets no timing; later trials add nothing
        return result

    def _time_config(self, result: ConfigResult) -> dict[str, list[float]]:
        from harness.timing import time_arms
        from kernels.workload import TrialSpec

        req, runtime = self.request, self.runtime
        assert req.timing is not None
        config = self.workload.configs[result.config_id]
        reference = runtime.build_reference(config, req.device)
        models = {arm.name: self._build(arm, config, reference) for arm in req.arms}
        seed = self.workload.official_trials[0].seed + self.workload.timing_seed_offset
        inputs = runtime.generate_inputs(config, TrialSpec(seed=seed), req.device)
        calls = {name: _bind(runtime.call, model, inputs) for name, model in models.items()}
        try:
            log, stats = time_arms(
                calls, req.judged_arm, req.timing, self.timer, self.rng, self.clock
            )
        except BaseException:
            raise EvaluationFailure(
                Outcome.RUNTIME_ERROR,
                f"an arm raised while timed on config {result.config_id}:\n{_tail()}",
            ) from None
        result.timings = log.arm_timings()
        result.ratios = stats
        result.rounds = len(log.rounds[req.judged_arm])
        return log.rounds

    def _aggregate(self, logs: dict[str, dict[str, list[float]]]) -> list[RatioStats]:
        from harness.stats import aggregate_ratio_stats, paired_log_ratios

        req = self.request
        assert req.timing is not None
        out = []
        for arm in req.arms:
            if arm.name == req.judged_arm:
                continue
            per_config = {
                cid: paired_log_ratios(rounds[req.judged_arm], rounds[arm.name])
                for cid, rounds in logs.items()
            }
            names = (req.judged_arm, arm.name)
            resamples = req.timing.bootstrap_resamples
            weights = req.config_weights
            out.append(aggregate_ratio_stats(names, per_config, weights, resamples, self.rng))
        return out


def open_judge(request: EvaluationRequest, ctx: RunContext) -> Judge | None:
    """Load the workload runtime and timers; None when the device is not available."""
    import numpy as np
    import torch

    from harness.fingerprint import collect_fingerprint
    from harness.timing import CpuTimer, CudaTimer
    from kernels.registry import resolve_workload

    if request.device.startswith("cuda") and not torch.cuda.is_available():
        return None
    # The timers bind the clock and CUDA event functions now, before any candidate is imported.
    timer: Any = CpuTimer(ctx.clock)
    if request.device.startswith("cuda"):
        torch.cuda.set_device(torch.device(request.device))
        timer = CudaTimer(torch.cuda.Event, torch.cuda.synchronize)
    workload = resolve_workload(request.workload)
    runtime = workload.load_runtime()
    runtime.prepare_process(request.device)
    if request.torch_threads:
        torch.set_num_threads(request.torch_threads)
    return Judge(
        request=request,
        workload=workload,
        runtime=runtime,
        timer=timer,
        rng=np.random.default_rng(request.seed),
        clock=ctx.clock,
        fingerprint=collect_fingerprint(request.device),
    )


def _bind(call: Callable[[Any, Any], Any], model: Any, inputs: Any) -> Callable[[], Any]:
    return lambda: call(model, inputs)


def main(argv: list[str]) -> int:
    """Entry point: `python -m harness.worker REQUEST.json RESULT.json`, nonce on stdin."""
    ctx = RunContext(clock=time.perf_counter_ns, started_ns=time.perf_counter_ns())
    nonce = sys.stdin.readline().strip()
    if len(argv) != 2:
        print("usage: python -m harness.worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    writer = ResultWriter(argv[1], nonce, json.dumps, open, os.replace)
    request = EvaluationRequest.model_validate_json(Path(argv[0]).read_text(encoding="utf-8"))
    start_watchdog(request.deadline_s)
    judge = open_judge(request, ctx)
    if judge is None:
        message = f"device {request.device} is not available on this machine"
        writer.write(make_result(request, ctx, Outcome.NO_RUN, message))
        return 0
    try:
        outcome, message = judge.evaluate()
    except EvaluationFailure as failure:
        outcome, message = failure.outcome, failure.message
    writer.write(make_result(request, ctx, outcome, message, judge))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
