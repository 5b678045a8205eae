"""One evaluation inside the judge process: gate every config, then time, spot-check, re-check."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from harness.checks import (
    CheckContext,
    ReferenceCache,
    TamperGuard,
    check_aliasing,
    classify_output,
    run_trial,
)
from harness.compile_state import forget_compiled_frames
from harness.contention import (
    GpuReading,
    cpu_snapshot,
    describe,
    foreign_cpu_limit,
    gpu_uuid_of,
    judge_taint,
)
from harness.gate import inputs_unchanged
from harness.judge_failures import (
    EvaluationFailure,
    JudgeStepFailure,
    describe_failure,
    inference_failure,
    reject,
    say,
    tail_traceback,
)
from harness.models import (
    ArmKind,
    ArmSpec,
    ConfigResult,
    EvaluationRequest,
    Outcome,
    RatioStats,
    RejectReason,
    TrialResult,
)
from harness.stage_clock import JudgePhase, ProcessPhase, phase_clock
from harness.supervisor import host_parent_pid, host_pid
from harness.timing import ArmPlan, BlockTimer, TimingJob, calibrate_calls, time_arms
from kernels.workload import TrialSpec, Workload, WorkloadRuntime

SIDE_STREAM_RATIO = 3.0
ROOFLINE_SAFETY = 0.5  # FLOPs and bytes are lower bounds; an fp8 path may double the rate


class InputPool:
    """Input sets whose values are redrawn in place before every block: the same buffers (a
    pointer cache goes stale) with new content (a content cache never hits)."""

    def __init__(self, runtime: WorkloadRuntime, config: Any, device: str, size: int, seed: int):
        self.runtime, self.config, self.device = runtime, config, device
        self.seeds = np.random.default_rng(seed)
        self.sets = [self._draw() for _ in range(size)]

    def _draw(self) -> tuple[Any, ...]:
        trial = TrialSpec(seed=int(self.seeds.integers(0, 2**31 - 1)))
        return self.runtime.generate_inputs(self.config, trial, self.device)

    def refresh(self) -> None:
        for current in self.sets:
            for old, new in zip(current, self._draw(), strict=True):
                old.copy_(new)


@dataclass
class Judge:
    """The workload runtime, timers and loaded arms of this judge process."""

    request: EvaluationRequest
    workload: Workload
    runtime: WorkloadRuntime
    timer: BlockTimer
    rng: np.random.Generator
    clock: Callable[[], int]
    fingerprint: dict[str, Any]
    guard: TamperGuard
    flush: Callable[[], Any] | None = None
    entries: dict[str, type] = field(default_factory=dict)
    configs: list[ConfigResult] = field(default_factory=list)
    aggregates: list[RatioStats] = field(default_factory=list)
    taint: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    phase_s: dict[str, float] = field(default_factory=dict)

    def _check_guard(self) -> None:
        violation = self.guard.violation()
        if violation is not None:
            raise reject(*violation)

    def _build(self, arm: ArmSpec, config: Any, reference: Any) -> Any:
        if arm.kind is ArmKind.REFERENCE:
            return reference
        try:
            model = self.runtime.build_candidate(
                self.entries[arm.name], reference, config, self.request.device
            )
        except BaseException:
            message = f"arm {arm.name} failed to build:\n{tail_traceback()}"
            raise EvaluationFailure(
                Outcome.RUNTIME_ERROR, message, RejectReason.RUNTIME_ERROR
            ) from None
        self._check_guard()
        return model

    def _arm(self, name: str) -> ArmSpec:
        return next(a for a in self.request.arms if a.name == name)

    def _context(self, config: Any) -> CheckContext:
        return CheckContext(self.runtime, config, self.request.device, self.workload.tolerance)

    def evaluate(
        self, load_entry: Callable[[ArmSpec], type]
    ) -> tuple[Outcome, str, RejectReason | None]:
        """Gate every config, then time and re-check only if the judged arm passed everywhere
        (or, with time_past_failures, on the configs it passed)."""
        req = self.request
        with phase_clock(self.phase_s, ProcessPhase.LOAD):
            self.entries = {a.name: load_entry(a) for a in req.arms if a.kind is ArmKind.MODULE}
        self._check_guard()
        self.configs = [self._check_config(cid) for cid in req.config_ids]
        self._check_guard()
        gate_failure = self._gate_failure()
        if gate_failure is not None and not req.time_past_failures:
            raise gate_failure
        timed = [c for c in self.configs if c.correct and c.config_id not in req.oracle_config_ids]
        if req.timing is None or len(req.arms) < 2 or not timed:
            if gate_failure is not None:
                raise gate_failure
            return Outcome.PASSED, "correct (no timing requested)", None
        logs, recheck_failure = {}, None
        for config in timed:
            try:
                logs[config.config_id] = self._time_config(config)
            except EvaluationFailure as late:
                # Only a failed re-check leaves a failing trial on the config; the other
                # configs still show where the variant is fast. Anything else ends it here.
                if not req.time_past_failures or config.correct:
                    raise
                recheck_failure = recheck_failure or late
        self._check_guard()
        first_failure = gate_failure or recheck_failure
        if first_failure is not None:
            raise first_failure
        self.aggregates = self._aggregate(logs)
        return Outcome.PASSED, "correct and timed", None

    def _gate_failure(self) -> EvaluationFailure | None:
        """INCORRECT naming every config that failed the gate and its first failure, if any."""
        failing = [t for c in self.configs for t in c.trials if not t.passed]
        if not failing:
            return None
        bad = [c.config_id for c in self.configs if not c.correct]
        message = f"failed correctness on configs {bad}: {describe_failure(failing[0])}"
        return EvaluationFailure(Outcome.INCORRECT, message, failing[0].reason)

    def _check_config(self, config_id: str) -> ConfigResult:
        req = self.request
        oracle = config_id in req.oracle_config_ids
        say(f"config {config_id}: correctness" + (" (memory-bounded oracle)" if oracle else ""))
        config = self.workload.configs[config_id]
        result = ConfigResult(config_id=config_id)
        with phase_clock(result.phase_s, JudgePhase.CHECK_BUILD):
            forget_compiled_frames()
            reference = self.runtime.build_reference(config, req.device)
            judged = self._build(self._arm(req.judged_arm), config, reference)
            if oracle:
                reference = self.runtime.build_oracle(reference, config, req.device)
        ctx, refs = self._context(config), ReferenceCache(reference, self._context(config))
        alive: list[Any] = []  # inputs stay allocated so no two trials share an address
        with phase_clock(result.phase_s, JudgePhase.CHECK_TRIALS):
            passed = self._run_trials(ctx, (refs, judged, alive), result)
        # Read where it failed too: a repair applies only ideas that act in that code.
        result.settings_read = self._settings_read(judged)
        if not passed:
            return result  # a failing candidate gets no timing; later checks add nothing
        with phase_clock(result.phase_s, JudgePhase.CHECK_EXTRA):
            if len(req.trials) >= 2 and not oracle:
                aliasing = check_aliasing(ctx, judged, refs, (req.trials[0], req.trials[-1]))
                if not aliasing.passed:
                    result.trials.append(aliasing)
                elif self.request.inference_mode_check:
                    served = self._served(config, reference, ctx, refs)
                    if not served.passed:
                        result.trials.append(served)
            if oracle:
                result.feasibility = feasibility_of(result.trials)
        return result

    def _run_trials(
        self,
        ctx: CheckContext,
        checked: tuple[ReferenceCache, Any, list[Any]],
        result: ConfigResult,
    ) -> bool:
        """The correctness trials of one config, into result; False at the first failure.
        checked: the reference outputs, the judged model, and the list that keeps every
        trial's inputs allocated until the config's checks end."""
        refs, judged, alive = checked
        for trial in self._trials_for(result.config_id):
            try:
                verdict, _, inputs = run_trial(ctx, judged, refs, trial)
            except JudgeStepFailure:
                raise  # the judge's own step: infrastructure, never the candidate's failure
            except BaseException:
                message = f"{self.request.judged_arm} raised on config {result.config_id}:\n"
                raise EvaluationFailure(
                    Outcome.RUNTIME_ERROR, message + tail_traceback(), RejectReason.RUNTIME_ERROR
                ) from None
            alive.append(inputs)
            result.trials.append(verdict)
            if not verdict.passed:
                return False
        return True

    def _settings_read(self, model: Any) -> list[str] | None:
        """What the judged arm's recorder says its code read (optional runtime hook)."""
        hook = getattr(self.runtime, "settings_read", None)
        return hook(model) if callable(hook) else None

    def _served(
        self, config: Any, reference: Any, ctx: CheckContext, refs: ReferenceCache
    ) -> TrialResult:
        """Built and called under torch.inference_mode(), as a user serving it would: its
        weights are then inference tensors, which carry no version counter."""
        trial = self.request.trials[0]
        try:
            with torch.inference_mode():
                model = self._build(self._arm(self.request.judged_arm), config, reference)
                verdict, _, _ = run_trial(ctx, model, refs, trial, phase="inference_mode")
        except JudgeStepFailure:
            raise
        except EvaluationFailure as failure:
            problem = f"built under torch.inference_mode(): {failure.message[-600:]}"
            return inference_failure(trial, problem)
        except Exception:  # the candidate's own error, under inference mode only
            problem = f"called under torch.inference_mode(): {tail_traceback()}"
            return inference_failure(trial, problem)
        return verdict

    def _trials_for(self, config_id: str) -> list[TrialSpec]:
        trials = list(self.request.trials)
        if config_id not in self.request.oracle_config_ids:
            return trials
        # A full-scale oracle pass takes minutes and each trial's tensors take tens of GB
        # (track3 config 14): the first trial and the first padded one.
        padded = next((t for t in trials[1:] if t.padding_ratio > 0), None)
        return trials[:1] + ([padded] if padded else [])

    def _arm_plan(self, model: Any, config: Any, calls: int, per_call: bool) -> ArmPlan:
        plan = self.request.timing
        assert plan is not None
        size = 1 if per_call else calls
        pool = InputPool(
            self.runtime, config, self.request.device, size, int(self.rng.integers(2**31))
        )
        call = self.runtime.call
        bound = [_bind(call, model, pool.sets[i % size]) for i in range(calls)]
        flush = self.flush if per_call and plan.l2_flush else None
        return ArmPlan(
            calls=bound,
            flush=flush,
            refresh=pool.refresh,
            pick_inputs=lambda i: pool.sets[i % size],
            mode=("per-call+l2flush" if flush else "per-call") if per_call else f"batched-{calls}",
        )

    def _spot_checker(
        self, config: Any, refs: ReferenceCache
    ) -> Callable[[Any, tuple[Any, ...], tuple[Any, ...]], None]:
        ctx = self._context(config)

        def check(out: Any, pristine: tuple[Any, ...], inputs: tuple[Any, ...]) -> None:
            ctx.sync()
            if not inputs_unchanged(inputs, pristine):
                raise reject(RejectReason.INPUT_MUTATION, "a timed call changed its inputs")
            expected = refs.expected(pristine)
            verdict = classify_output(TrialSpec(seed=0), out, expected, ctx.tolerance, "spot_check")
            if not verdict.passed:
                raise reject(
                    RejectReason.TIMED_OUTPUT_WRONG,
                    f"the output of a timed call is wrong ({verdict.reason}: "
                    f"{verdict.failed_elements} elements): correct only when checked",
                )

        return check

    def _time_config(self, result: ConfigResult) -> dict[str, list[float]]:
        req = self.request
        say(f"config {result.config_id}: timing {len(req.arms)} arms")
        assert req.timing is not None
        config = self.workload.configs[result.config_id]
        gpu_uuid = gpu_uuid_of(req.device)
        # The GPU readings run while the arms are built and warmed up (untimed work).
        before_gpu = GpuReading(req.device, gpu_uuid)
        try:
            with phase_clock(result.phase_s, JudgePhase.TIMING_BUILD):
                forget_compiled_frames()
                reference = self.runtime.build_reference(config, req.device)
                models = {arm.name: self._build(arm, config, reference) for arm in req.arms}
            with phase_clock(result.phase_s, JudgePhase.TIMING_WARMUP):
                plans, calls = self._plans(models, config)
        except BaseException:
            before_gpu.discard()
            raise
        with phase_clock(result.phase_s, JudgePhase.CONTENTION_WAIT):
            before = before_gpu.complete()
        job = TimingJob(
            arms=plans,
            judged=req.judged_arm,
            plan=req.timing,
            timer=self.timer,
            rng=self.rng,
            clock=self.clock,
            spot_check=self._spot_checker(config, ReferenceCache(reference, self._context(config))),
            reference_arms=frozenset(a.name for a in req.arms if a.kind is ArmKind.REFERENCE),
        )
        try:
            with phase_clock(result.phase_s, JudgePhase.TIMING_ROUNDS):
                log, stats = time_arms(job, calls)
        except EvaluationFailure:
            raise
        except BaseException:
            message = f"an arm raised while timed on config {result.config_id}:\n{tail_traceback()}"
            raise EvaluationFailure(
                Outcome.RUNTIME_ERROR, message, RejectReason.RUNTIME_ERROR
            ) from None
        # CPU ticks now; the GPU readings run during the re-check and are collected after it.
        after_cpu = cpu_snapshot()
        after_gpu = GpuReading(req.device, gpu_uuid)
        result.timings, result.ratios = log.arm_timings(), stats
        result.rounds = len(log.rounds[req.judged_arm])
        result.protocol = plans[req.judged_arm].mode
        result.host_over_device = float(np.median(log.host_ratio[req.judged_arm]))
        try:
            self._plausibility(result, config)
            with phase_clock(result.phase_s, JudgePhase.RECHECK):
                self._recheck(config, reference, models[req.judged_arm], result)
        except BaseException:
            after_gpu.discard()
            raise
        with phase_clock(result.phase_s, JudgePhase.CONTENTION_WAIT):
            after = after_gpu.complete(after_cpu)
        # The judge's own CUDA context is not contention (host pids: nvidia-smi reports those,
        # whether or not the judge runs in a PID namespace).
        ours = {host_pid(), host_parent_pid()}
        taint = judge_taint(before, after, ours, foreign_cpu_limit(req.device, os.cpu_count()))
        self.taint += [f"config {result.config_id}: {t}" for t in taint]
        self.environment[result.config_id] = {"before": describe(before), "after": describe(after)}
        return log.rounds

    def _plans(
        self, models: dict[str, Any], config: Any
    ) -> tuple[dict[str, ArmPlan], dict[str, int]]:
        plan = self.request.timing
        assert plan is not None
        warm = InputPool(
            self.runtime, config, self.request.device, 1, int(self.rng.integers(2**31))
        )
        plans, calls = {}, {}
        for name, model in models.items():
            fn = _bind(self.runtime.call, model, warm.sets[0])
            for _ in range(plan.warmup_calls):
                fn()
            count, cost = calibrate_calls(fn, self.timer, plan.target_block_s)
            per_call = cost >= plan.per_call_threshold_s * 1e9 and self.request.device.startswith(
                "cuda"
            )
            # Never more calls in a block than distinct input sets: a call that saw bytes an
            # earlier call of the block saw would let a cache keyed on content hit.
            calls[name] = 1 if per_call else min(count, plan.max_input_sets)
            plans[name] = self._arm_plan(model, config, calls[name], per_call)
        return plans, calls

    def _plausibility(self, result: ConfigResult, config: Any) -> None:
        peaks = self.request.device_peaks
        judged = next(t for t in result.timings if t.arm == self.request.judged_arm)
        ratio = result.host_over_device or 0.0
        if self.request.device.startswith("cuda") and ratio > SIDE_STREAM_RATIO:
            raise reject(
                RejectReason.SIDE_STREAM_WORK,
                f"host time is {ratio:.1f}x the event time on config "
                f"{result.config_id}: work ran outside the timed stream",
            )
        if peaks is None:
            return
        flops, nbytes = self.runtime.cost(config)
        floor = ROOFLINE_SAFETY * max(
            flops / peaks.matmul_flops_per_s, nbytes / peaks.copy_bytes_per_s
        )
        result.floor_ns = floor * 1e9
        if judged.median_ns < result.floor_ns:
            raise reject(
                RejectReason.IMPLAUSIBLE_TIME,
                f"config {result.config_id}: {judged.median_ns:.0f} ns per call is below the "
                f"roofline floor {result.floor_ns:.0f} ns: physically impossible",
            )

    def _recheck(self, config: Any, reference: Any, judged: Any, result: ConfigResult) -> None:
        ctx = self._context(config)
        refs = ReferenceCache(reference, ctx)
        for trial in self.request.recheck_trials:
            verdict, _, _ = run_trial(ctx, judged, refs, trial, phase="recheck")
            if not verdict.passed:
                result.trials.append(verdict)
                raise reject(
                    RejectReason.TIMED_OUTPUT_WRONG,
                    f"after timing, config {result.config_id} fails on fresh inputs "
                    f"({verdict.reason}: {verdict.failed_elements} elements)",
                )

    def _aggregate(self, logs: dict[str, dict[str, list[float]]]) -> list[RatioStats]:
        from harness.stats import aggregate_ratio_stats, paired_prefix_log_ratios

        req = self.request
        assert req.timing is not None
        out = []
        for arm in req.arms:
            if arm.name == req.judged_arm:
                continue
            per_config = {
                cid: paired_prefix_log_ratios(rounds[req.judged_arm], rounds[arm.name])
                for cid, rounds in logs.items()
            }
            names = (req.judged_arm, arm.name)
            resamples = req.timing.bootstrap_resamples
            out.append(
                aggregate_ratio_stats(names, per_config, req.config_weights, resamples, self.rng)
            )
        return out


def feasibility_of(trials: list[TrialResult]) -> dict[str, float]:
    """What a memory-bounded config's check says of serving it, from the calls its trials
    made (a separate call took 42 s on track3's config 14): the faster call's latency (the
    first may include compiling) and the most device memory a call needed."""
    timed = [(t.call_s, t) for t in trials if t.call_s is not None]
    if not timed:
        return {}
    latency, fastest = min(timed, key=lambda pair: pair[0])
    report = {"latency_s": latency, "elements": float(fastest.total_elements)}
    peaks = [t.peak_bytes for _, t in timed if t.peak_bytes is not None]
    if peaks:
        report["peak_memory_bytes"] = max(peaks)
    return report


def _bind(call: Callable[[Any, Any], Any], model: Any, inputs: Any) -> Callable[[], Any]:
    return lambda: call(model, inputs)


TrialResults = list[TrialResult]
