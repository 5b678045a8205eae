"""Paired log-ratio statistics: intervals cover the truth and A/A does not look like a win."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats import aggregate_ratio_stats, half_width, paired_log_ratios, ratio_stats


def _rounds(rng: np.random.Generator, n: int, base: float, noise: float) -> np.ndarray:
    return base * np.exp(rng.normal(0.0, noise, n))


def test_known_speedup_lies_inside_the_interval() -> None:
    rng = np.random.default_rng(0)
    drift = _rounds(rng, 40, 1.0, 0.05)  # shared drift cancels in pairs
    other = drift * 1.30 * np.exp(rng.normal(0, 0.01, 40))
    arm = drift * np.exp(rng.normal(0, 0.01, 40))
    stats = ratio_stats(("a", "b"), paired_log_ratios(arm, other), 2000, rng)
    assert stats.ci_low < 1.30 < stats.ci_high
    assert stats.ci_low > 1.25  # pairing removed the 5% shared drift
    assert half_width(stats) < 0.02


def test_aa_intervals_cover_one_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(1)
    covered = 0
    runs = 200
    for _ in range(runs):
        a = _rounds(rng, 20, 1.0, 0.03)
        b = _rounds(rng, 20, 1.0, 0.03)
        stats = ratio_stats(("a", "b"), paired_log_ratios(a, b), 500, rng)
        covered += stats.ci_low <= 1.0 <= stats.ci_high
    # Percentile bootstrap of a median is a little liberal at n=20; it must not be wildly off.
    assert 0.85 * runs <= covered <= runs


def test_planted_slowdown_is_visible() -> None:
    rng = np.random.default_rng(2)
    base = _rounds(rng, 30, 1.0, 0.01)
    slower = base * 1.05 * np.exp(rng.normal(0, 0.005, 30))
    stats = ratio_stats(("slow", "base"), paired_log_ratios(slower, base), 1000, rng)
    assert stats.ci_high < 1.0


def test_aggregate_is_the_weighted_geometric_mean_of_medians() -> None:
    rng = np.random.default_rng(3)
    logs = {"x": np.log(np.full(10, 2.0)), "y": np.log(np.full(10, 0.5))}
    even = aggregate_ratio_stats(("a", "b"), logs, {}, 200, rng)
    assert even.median == pytest.approx(1.0)
    weighted = aggregate_ratio_stats(("a", "b"), logs, {"x": 3.0}, 200, rng)
    assert weighted.median == pytest.approx(2.0 ** (3 / 4) * 0.5 ** (1 / 4))


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="equal, non-empty"):
        paired_log_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        paired_log_ratios([1.0, 0.0], [1.0, 1.0])
