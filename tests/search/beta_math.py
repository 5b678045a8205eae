"""Exact Beta-distribution quantities by numerical integration, for checking samplers."""

from __future__ import annotations

import math

import numpy as np

GRID_CELLS = 200_000


def beta_pdf(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """Density of Beta(alpha, beta) at interior points x (log-space for large parameters)."""
    log_norm = math.lgamma(alpha + beta) - math.lgamma(alpha) - math.lgamma(beta)
    return np.exp(log_norm + (alpha - 1) * np.log(x) + (beta - 1) * np.log1p(-x))


def probability_greater(first: tuple[float, float], second: tuple[float, float]) -> float:
    """P(X > Y) for independent X ~ Beta(*first), Y ~ Beta(*second): integral of f_X * F_Y."""
    # Midpoint rule keeps x off 0 and 1, where the log density is undefined for parameters 1.
    width = 1.0 / GRID_CELLS
    x = (np.arange(GRID_CELLS) + 0.5) * width
    density_first = beta_pdf(x, *first)
    density_second = beta_pdf(x, *second)
    cdf_second = (np.cumsum(density_second) - 0.5 * density_second) * width
    return float(np.sum(density_first * cdf_second) * width)


def binomial_band(probability: float, draws: int, sigmas: float = 4.0) -> float:
    """Half-width of a band of `sigmas` binomial standard errors around a frequency."""
    return sigmas * math.sqrt(probability * (1 - probability) / draws)
