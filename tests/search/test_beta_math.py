"""The test helper's exact Beta probabilities agree with closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.search.beta_math import binomial_band, probability_greater


def test_identical_distributions_are_even() -> None:
    assert probability_greater((3.0, 5.0), (3.0, 5.0)) == pytest.approx(0.5, abs=1e-6)


def test_matches_closed_form_for_beta_2_1_against_uniform() -> None:
    # P(X > Y) with X ~ Beta(2, 1), Y ~ U(0, 1) is the integral of 2x * x over [0, 1] = 2/3.
    assert probability_greater((2.0, 1.0), (1.0, 1.0)) == pytest.approx(2 / 3, abs=1e-6)


def test_matches_closed_form_for_integer_parameters() -> None:
    # For integer parameters P(Beta(a1, b1) > Beta(1, b2)) = 1 - E[(1 - X)^b2]
    # = 1 - B(a1, b1 + b2) / B(a1, b1).
    def log_beta(a: float, b: float) -> float:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)

    expected = 1 - math.exp(log_beta(4, 2 + 3) - log_beta(4, 2))
    assert probability_greater((4.0, 2.0), (1.0, 3.0)) == pytest.approx(expected, abs=1e-6)


def test_agrees_with_large_monte_carlo() -> None:
    rng = np.random.default_rng(987_654)
    draws = 1_000_000
    frequency = float(np.mean(rng.beta(7.6, 6.4, draws) > rng.beta(8.56, 9.84, draws)))
    exact = probability_greater((7.6, 6.4), (8.56, 9.84))
    assert abs(frequency - exact) < binomial_band(exact, draws)


def test_binomial_band_value() -> None:
    assert binomial_band(0.5, 10_000, sigmas=2.0) == pytest.approx(0.01)
