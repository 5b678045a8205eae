"""Idea choice: rubric priors, entropy-scaled strength, must_try forcing and Thompson draws."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from pydantic import ValidationError

from search.idea_sampler import (
    IdeaArm,
    PriorStrength,
    choose_idea,
    posterior_parameters,
    prior_parameters,
)
from tests.search.beta_math import binomial_band, probability_greater

DEFAULT = PriorStrength()
DRAWS = 2000


def arm(
    idea_id: str,
    quality: float,
    uncertainty: float,
    record: tuple[int, int] = (0, 0),
    must_try: bool = False,
    order: int = 0,
) -> IdeaArm:
    """An idea arm with (successes, failures) as its record."""
    return IdeaArm(
        idea_id=idea_id,
        quality=quality,
        uncertainty=uncertainty,
        successes=record[0],
        failures=record[1],
        must_try=must_try,
        order=order,
    )


def mean(params: tuple[float, float]) -> float:
    """Mean of Beta(alpha, beta)."""
    return params[0] / (params[0] + params[1])


def variance(params: tuple[float, float]) -> float:
    """Variance of Beta(alpha, beta)."""
    total = params[0] + params[1]
    return params[0] * params[1] / (total**2 * (total + 1))


def test_prior_strength_formula() -> None:
    # k = 2 + 18 * (1 - 0.25) = 15.5
    alpha, beta = prior_parameters(arm("x", 0.3, 0.25), DEFAULT)
    assert (alpha, beta) == pytest.approx((15.5 * 0.3, 15.5 * 0.7))


def test_prior_strength_endpoints() -> None:
    strength = PriorStrength(k_min=1.0, k_max=5.0)
    assert prior_parameters(arm("x", 0.5, 1.0), strength) == pytest.approx((0.5, 0.5))
    assert prior_parameters(arm("x", 0.5, 0.0), strength) == pytest.approx((2.5, 2.5))


def test_prior_mean_is_rubric_quality() -> None:
    for uncertainty in (0.0, 0.4, 1.0):
        assert mean(prior_parameters(arm("x", 0.7, uncertainty), DEFAULT)) == pytest.approx(0.7)


def test_posterior_adds_the_record() -> None:
    idea = arm("x", 0.4, 0.5, record=(3, 2))
    prior_alpha, prior_beta = prior_parameters(idea, DEFAULT)
    assert posterior_parameters(idea, DEFAULT) == pytest.approx((prior_alpha + 3, prior_beta + 2))


def test_uncertain_idea_moves_much_more_after_one_failure() -> None:
    uncertain_before = mean(posterior_parameters(arm("u", 0.6, 1.0), DEFAULT))
    uncertain_after = mean(posterior_parameters(arm("u", 0.6, 1.0, record=(0, 1)), DEFAULT))
    safe_before = mean(posterior_parameters(arm("s", 0.6, 0.0), DEFAULT))
    safe_after = mean(posterior_parameters(arm("s", 0.6, 0.0, record=(0, 1)), DEFAULT))
    # Beta(1.2, 0.8) -> Beta(1.2, 1.8) moves 0.2; Beta(12, 8) -> Beta(12, 9) moves about 0.029.
    assert uncertain_before - uncertain_after == pytest.approx(0.2)
    assert safe_before - safe_after == pytest.approx(0.6 - 12 / 21)
    assert uncertain_before - uncertain_after > 5 * (safe_before - safe_after)


def test_safe_idea_starts_firm() -> None:
    safe = variance(prior_parameters(arm("s", 0.6, 0.0), DEFAULT))
    uncertain = variance(prior_parameters(arm("u", 0.6, 1.0), DEFAULT))
    assert uncertain > 5 * safe


def test_untried_must_try_with_smallest_order_is_forced() -> None:
    arms = [
        arm("great", 0.95, 0.0, record=(9, 0)),
        arm("late", 0.2, 0.5, must_try=True, order=5),
        arm("early", 0.3, 0.5, must_try=True, order=3),
        arm("tried", 0.3, 0.5, record=(0, 1), must_try=True, order=1),
    ]
    rng = np.random.default_rng(5)
    choice = choose_idea(arms, DEFAULT, rng)
    assert choice.idea_id == "early"
    assert choice.forced is True
    expected = posterior_parameters(arms[2], DEFAULT)
    assert (choice.alpha, choice.beta) == pytest.approx(expected)
    assert choice.theta == pytest.approx(mean(expected))
    # A forced choice draws nothing, so the generator is left where it was.
    assert rng.random() == np.random.default_rng(5).random()


def test_must_try_forcing_walks_the_insertion_order() -> None:
    arms = [
        arm("late", 0.2, 0.5, must_try=True, order=5),
        arm("early", 0.3, 0.5, record=(1, 0), must_try=True, order=3),
    ]
    assert choose_idea(arms, DEFAULT, np.random.default_rng(0)).idea_id == "late"


def test_tried_must_try_ideas_are_sampled_like_any_other() -> None:
    arms = [
        arm("hope", 0.5, 1.0, record=(0, 1), must_try=True, order=0),
        arm("solid", 0.9, 0.0, record=(5, 0)),
    ]
    choice = choose_idea(arms, DEFAULT, np.random.default_rng(0))
    assert choice.forced is False


def test_choice_frequencies_match_posteriors() -> None:
    first = arm("first", 0.6, 0.5, record=(1, 2))  # k = 11 -> Beta(7.6, 6.4)
    second = arm("second", 0.4, 0.2, record=(2, 0))  # k = 16.4 -> Beta(8.56, 9.84)
    first_params = posterior_parameters(first, DEFAULT)
    second_params = posterior_parameters(second, DEFAULT)
    assert first_params == pytest.approx((7.6, 6.4))
    assert second_params == pytest.approx((8.56, 9.84))
    exact = probability_greater(first_params, second_params)
    band = binomial_band(exact, DRAWS)
    # The band excludes uniform choice (0.5) and greedy choice of the higher mean (1.0).
    assert abs(exact - 0.5) > 2 * band
    assert abs(exact - 1.0) > 2 * band
    rng = np.random.default_rng(31)
    counts = Counter(choose_idea([first, second], DEFAULT, rng).idea_id for _ in range(DRAWS))
    assert abs(counts["first"] / DRAWS - exact) < band


def test_sampled_choice_carries_its_posterior() -> None:
    arms = [arm("a", 0.5, 0.5), arm("b", 0.5, 0.5, record=(2, 2))]
    choice = choose_idea(arms, DEFAULT, np.random.default_rng(1))
    chosen = next(candidate for candidate in arms if candidate.idea_id == choice.idea_id)
    assert (choice.alpha, choice.beta) == pytest.approx(posterior_parameters(chosen, DEFAULT))
    assert 0.0 < choice.theta < 1.0


def test_same_seed_same_choices_regardless_of_arm_order() -> None:
    arms = [arm("a", 0.5, 0.9), arm("b", 0.4, 0.9), arm("c", 0.6, 0.9, record=(0, 2))]
    rng_first, rng_second = np.random.default_rng(9), np.random.default_rng(9)
    first = [choose_idea(arms, DEFAULT, rng_first).idea_id for _ in range(100)]
    second = [choose_idea(arms[::-1], DEFAULT, rng_second).idea_id for _ in range(100)]
    assert first == second
    assert len(set(first)) == 3


def test_empty_arm_list_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty list"):
        choose_idea([], DEFAULT, np.random.default_rng(0))


def test_duplicate_idea_ids_are_an_error() -> None:
    with pytest.raises(ValueError, match=r"\['x'\] appear more than once"):
        choose_idea([arm("x", 0.5, 0.5), arm("x", 0.4, 0.5)], DEFAULT, np.random.default_rng(0))


@pytest.mark.parametrize(("k_min", "k_max"), [(0.0, 5.0), (-1.0, 5.0), (6.0, 5.0)])
def test_prior_strength_validation(k_min: float, k_max: float) -> None:
    with pytest.raises(ValidationError):
        PriorStrength(k_min=k_min, k_max=k_max)


def test_prior_strength_order_error_names_values() -> None:
    with pytest.raises(ValidationError, match=r"k_min=6\.0, k_max=5\.0"):
        PriorStrength(k_min=6.0, k_max=5.0)


@pytest.mark.parametrize(
    ("quality", "uncertainty", "record"),
    [(0.0, 0.5, (0, 0)), (1.0, 0.5, (0, 0)), (0.5, 1.5, (0, 0)), (0.5, 0.5, (-1, 0))],
)
def test_idea_arm_validation(quality: float, uncertainty: float, record: tuple[int, int]) -> None:
    with pytest.raises(ValidationError):
        arm("x", quality, uncertainty, record=record)
