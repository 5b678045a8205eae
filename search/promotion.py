"""Verdicts for judged candidates: noise-floor-aware speed classification and promotion."""

from __future__ import annotations

import enum
import math

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Verdict(enum.StrEnum):
    """What the judge concluded about one candidate."""

    PROMOTED = "promoted"
    REJECTED = "rejected"
    INCONCLUSIVE = "inconclusive"
    FAILED_CORRECTNESS = "failed_correctness"
    FAILED_STATIC = "failed_static"
    FAILED_RUN = "failed_run"
    NO_RUN = "no_run"
    DUPLICATE = "duplicate"


class Change(enum.StrEnum):
    """Direction of a speed change once measurement noise is accounted for."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_CLEAR_CHANGE = "no_clear_change"


class RatioEstimate(BaseModel):
    """Speed of a candidate relative to another arm: other_time / candidate_time (>1 is faster)."""

    model_config = ConfigDict(frozen=True)

    median: float = Field(description="Median of the bootstrapped time ratio.")
    ci_low: float = Field(description="Lower bound of the bootstrap confidence interval.")
    ci_high: float = Field(description="Upper bound of the bootstrap confidence interval.")

    @model_validator(mode="after")
    def _bounds_are_ordered(self) -> RatioEstimate:
        values = (self.ci_low, self.median, self.ci_high)
        finite = all(math.isfinite(value) for value in values)
        if not (finite and 0 < self.ci_low <= self.median <= self.ci_high):
            raise ValueError(
                f"ratio estimate needs finite 0 < ci_low <= median <= ci_high, got "
                f"ci_low={self.ci_low}, median={self.median}, ci_high={self.ci_high}; "
                "pass the bootstrap interval as (low, median, high) of other_time/candidate_time"
            )
        return self

    def describe(self) -> str:
        """The estimate as '1.210x [1.150, 1.280]'."""
        return f"{self.median:.3f}x [{self.ci_low:.3f}, {self.ci_high:.3f}]"


class VerdictEvidence(BaseModel):
    """What the judge measured about one candidate, as input to the verdict."""

    model_config = ConfigDict(frozen=True)

    correct: bool = Field(description="Whether the candidate passed the correctness gate.")
    vs_parent: RatioEstimate | None = Field(
        description="Speed relative to the declared parent; None if not timed."
    )
    vs_frontier: RatioEstimate | None = Field(
        description="Speed relative to the frontier; None when the parent is the frontier."
    )
    tainted: bool = Field(
        default=False,
        description="Measured under contention or throttling: never promotes, never a success.",
    )
    parent_floor: float | None = Field(
        default=None,
        description="The floor vs_parent must clear when it covers only the configs the change "
        "reaches (search/scope.py); None: the run's floor.",
    )
    frontier_floor: float | None = Field(
        default=None,
        description="The same for vs_frontier (and for vs_parent when the parent is the "
        "frontier and vs_frontier is None).",
    )


class Decision(BaseModel):
    """The verdict on a candidate, its success bit for the sampler, and why."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict = Field(description="Outcome with respect to the frontier.")
    success: bool = Field(
        description="Correct and, on the objective, clearly faster than the frontier (promoted) "
        "or than its parent, its nearest measured ancestor (the candidate sampler's signal)."
    )
    reason: str = Field(description="One sentence with the numbers behind the verdict.")


def check_noise_floor(noise_floor: float) -> None:
    """Raise a ValueError unless the noise floor is a finite fraction >= 0."""
    if not (math.isfinite(noise_floor) and noise_floor >= 0):
        raise ValueError(
            f"noise floor must be a finite fraction >= 0 (0.01 means 1%), got {noise_floor}; "
            "pass the stored noise floor of the device and workload"
        )


def _format_floor(noise_floor: float) -> str:
    """The noise floor as a percentage, e.g. 0.01 -> '1%'."""
    return f"{noise_floor * 100:.3g}%"


def classify_change(estimate: RatioEstimate, noise_floor: float) -> Change:
    """FASTER or SLOWER only when the whole confidence interval clears the noise floor."""
    check_noise_floor(noise_floor)
    if estimate.ci_low > 1 + noise_floor:
        return Change.FASTER
    if estimate.ci_high < 1 / (1 + noise_floor):
        return Change.SLOWER
    return Change.NO_CLEAR_CHANGE


class ScreenGate(enum.StrEnum):
    """Where a correct screened candidate goes next."""

    SWEEP = "sweep"
    SLOWER_THAN_PARENT = "slower_than_parent"
    NO_WIN_OVER_FRONTIER = "no_win_over_frontier"


class ScreenReading(BaseModel):
    """What the screen timed of one correct candidate, as input to the gate."""

    model_config = ConfigDict(frozen=True)

    vs_parent: RatioEstimate | None = Field(description="Aggregate ratio against the parent.")
    vs_frontier_by_config: dict[str, float] = Field(
        description="Median ratio against the frontier on each screening config (against the "
        "parent when the parent is the frontier); empty when the frontier was not timed."
    )
    parent_is_frontier: bool = Field(description="The parent is the frontier.")
    tainted: bool = Field(
        default=False,
        description="Timed under contention or throttling: its ratios decide nothing beyond a "
        "clear slowdown, so the sweep (which measures again) decides.",
    )


def gate_screen(
    reading: ScreenReading, noise_floor: float, require_frontier_win: bool = True
) -> ScreenGate:
    """SWEEP when the candidate beats the frontier by more than the floor on some screening
    config (it may win a regime), or is clearly faster than a parent that is not the frontier
    (its lineage improves); a clear slowdown against the parent, or no win anywhere, ends it.
    Without require_frontier_win only a clear slowdown ends it (the screen sees few configs)."""
    check_noise_floor(noise_floor)
    vs_parent = reading.vs_parent
    change = classify_change(vs_parent, noise_floor) if vs_parent is not None else None
    if change is Change.SLOWER:
        return ScreenGate.SLOWER_THAN_PARENT
    if not require_frontier_win or not reading.vs_frontier_by_config or reading.tainted:
        return ScreenGate.SWEEP
    if max(reading.vs_frontier_by_config.values()) > 1 + noise_floor:
        return ScreenGate.SWEEP
    if change is Change.FASTER and not reading.parent_is_frontier:
        return ScreenGate.SWEEP
    return ScreenGate.NO_WIN_OVER_FRONTIER


def _judge_frontier(estimate: RatioEstimate, label: str, noise_floor: float) -> tuple[Verdict, str]:
    """Verdict and reason of a correct candidate from its estimate against the frontier."""
    threshold = 1 + noise_floor
    floor = _format_floor(noise_floor)
    measured = f"{estimate.describe()} vs {label}"
    if estimate.ci_low > threshold:
        return Verdict.PROMOTED, f"{measured} clears the {floor} noise floor"
    if estimate.ci_high <= threshold:
        return Verdict.REJECTED, (
            f"{measured} cannot beat the frontier by more than the {floor} noise floor "
            f"(ci_high <= {threshold:.3f})"
        )
    return Verdict.INCONCLUSIVE, (
        f"{measured} straddles the {floor} noise floor (ci_low <= {threshold:.3f} < ci_high)"
    )


def decide_verdict(evidence: VerdictEvidence, noise_floor: float) -> Decision:
    """Turn a candidate's correctness and speed estimates into a verdict and a success bit."""
    check_noise_floor(noise_floor)
    if not evidence.correct:
        return Decision(
            verdict=Verdict.FAILED_CORRECTNESS,
            success=False,
            reason="candidate failed the correctness gate, so its timings are not considered",
        )
    if evidence.tainted:
        return Decision(
            verdict=Verdict.INCONCLUSIVE,
            success=False,
            reason="the measurement was tainted by contention or throttling; it cannot promote",
        )
    parent = evidence.vs_parent
    frontier_floor = max(noise_floor, evidence.frontier_floor or 0.0)
    if evidence.vs_frontier is None:
        parent_floor = frontier_floor  # the parent is the frontier: one comparison, one floor
    else:
        parent_floor = max(noise_floor, evidence.parent_floor or 0.0)
    success = parent is not None and classify_change(parent, parent_floor) is Change.FASTER
    if evidence.vs_frontier is not None:
        verdict, reason = _judge_frontier(evidence.vs_frontier, "frontier", frontier_floor)
        if parent is not None:
            verdict_word = "clearly faster" if success else "not clearly faster"
            reason += f"; {parent.describe()} vs parent is {verdict_word}"
    elif parent is not None:
        verdict, reason = _judge_frontier(parent, "parent (the frontier)", frontier_floor)
    else:
        verdict = Verdict.INCONCLUSIVE
        reason = "candidate is correct but has no timing estimate against its parent or frontier"
    return Decision(verdict=verdict, success=success or verdict is Verdict.PROMOTED, reason=reason)
