"""Thompson sampling of ideas with priors from rubric quality and strength from certainty."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator


class IdeaArm(BaseModel):
    """One idea as an arm of the bandit: its rubric scores and its track record."""

    model_config = ConfigDict(frozen=True)

    idea_id: str = Field(description="Stable identifier of the idea.")
    quality: float = Field(gt=0, lt=1, description="Rubric score q in (0, 1): the prior mean.")
    uncertainty: float = Field(
        ge=0, le=1, description="Rubric uncertainty H in [0, 1]: high H makes a weak prior."
    )
    successes: int = Field(ge=0, description="Expansions with this idea that succeeded.")
    failures: int = Field(ge=0, description="Expansions with this idea that failed.")
    must_try: bool = Field(
        default=False, description="Human-injected idea that is tried before any sampling."
    )
    order: int = Field(description="Insertion order; the earliest untried must_try goes first.")


class PriorStrength(BaseModel):
    """Bounds of the prior's pseudo-count k, reached at H = 1 (k_min) and H = 0 (k_max)."""

    model_config = ConfigDict(frozen=True)

    k_min: float = Field(default=2.0, gt=0, description="Pseudo-count of a fully uncertain idea.")
    k_max: float = Field(default=20.0, gt=0, description="Pseudo-count of a fully certain idea.")

    @model_validator(mode="after")
    def _min_not_above_max(self) -> PriorStrength:
        if self.k_min > self.k_max:
            raise ValueError(
                f"prior strength needs 0 < k_min <= k_max, got k_min={self.k_min}, "
                f"k_max={self.k_max}; swap them or raise k_max"
            )
        return self


class IdeaChoice(BaseModel):
    """The idea chosen for the next expansion, with its posterior and draw."""

    model_config = ConfigDict(frozen=True)

    idea_id: str = Field(description="Id of the chosen idea.")
    theta: float = Field(description="Its Thompson draw, or its posterior mean when forced.")
    alpha: float = Field(gt=0, description="Posterior alpha of the chosen idea.")
    beta: float = Field(gt=0, description="Posterior beta of the chosen idea.")
    forced: bool = Field(description="True when chosen as an untried must_try idea, not sampled.")


def prior_parameters(arm: IdeaArm, strength: PriorStrength) -> tuple[float, float]:
    """Beta(k*q, k*(1-q)) with k = k_min + (k_max - k_min) * (1 - H)."""
    k = strength.k_min + (strength.k_max - strength.k_min) * (1 - arm.uncertainty)
    return k * arm.quality, k * (1 - arm.quality)


def posterior_parameters(arm: IdeaArm, strength: PriorStrength) -> tuple[float, float]:
    """The prior updated with the arm's successes and failures."""
    alpha, beta = prior_parameters(arm, strength)
    return alpha + arm.successes, beta + arm.failures


def choose_forced_idea(arms: Sequence[IdeaArm], strength: PriorStrength) -> IdeaChoice | None:
    """The earliest untried must_try idea as a forced choice, or None if there is none."""
    untried = [arm for arm in arms if arm.must_try and arm.successes + arm.failures == 0]
    if not untried:
        return None
    arm = min(untried, key=lambda candidate: (candidate.order, candidate.idea_id))
    alpha, beta = posterior_parameters(arm, strength)
    return IdeaChoice(
        idea_id=arm.idea_id, theta=alpha / (alpha + beta), alpha=alpha, beta=beta, forced=True
    )


def choose_idea(
    arms: Sequence[IdeaArm], strength: PriorStrength, rng: np.random.Generator
) -> IdeaChoice:
    """Forced untried must_try idea if any, else argmax of theta ~ Beta(posterior) per arm."""
    if not arms:
        raise ValueError("cannot choose an idea from an empty list; pass at least one IdeaArm")
    repeated = sorted(idea_id for idea_id, n in Counter(a.idea_id for a in arms).items() if n > 1)
    if repeated:
        raise ValueError(f"idea ids {repeated} appear more than once; pass each idea once")
    forced = choose_forced_idea(arms, strength)
    if forced is not None:
        return forced
    # Sorted so the draws do not depend on the order the caller listed the arms in.
    ordered = sorted(arms, key=lambda arm: arm.idea_id)
    params = np.array([posterior_parameters(arm, strength) for arm in ordered], dtype=float)
    thetas = rng.beta(params[:, 0], params[:, 1])
    best = int(np.argmax(thetas))
    return IdeaChoice(
        idea_id=ordered[best].idea_id,
        theta=float(thetas[best]),
        alpha=float(params[best, 0]),
        beta=float(params[best, 1]),
        forced=False,
    )
