"""Paired log-ratio statistics of interleaved timing rounds, with bootstrap intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from harness.models import RatioStats

CI_LEVEL = 0.95


def paired_log_ratios(
    arm_rounds: Sequence[float] | np.ndarray, other_rounds: Sequence[float] | np.ndarray
) -> np.ndarray:
    """log(other / arm) per round; rounds pair the two arms measured side by side."""
    arm = np.asarray(arm_rounds, dtype=float)
    other = np.asarray(other_rounds, dtype=float)
    if arm.shape != other.shape or arm.size == 0:
        raise ValueError(f"need equal, non-empty round series, got {arm.size} and {other.size}")
    if np.any(arm <= 0) or np.any(other <= 0):
        raise ValueError("round times must be positive")
    return np.asarray(np.log(other) - np.log(arm))


def paired_prefix_log_ratios(
    arm_rounds: Sequence[float] | np.ndarray, other_rounds: Sequence[float] | np.ndarray
) -> np.ndarray:
    """log(other / arm) over the rounds both arms ran: an arm that left the rotation early
    (a reference timed only to its own precision) ran exactly the first rounds of the other."""
    shared = min(len(arm_rounds), len(other_rounds))
    return paired_log_ratios(arm_rounds[:shared], other_rounds[:shared])


def _bootstrap_medians(logs: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, logs.size, size=(resamples, logs.size))
    return np.asarray(np.median(logs[idx], axis=1))


def ratio_stats(
    names: tuple[str, str], logs: np.ndarray, resamples: int, rng: np.random.Generator
) -> RatioStats:
    """Median paired ratio and its percentile-bootstrap CI; names = (arm, other)."""
    boots = _bootstrap_medians(logs, resamples, rng)
    alpha = (1 - CI_LEVEL) / 2
    low, high = np.quantile(boots, [alpha, 1 - alpha])
    median = float(np.median(logs))
    return RatioStats(
        arm=names[0],
        other=names[1],
        median=float(np.exp(median)),
        ci_low=float(np.exp(min(low, median))),
        ci_high=float(np.exp(max(high, median))),
        rounds=int(logs.size),
    )


def half_width(stats: RatioStats) -> float:
    """Half-width of the CI in log space (0.02 ~ +-2%)."""
    return float((np.log(stats.ci_high) - np.log(stats.ci_low)) / 2)


def aggregate_ratio_stats(
    names: tuple[str, str],
    logs_by_config: Mapping[str, np.ndarray],
    weights: Mapping[str, float],
    resamples: int,
    rng: np.random.Generator,
) -> RatioStats:
    """Weighted geometric mean over configs of the median ratio, bootstrapped per config."""
    if not logs_by_config:
        raise ValueError("no configs to aggregate")
    ids = list(logs_by_config)
    w = np.array([weights.get(i, 1.0) for i in ids], dtype=float)
    w = w / w.sum()
    point = np.array([np.median(logs_by_config[i]) for i in ids])
    boots = np.stack([_bootstrap_medians(logs_by_config[i], resamples, rng) for i in ids])
    agg_boot = (w[:, None] * boots).sum(axis=0)
    alpha = (1 - CI_LEVEL) / 2
    low, high = np.quantile(agg_boot, [alpha, 1 - alpha])
    center = float((w * point).sum())
    return RatioStats(
        arm=names[0],
        other=names[1],
        median=float(np.exp(center)),
        ci_low=float(np.exp(min(low, center))),
        ci_high=float(np.exp(max(high, center))),
        rounds=int(min(logs_by_config[i].size for i in ids)),
    )
