"""Interleaved timing: randomized ABBA rounds of every arm on fresh inputs, stopping on CI
precision; outputs of the judged arm are spot-checked while it is timed."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from harness.models import ArmTiming, RatioStats, TimingPlan
from harness.stats import half_width, paired_prefix_log_ratios, ratio_stats

Call = Callable[[], Any]


@dataclass
class BlockTime:
    """One timed block: device time, host time around it, and the last call's output."""

    device_ns: float
    host_ns: float
    last_output: Any = None


class BlockTimer(Protocol):
    """Times a list of calls; `flush` (per-call mode) runs untimed before each call."""

    protocol: str

    def time_calls(self, calls: list[Call], flush: Call | None) -> BlockTime:
        """Total time of the calls."""

    def resolution_ns(self) -> float:
        """Smallest interval the timer can tell apart."""


class CpuTimer:
    """Wall clock around a block; the clock function is captured before candidates load."""

    protocol = "cpu-perf_counter_ns"

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock

    def time_calls(self, calls: list[Call], flush: Call | None) -> BlockTime:
        clock = self._clock
        out = None
        start = clock()
        for call in calls:
            out = call()
        elapsed = float(clock() - start)
        return BlockTime(device_ns=elapsed, host_ns=elapsed, last_output=out)

    def resolution_ns(self) -> float:
        clock = self._clock
        deltas = []
        for _ in range(200):
            a = clock()
            b = clock()
            while b == a:
                b = clock()
            deltas.append(b - a)
        return float(min(deltas))


@dataclass(frozen=True)
class CudaFunctions:
    """CUDA timing functions bound before any candidate code could replace them."""

    event: Any
    record: Callable[..., Any]
    elapsed: Callable[[Any, Any], float]
    synchronize: Callable[[], None]


class CudaTimer:
    """CUDA events on the current stream; a device-wide sync ends each block so work hidden on
    other streams shows up as host time the events did not see."""

    protocol = "cuda-events"

    def __init__(self, fns: CudaFunctions, clock: Callable[[], int]) -> None:
        self._fns = fns
        self._clock = clock

    def _pair(self) -> tuple[Any, Any]:
        return self._fns.event(enable_timing=True), self._fns.event(enable_timing=True)

    def time_calls(self, calls: list[Call], flush: Call | None) -> BlockTime:
        fns, clock = self._fns, self._clock
        out = None
        if flush is None:
            start, end = self._pair()
            host = clock()
            fns.record(start)
            for call in calls:
                out = call()
            fns.record(end)
            fns.synchronize()
            host_ns = float(clock() - host)
            return BlockTime(fns.elapsed(start, end) * 1e6, host_ns, out)
        device_ns = host_ns = 0.0
        for call in calls:
            flush()
            fns.synchronize()
            start, end = self._pair()
            host = clock()
            fns.record(start)
            out = call()
            fns.record(end)
            fns.synchronize()
            host_ns += clock() - host
            device_ns += fns.elapsed(start, end) * 1e6
        return BlockTime(device_ns, host_ns, out)

    def resolution_ns(self) -> float:
        """The timer's quantum: the smallest step between distinct readings of a tiny interval
        (not the latency between two records, which is much larger)."""
        readings = set()
        for _ in range(200):
            start, end = self._pair()
            self._fns.record(start)
            self._fns.record(end)
            self._fns.synchronize()
            readings.add(round(self._fns.elapsed(start, end) * 1e6, 1))
        steps = [b - a for a, b in zip(sorted(readings), sorted(readings)[1:], strict=False)]
        positive = [s for s in steps if s > 0]
        return min(positive) if positive else (max(readings) if readings else 0.0)


@dataclass
class ArmPlan:
    """How one arm is timed: its calls (rotating over input sets) and its block mode."""

    calls: list[Call]
    flush: Call | None
    refresh: Call
    pick_inputs: Callable[[int], tuple[Any, ...]]
    mode: str = "batched"


SpotCheck = Callable[[Any, tuple[Any, ...], tuple[Any, ...]], None]


@dataclass
class RoundLog:
    """Raw blocks and per-round means of every arm."""

    calls: dict[str, int]
    blocks: dict[str, list[float]] = field(default_factory=dict)
    rounds: dict[str, list[float]] = field(default_factory=dict)
    host_ratio: dict[str, list[float]] = field(default_factory=dict)
    protocols: dict[str, str] = field(default_factory=dict)

    def arm_timings(self) -> list[ArmTiming]:
        return [
            ArmTiming(
                arm=name,
                calls_per_block=self.calls[name],
                samples_ns=samples,
                median_ns=float(np.median(samples)),
                protocol=self.protocols.get(name, ""),
            )
            for name, samples in self.blocks.items()
        ]


def calibrate_calls(fn: Call, timer: BlockTimer, target_block_s: float) -> tuple[int, float]:
    """(calls per block so that a block lasts about target_block_s, ns one call costs inside a
    block). The cost is read from whole blocks, not from one isolated call: a host-bound call's
    isolated latency (launch and sync included) can be twice its cost in a block and sat on the
    per-call threshold, so the same code was timed per call in one run and batched in the next
    (docs/results/track3-h200-repeats.md)."""

    def calls_for(cost_ns: float) -> int:
        return max(1, min(10_000, math.ceil(target_block_s * 1e9 / max(cost_ns, 1.0))))

    single = sorted(timer.time_calls([fn], None).device_ns for _ in range(3))[1]
    calls = calls_for(single)
    if calls == 1:
        return 1, single
    block = sorted(timer.time_calls([fn] * calls, None).device_ns for _ in range(3))[1]
    cost = block / calls
    return calls_for(cost), cost


# The bootstrap behind the stop test costs milliseconds and grows with the rounds, so it runs
# when the rounds have grown by this factor since the last test, not after every round: at 1%
# per-round tests it took about a second of every config's 4 s budget on the H200's host.
CHECK_GROWTH = 1.1


def _compare_all(
    log: RoundLog, judged: str, plan: TimingPlan, rng: np.random.Generator
) -> list[RatioStats]:
    out = []
    for other in log.rounds:
        if other == judged:
            continue
        logs = paired_prefix_log_ratios(log.rounds[judged], log.rounds[other])
        out.append(ratio_stats((judged, other), logs, plan.bootstrap_resamples, rng))
    return out


@dataclass
class TimingJob:
    """Everything one config's timing needs."""

    arms: Mapping[str, ArmPlan]
    judged: str
    plan: TimingPlan
    timer: BlockTimer
    rng: np.random.Generator
    clock: Callable[[], int]
    spot_check: SpotCheck
    # Arms timed only to report a ratio against (the workload reference), never to decide:
    # held to plan.reference_half_width, then left out of the later rounds.
    reference_arms: frozenset[str] = frozenset()

    def target(self, other: str) -> float:
        """The CI half-width the comparison of the judged arm with `other` must reach."""
        loose = self.plan.reference_half_width
        if loose is not None and other in self.reference_arms:
            return loose
        return self.plan.target_half_width


def _spot_rounds(plan: TimingPlan) -> set[int]:
    step = max(1, plan.min_rounds // plan.spot_checks)
    return {i * step for i in range(plan.spot_checks)}


def _time_round(job: TimingJob, log: RoundLog, active: list[str], spot: bool) -> None:
    """One randomized ABBA round of the active arms (the judged arm spot-checked if asked)."""
    order = [active[i] for i in job.rng.permutation(len(active))]
    per_round: dict[str, list[float]] = {name: [] for name in active}
    for position, name in enumerate(order + order[::-1]):
        arm = job.arms[name]
        arm.refresh()
        checking = spot and name == job.judged and position < len(active)
        checked_inputs = arm.pick_inputs(len(arm.calls) - 1)
        pristine = tuple(t.clone() for t in checked_inputs) if checking else ()
        block = job.timer.time_calls(arm.calls, arm.flush)
        per_call = block.device_ns / len(arm.calls)
        log.blocks[name].append(per_call)
        log.host_ratio[name].append(block.host_ns / max(block.device_ns, 1.0))
        per_round[name].append(per_call)
        if checking:
            job.spot_check(block.last_output, pristine, checked_inputs)
    for name in active:
        log.rounds[name].append(float(np.mean(per_round[name])))


def time_arms(job: TimingJob, calls: Mapping[str, int]) -> tuple[RoundLog, list[RatioStats]]:
    """Randomized ABBA rounds until every CI is precise, the cap is hit or time runs out; the
    inputs are refreshed (same buffers, new values) before every block. A reference arm whose
    comparison is precise to its own looser target leaves the rotation."""
    plan, names = job.plan, list(job.arms)
    log = RoundLog(calls=dict(calls))
    log.blocks = {name: [] for name in names}
    log.rounds = {name: [] for name in names}
    log.host_ratio = {name: [] for name in names}
    log.protocols = {name: job.arms[name].mode for name in names}
    spot_rounds, started, stats = _spot_rounds(plan), job.clock(), []
    active, next_test = list(names), max(plan.min_rounds, max(spot_rounds) + 1)
    for round_index in range(plan.max_rounds):
        _time_round(job, log, active, round_index in spot_rounds)
        done = round_index + 1
        over_budget = (job.clock() - started) / 1e9 > plan.budget_s
        last = over_budget or done == plan.max_rounds
        if len(names) < 2 or (done < next_test and not last):
            continue
        next_test = max(done + 1, math.ceil(done * CHECK_GROWTH))
        stats = _compare_all(log, job.judged, plan, job.rng)
        precise = {s.other for s in stats if half_width(s) <= job.target(s.other)}
        if len(precise) == len(stats) or last:
            break
        active = [
            n for n in active if n == job.judged or not (n in job.reference_arms and n in precise)
        ]
    if len(names) >= 2 and not stats:
        stats = _compare_all(log, job.judged, plan, job.rng)
    return log, stats
