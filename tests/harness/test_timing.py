"""Interleaved ABBA timing: arms alternate, blocks are calibrated, stopping is on precision."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from harness.models import TimingPlan
from harness.timing import CpuTimer, calibrate_calls, time_arms


class FakeClock:
    """A clock that advances only when an arm 'runs', by that arm's cost."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def arm(self, name: str, cost_ns: int, log: list[str]) -> Callable[[], None]:
        def run() -> None:
            log.append(name)
            self.now += cost_ns

        return run


def test_rounds_are_mirrored_and_every_arm_runs_twice_per_round() -> None:
    clock = FakeClock()
    calls: list[str] = []
    arms = {n: clock.arm(n, c, calls) for n, c in [("a", 1000), ("b", 2000), ("c", 1500)]}
    plan = TimingPlan(warmup_calls=1, target_block_s=1e-9, min_rounds=5, max_rounds=5)
    _, stats = time_arms(arms, "a", plan, CpuTimer(clock), np.random.default_rng(0), clock)
    timed = calls[3 + 9 :]  # after warm-up (1 each) and calibration (3 each)
    rounds = [timed[i : i + 6] for i in range(0, len(timed), 6)]
    assert len(rounds) == 5
    for block in rounds:
        assert block[:3] == block[3:][::-1] and sorted(block[:3]) == ["a", "b", "c"]
    assert len({tuple(r[:3]) for r in rounds}) > 1, "the order should be randomized"
    ratios = {s.other: s.median for s in stats}
    assert abs(ratios["b"] - 2.0) < 1e-9 and abs(ratios["c"] - 1.5) < 1e-9


def test_stops_early_once_precise() -> None:
    clock = FakeClock()
    calls: list[str] = []
    arms = {"a": clock.arm("a", 1000, calls), "b": clock.arm("b", 1000, calls)}
    plan = TimingPlan(warmup_calls=1, target_block_s=1e-9, min_rounds=4, max_rounds=50)
    log, _ = time_arms(arms, "a", plan, CpuTimer(clock), np.random.default_rng(0), clock)
    assert len(log.rounds["a"]) == 4  # zero noise: precise at the first check


def test_calibration_makes_blocks_long_enough() -> None:
    calls = calibrate_calls(lambda: time.sleep(0.001), CpuTimer(time.perf_counter_ns), 0.01)
    assert 3 <= calls <= 12
