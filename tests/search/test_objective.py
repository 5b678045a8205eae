"""The objective: geomean, weights, capped geomean with uncapped detail, total latency."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from search.objective import (
    ConfigTiming,
    ObjectiveKind,
    ObjectiveSpec,
    ObjectiveValue,
    compute_objective,
    geometric_mean,
)


def timing(config_id: str, baseline_s: float, candidate_s: float | None) -> ConfigTiming:
    """One config's timing."""
    return ConfigTiming(config_id=config_id, baseline_s=baseline_s, candidate_s=candidate_s)


# Speedups: a 2.0x, b 0.5x, c 8.0x.
TIMINGS = [timing("a", 2.0, 1.0), timing("b", 1.0, 2.0), timing("c", 8.0, 1.0)]


def compute(spec: ObjectiveSpec, timings: list[ConfigTiming] = TIMINGS) -> ObjectiveValue:
    """The objective, asserting it exists."""
    value = compute_objective(timings, spec)
    assert value is not None
    return value


def test_geometric_mean_plain_and_weighted() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([2.0, 8.0], [3.0, 1.0]) == pytest.approx(2 ** ((3 + 3) / 4))


def test_geometric_mean_does_not_overflow() -> None:
    assert geometric_mean([1e300, 1e300, 1e-300]) == pytest.approx(1e100, rel=1e-9)


@pytest.mark.parametrize("values", [[], [1.0, 0.0], [1.0, -2.0], [1.0, math.nan], [math.inf]])
def test_geometric_mean_rejects_bad_values(values: list[float]) -> None:
    with pytest.raises(ValueError, match="geometric mean needs"):
        geometric_mean(values)


@pytest.mark.parametrize("weights", [[1.0], [1.0, 0.0], [1.0, -1.0]])
def test_geometric_mean_rejects_bad_weights(weights: list[float]) -> None:
    with pytest.raises(ValueError, match="weight"):
        geometric_mean([1.0, 2.0], weights)


def test_geomean_is_the_default() -> None:
    value = compute(ObjectiveSpec())
    assert value.kind is ObjectiveKind.GEOMEAN
    assert value.value == pytest.approx((2.0 * 0.5 * 8.0) ** (1 / 3))
    assert value.per_config == pytest.approx({"a": 2.0, "b": 0.5, "c": 8.0})
    assert value.capped_configs == []


def test_weights_apply_and_missing_configs_weigh_one() -> None:
    value = compute(ObjectiveSpec(weights={"b": 4.0, "not-in-run": 9.0}))
    # log2 speedups 1, -1, 3 with weights 1, 4, 1: (1 - 4 + 3) / 6 = 0.
    assert value.value == pytest.approx(1.0)


def test_capped_geomean_reports_uncapped_detail() -> None:
    value = compute(ObjectiveSpec(kind=ObjectiveKind.CAPPED_GEOMEAN, cap=3.0))
    assert value.value == pytest.approx((2.0 * 0.5 * 3.0) ** (1 / 3))
    assert value.capped_configs == ["c"]
    assert value.per_config["c"] == pytest.approx(8.0)  # the capped win stays visible
    assert value.per_config["b"] == pytest.approx(0.5)


def test_capped_geomean_with_weights() -> None:
    spec = ObjectiveSpec(kind=ObjectiveKind.CAPPED_GEOMEAN, cap=4.0, weights={"c": 2.0})
    value = compute(spec)
    expected = math.exp((math.log(2.0) + math.log(0.5) + 2 * math.log(4.0)) / 4)
    assert value.value == pytest.approx(expected)
    assert value.capped_configs == ["c"]


def test_cap_that_never_binds_equals_geomean() -> None:
    capped = compute(ObjectiveSpec(kind=ObjectiveKind.CAPPED_GEOMEAN, cap=8.0))
    assert capped.value == pytest.approx(compute(ObjectiveSpec()).value)
    assert capped.capped_configs == []  # a speedup equal to the cap is not bound by it


def test_total_latency() -> None:
    value = compute(ObjectiveSpec(kind=ObjectiveKind.TOTAL_LATENCY))
    assert value.value == pytest.approx((2.0 + 1.0 + 8.0) / (1.0 + 2.0 + 1.0))
    assert value.per_config == pytest.approx({"a": 2.0, "b": 0.5, "c": 8.0})
    assert value.capped_configs == []


def test_total_latency_with_weights() -> None:
    value = compute(ObjectiveSpec(kind=ObjectiveKind.TOTAL_LATENCY, weights={"b": 3.0}))
    assert value.value == pytest.approx((2.0 + 3.0 + 8.0) / (1.0 + 6.0 + 1.0))


@pytest.mark.parametrize("kind", list(ObjectiveKind))
def test_any_failed_config_means_no_score(kind: ObjectiveKind) -> None:
    timings = [*TIMINGS, timing("d", 1.0, None)]
    assert compute_objective(timings, ObjectiveSpec(kind=kind)) is None


def test_empty_timings_have_no_score() -> None:
    assert compute_objective([], ObjectiveSpec()) is None


def test_duplicate_configs_are_an_error() -> None:
    with pytest.raises(ValueError, match="duplicates"):
        compute_objective([timing("a", 1.0, 1.0), timing("a", 1.0, 2.0)], ObjectiveSpec())


@pytest.mark.parametrize(
    ("baseline_s", "candidate_s"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (1.0, math.inf)]
)
def test_timings_must_be_positive_and_finite(baseline_s: float, candidate_s: float) -> None:
    with pytest.raises(ValidationError):
        timing("a", baseline_s, candidate_s)


@pytest.mark.parametrize("cap", [1.0, 0.5])
def test_cap_must_exceed_one(cap: float) -> None:
    with pytest.raises(ValidationError):
        ObjectiveSpec(cap=cap)


@pytest.mark.parametrize("weight", [0.0, -1.0, math.nan])
def test_weights_must_be_positive(weight: float) -> None:
    with pytest.raises(ValidationError, match="config weights must be finite and > 0"):
        ObjectiveSpec(weights={"a": weight})
