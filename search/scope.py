"""Scoped comparisons: a change judged on the configurations where it runs different code.

A change that reaches one configuration of thirteen (the torch path's precision, used only by
the widest model) moves the geometric mean over all of them by its thirteenth root: a 17% gain
there reads as 1.2% overall, inside the noise of thirteen readings of identical code. Where the
recorder shows that the other configurations run the same code on both sides, their true ratio
is 1 and their readings are pure noise; the verdict then reads the configurations the change
reaches, against the noise floor of those configurations (never lower than the run's floor).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from search.promotion import RatioEstimate


def scoped_estimate(
    per_config: Mapping[str, RatioEstimate],
    scope: Collection[str],
    weights: Mapping[str, float] | None = None,
) -> RatioEstimate | None:
    """The weighted geometric mean over `scope` of per-config ratios, its bounds the same mean
    of the bounds (as if every config erred the same way at once: wider than independent
    errors, never narrower). None when a config of the scope has no ratio."""
    if not scope or any(c not in per_config for c in scope):
        return None
    weight = {c: (weights or {}).get(c, 1.0) for c in scope}
    total = sum(weight.values())

    def mean(pick: str) -> float:
        logs = sum(weight[c] * math.log(getattr(per_config[c], pick)) for c in scope)
        return math.exp(logs / total)

    return RatioEstimate(median=mean("median"), ci_low=mean("ci_low"), ci_high=mean("ci_high"))


def scoped_floor(
    noise_floor: float, config_floors: Mapping[str, float], scope: Collection[str]
) -> float:
    """The floor a scoped verdict clears: the largest A/A excursion any config of the scope
    showed, and never below the run's own floor (one config's readings are noisier than the
    mean of many)."""
    return max([noise_floor, *(config_floors.get(c, noise_floor) for c in scope)])


def required_log_gain(
    configs: Collection[str],
    weights: Mapping[str, float],
    config_floors: Mapping[str, float],
    whole_objective: float = math.inf,
) -> float:
    """What a change of the variant serving `configs` must add to the weighted sum of
    log-speedups: each changed config's own floor (configs that keep their code add nothing
    and ask nothing), or `whole_objective` (the whole objective's floor, in the same units)
    when that asks less: a device whose single readings are noisy (a shared CPU, where one
    config's A/A read 42%) still composes what moves the whole objective past its floor."""
    scoped = sum(weights.get(c, 1.0) * math.log1p(config_floors[c]) for c in configs)
    return min(scoped, whole_objective)


def whole_objective_floor(
    configs: Collection[str], weights: Mapping[str, float], noise_floor: float
) -> float:
    """The whole objective's floor as a weighted sum of log-speedups over `configs`."""
    return sum(weights.get(c, 1.0) for c in configs) * math.log1p(noise_floor)
