"""The organizer's timing protocol, for every arm of a comparison: the minimum a user knows."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

WARMUP_CALLS = 20
ROUNDS = 3
REPEATS = 100
PROTOCOL = (
    "organizer: 20 warm-up calls per arm, 3 alternating rounds x 100 event-timed calls, median"
)


def _cuda_samples(call: Callable[[], Any], repeats: int) -> list[float]:
    """One CUDA event pair around each un-synchronized call on the current stream (ms)."""
    import torch

    pairs = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def _cpu_samples(call: Callable[[], Any], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1e3)
    return samples


def organizer_medians(
    calls: Mapping[str, Callable[[], Any]], cuda: bool, rounds: int = ROUNDS, repeats: int = REPEATS
) -> dict[str, float]:
    """Median ms per arm: warm-up in the given order (the baseline first), then rounds whose
    arm order alternates (even rounds as given, odd rounds reversed), every arm on the same
    fixed input the caller bound into its call."""
    names = list(calls)
    for name in names:
        for _ in range(WARMUP_CALLS):
            calls[name]()
    if cuda:
        import torch

        torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    sample = _cuda_samples if cuda else _cpu_samples
    for number in range(rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            samples[name] += sample(calls[name], repeats)
    return {name: statistics.median(values) for name, values in samples.items()}
