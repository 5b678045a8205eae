"""Interleaved timing: randomized ABBA rounds of every arm, stopping on CI precision."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from harness.models import ArmTiming, RatioStats, TimingPlan
from harness.stats import half_width, paired_log_ratios, ratio_stats

Call = Callable[[], Any]


class BlockTimer(Protocol):
    """Times `calls` back-to-back calls of fn and returns the total in nanoseconds."""

    protocol: str

    def time_block(self, fn: Call, calls: int) -> float:
        """Total time of the block in ns."""

    def resolution_ns(self) -> float:
        """Smallest interval the timer can tell apart."""


class CpuTimer:
    """Wall clock around a block; the clock function is captured before candidates load."""

    protocol = "cpu-perf_counter_ns"

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock

    def time_block(self, fn: Call, calls: int) -> float:
        clock = self._clock
        start = clock()
        for _ in range(calls):
            fn()
        return float(clock() - start)

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


class CudaTimer:
    """One CUDA event pair around a block of un-synchronized calls on the current stream."""

    protocol = "cuda-events"

    def __init__(self, event_type: Any, synchronize: Callable[[], None]) -> None:
        self._event = event_type
        self._sync = synchronize

    def time_block(self, fn: Call, calls: int) -> float:
        start, end = self._event(enable_timing=True), self._event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        self._sync()
        return float(start.elapsed_time(end)) * 1e6

    def resolution_ns(self) -> float:
        smallest = math.inf
        for _ in range(50):
            start, end = self._event(enable_timing=True), self._event(enable_timing=True)
            start.record()
            end.record()
            self._sync()
            value = float(start.elapsed_time(end)) * 1e6
            if value > 0:
                smallest = min(smallest, value)
        return smallest if math.isfinite(smallest) else 0.0


@dataclass
class RoundLog:
    """Raw blocks and per-round means of every arm."""

    calls: dict[str, int]
    blocks: dict[str, list[float]] = field(default_factory=dict)
    rounds: dict[str, list[float]] = field(default_factory=dict)

    def arm_timings(self) -> list[ArmTiming]:
        return [
            ArmTiming(
                arm=name,
                calls_per_block=self.calls[name],
                samples_ns=samples,
                median_ns=float(np.median(samples)),
            )
            for name, samples in self.blocks.items()
        ]


def calibrate_calls(fn: Call, timer: BlockTimer, target_block_s: float) -> int:
    """Calls per block so that one block lasts about target_block_s."""
    single = sorted(timer.time_block(fn, 1) for _ in range(3))[1]
    return max(1, min(10_000, math.ceil(target_block_s * 1e9 / max(single, 1.0))))


def _compare_all(
    log: RoundLog, judged: str, plan: TimingPlan, rng: np.random.Generator
) -> list[RatioStats]:
    out = []
    for other in log.rounds:
        if other == judged:
            continue
        logs = paired_log_ratios(log.rounds[judged], log.rounds[other])
        out.append(ratio_stats((judged, other), logs, plan.bootstrap_resamples, rng))
    return out


def time_arms(
    arms: Mapping[str, Call],
    judged: str,
    plan: TimingPlan,
    timer: BlockTimer,
    rng: np.random.Generator,
    clock: Callable[[], int],
) -> tuple[RoundLog, list[RatioStats]]:
    """Warm up, calibrate, then time randomized ABBA rounds until precise, capped or out of time."""
    for fn in arms.values():
        for _ in range(plan.warmup_calls):
            fn()
    log = RoundLog(
        calls={n: calibrate_calls(fn, timer, plan.target_block_s) for n, fn in arms.items()}
    )
    log.blocks = {name: [] for name in arms}
    log.rounds = {name: [] for name in arms}
    names = list(arms)
    started = clock()
    stats: list[RatioStats] = []
    for round_index in range(plan.max_rounds):
        order = [names[i] for i in rng.permutation(len(names))]
        per_round: dict[str, list[float]] = {name: [] for name in names}
        for name in order + order[::-1]:
            per_call = timer.time_block(arms[name], log.calls[name]) / log.calls[name]
            log.blocks[name].append(per_call)
            per_round[name].append(per_call)
        for name in names:
            log.rounds[name].append(float(np.mean(per_round[name])))
        done = round_index + 1
        if done < plan.min_rounds or len(names) < 2:
            continue
        stats = _compare_all(log, judged, plan, rng)
        precise = all(half_width(s) <= plan.target_half_width for s in stats)
        out_of_time = (clock() - started) / 1e9 > plan.budget_s
        if precise or out_of_time:
            break
    if len(names) >= 2 and not stats:
        stats = _compare_all(log, judged, plan, rng)
    return log, stats
