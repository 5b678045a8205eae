"""Scoped comparisons: the reached configs' mean, its conservative bounds, and their floors."""

from __future__ import annotations

import math

import pytest

from search import RatioEstimate
from search.scope import required_log_gain, scoped_estimate, scoped_floor, whole_objective_floor


def ratio(median: float, low: float, high: float) -> RatioEstimate:
    return RatioEstimate(median=median, ci_low=low, ci_high=high)


PER_CONFIG = {
    "wide": ratio(1.17, 1.15, 1.19),
    "narrow": ratio(1.0, 0.98, 1.02),
    "mid": ratio(0.99, 0.97, 1.01),
}


def test_one_reached_config_is_read_as_it_is() -> None:
    assert scoped_estimate(PER_CONFIG, ["wide"]) == PER_CONFIG["wide"]


def test_the_mean_of_several_takes_the_weighted_geomean_of_each_bound() -> None:
    both = scoped_estimate(PER_CONFIG, ["wide", "narrow"])
    assert both is not None
    assert both.median == pytest.approx(math.sqrt(1.17 * 1.0))
    # The bounds are the means of the bounds: as wide as the widest consistent reading.
    assert both.ci_low == pytest.approx(math.sqrt(1.15 * 0.98))
    assert both.ci_high == pytest.approx(math.sqrt(1.19 * 1.02))
    heavy = scoped_estimate(PER_CONFIG, ["wide", "narrow"], {"wide": 3.0})
    assert heavy is not None and heavy.median == pytest.approx(1.17**0.75)


def test_a_scope_with_a_config_that_was_not_timed_reads_nothing() -> None:
    assert scoped_estimate(PER_CONFIG, ["wide", "absent"]) is None
    assert scoped_estimate(PER_CONFIG, []) is None


def test_the_floor_is_the_noisiest_reached_config_and_never_below_the_runs() -> None:
    floors = {"wide": 0.0133, "narrow": 0.024, "mid": 0.004}
    assert scoped_floor(0.01, floors, ["wide"]) == 0.0133
    assert scoped_floor(0.01, floors, ["wide", "narrow"]) == 0.024
    assert scoped_floor(0.01, floors, ["mid"]) == 0.01  # quieter than the run: the run's
    assert scoped_floor(0.01, floors, ["uncalibrated"]) == 0.01


def test_the_gain_asked_is_the_moved_configs_floors_or_the_whole_objectives() -> None:
    floors = {"wide": 0.0133, "narrow": 0.42}
    one = required_log_gain(["wide"], {}, floors)
    assert one == pytest.approx(math.log1p(0.0133))
    whole = whole_objective_floor(["wide", "narrow", "a", "b"], {}, 0.01)
    assert whole == pytest.approx(4 * math.log1p(0.01))
    # A noisy config asks more than the whole objective's floor: the smaller one applies.
    assert required_log_gain(["narrow"], {}, floors, whole) == pytest.approx(whole)
    assert required_log_gain(["wide"], {"wide": 2.0}, floors, whole) == pytest.approx(2 * one)
    assert required_log_gain([], {}, floors, whole) == 0.0
