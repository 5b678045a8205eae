"""Verdicts: noise-floor classification, promotion rules and the screen filter."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from search.promotion import (
    Change,
    RatioEstimate,
    ScreenGate,
    ScreenReading,
    Verdict,
    VerdictEvidence,
    classify_change,
    decide_verdict,
    gate_screen,
)

FLOOR = 0.01


def ratio(ci_low: float, median: float, ci_high: float) -> RatioEstimate:
    """A ratio estimate from its three numbers."""
    return RatioEstimate(median=median, ci_low=ci_low, ci_high=ci_high)


def evidence(
    vs_parent: RatioEstimate | None, vs_frontier: RatioEstimate | None, correct: bool = True
) -> VerdictEvidence:
    """Evidence for a candidate."""
    return VerdictEvidence(correct=correct, vs_parent=vs_parent, vs_frontier=vs_frontier)


@pytest.mark.parametrize(
    ("low", "median", "high"),
    [(0.0, 1.0, 1.1), (-1.0, 1.0, 1.1), (1.1, 1.0, 1.2), (0.9, 1.3, 1.2), (0.9, 1.0, float("inf"))],
)
def test_ratio_estimate_rejects_misordered_or_nonpositive_bounds(
    low: float, median: float, high: float
) -> None:
    with pytest.raises(ValidationError, match="ci_low <= median <= ci_high"):
        ratio(low, median, high)


def test_ratio_estimate_accepts_a_point_interval() -> None:
    assert ratio(1.0, 1.0, 1.0).median == 1.0


def test_ratio_estimate_is_frozen() -> None:
    estimate = ratio(1.0, 1.1, 1.2)
    with pytest.raises(ValidationError):
        estimate.median = 2.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("estimate", "expected"),
    [
        (ratio(1.05, 1.10, 1.20), Change.FASTER),
        (ratio(1.01, 1.10, 1.20), Change.NO_CLEAR_CHANGE),  # ci_low exactly 1 + floor
        (ratio(1.0101, 1.10, 1.20), Change.FASTER),
        (ratio(0.95, 1.02, 1.08), Change.NO_CLEAR_CHANGE),
        (ratio(0.80, 0.85, 0.90), Change.SLOWER),
        (ratio(0.80, 0.85, 1 / 1.01), Change.NO_CLEAR_CHANGE),  # ci_high exactly 1/(1+floor)
        (ratio(0.80, 0.85, 0.98), Change.SLOWER),
    ],
)
def test_classify_change(estimate: RatioEstimate, expected: Change) -> None:
    assert classify_change(estimate, FLOOR) is expected


def test_classify_change_with_zero_floor() -> None:
    assert classify_change(ratio(1.0001, 1.1, 1.2), 0.0) is Change.FASTER
    assert classify_change(ratio(1.0, 1.1, 1.2), 0.0) is Change.NO_CLEAR_CHANGE


@pytest.mark.parametrize("floor", [-0.01, float("nan"), float("inf")])
def test_classify_change_rejects_bad_floor(floor: float) -> None:
    with pytest.raises(ValueError, match="noise floor must be a finite fraction >= 0"):
        classify_change(ratio(1.0, 1.1, 1.2), floor)


def test_incorrect_candidate_fails_correctness_whatever_its_speed() -> None:
    decision = decide_verdict(evidence(ratio(2.0, 2.1, 2.2), ratio(2.0, 2.1, 2.2), False), FLOOR)
    assert decision.verdict is Verdict.FAILED_CORRECTNESS
    assert decision.success is False
    assert "correctness" in decision.reason


def test_promoted_against_frontier() -> None:
    decision = decide_verdict(evidence(ratio(1.3, 1.4, 1.5), ratio(1.15, 1.21, 1.28)), FLOOR)
    assert decision.verdict is Verdict.PROMOTED
    assert decision.success is True
    assert "1.210x [1.150, 1.280] vs frontier clears the 1% noise floor" in decision.reason


def test_faster_than_parent_but_not_frontier_is_success_and_rejected() -> None:
    decision = decide_verdict(evidence(ratio(1.10, 1.15, 1.20), ratio(0.90, 0.95, 1.00)), FLOOR)
    assert decision.verdict is Verdict.REJECTED
    assert decision.success is True


def test_faster_than_parent_and_straddling_frontier_is_success_and_inconclusive() -> None:
    decision = decide_verdict(evidence(ratio(1.10, 1.15, 1.20), ratio(0.99, 1.02, 1.05)), FLOOR)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert decision.success is True
    assert "straddles" in decision.reason


def test_rejected_boundary_is_inclusive() -> None:
    # ci_high exactly 1 + floor cannot be a meaningful improvement.
    decision = decide_verdict(evidence(None, ratio(0.95, 1.0, 1.01)), FLOOR)
    assert decision.verdict is Verdict.REJECTED
    just_above = decide_verdict(evidence(None, ratio(0.95, 1.0, 1.0101)), FLOOR)
    assert just_above.verdict is Verdict.INCONCLUSIVE


def test_promoted_boundary_is_exclusive() -> None:
    decision = decide_verdict(evidence(None, ratio(1.01, 1.05, 1.10)), FLOOR)
    assert decision.verdict is Verdict.INCONCLUSIVE


def test_parent_is_frontier_uses_vs_parent_for_the_verdict() -> None:
    promoted = decide_verdict(evidence(ratio(1.05, 1.08, 1.12), None), FLOOR)
    assert (promoted.verdict, promoted.success) == (Verdict.PROMOTED, True)
    assert "parent (the frontier)" in promoted.reason
    rejected = decide_verdict(evidence(ratio(0.97, 0.99, 1.005), None), FLOOR)
    assert (rejected.verdict, rejected.success) == (Verdict.REJECTED, False)
    unclear = decide_verdict(evidence(ratio(1.0, 1.02, 1.04), None), FLOOR)
    assert (unclear.verdict, unclear.success) == (Verdict.INCONCLUSIVE, False)


def test_a_promotion_is_a_success_even_when_not_clearly_faster_than_the_parent() -> None:
    # Success is measured against the frontier or the nearest ancestor: beating the frontier
    # on the objective is the search's goal, whatever the parent's estimate says.
    decision = decide_verdict(evidence(ratio(0.99, 1.0, 1.02), ratio(1.2, 1.3, 1.4)), FLOOR)
    assert decision.verdict is Verdict.PROMOTED
    assert decision.success is True
    assert "not clearly faster" in decision.reason


def test_frontier_estimate_without_parent_estimate_is_a_success_when_promoted() -> None:
    decision = decide_verdict(evidence(None, ratio(1.2, 1.3, 1.4)), FLOOR)
    assert (decision.verdict, decision.success) == (Verdict.PROMOTED, True)
    unclear = decide_verdict(evidence(None, ratio(0.99, 1.02, 1.05)), FLOOR)
    assert (unclear.verdict, unclear.success) == (Verdict.INCONCLUSIVE, False)


def test_a_scoped_comparison_clears_its_own_floor_never_less_than_the_runs() -> None:
    # 3% on the one config a change reaches: promoted at the run's 1%, not at that config's
    # own 4% A/A excursion; a scoped floor below the run's is raised to it.
    gain = ratio(1.02, 1.03, 1.04)
    assert decide_verdict(evidence(gain, None), FLOOR).verdict is Verdict.PROMOTED
    noisy = VerdictEvidence(correct=True, vs_parent=gain, vs_frontier=None, frontier_floor=0.04)
    assert decide_verdict(noisy, FLOOR).verdict is Verdict.REJECTED
    quiet = VerdictEvidence(
        correct=True, vs_parent=ratio(1.005, 1.008, 1.012), vs_frontier=None, frontier_floor=0.0
    )
    assert decide_verdict(quiet, FLOOR).verdict is Verdict.INCONCLUSIVE
    # With a frontier arm, each comparison clears its own floor: the parent's decides success.
    both = VerdictEvidence(
        correct=True,
        vs_parent=gain,
        vs_frontier=ratio(1.02, 1.03, 1.04),
        parent_floor=0.04,
        frontier_floor=0.01,
    )
    decision = decide_verdict(both, FLOOR)
    assert decision.verdict is Verdict.PROMOTED and "not clearly faster" in decision.reason


def test_correct_without_any_timing_is_inconclusive() -> None:
    decision = decide_verdict(evidence(None, None), FLOOR)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert decision.success is False
    assert "no timing estimate" in decision.reason


def test_decide_verdict_rejects_bad_floor() -> None:
    with pytest.raises(ValueError, match=r"got -0\.5"):
        decide_verdict(evidence(None, None), -0.5)


def test_floor_is_formatted_as_a_percentage() -> None:
    decision = decide_verdict(evidence(None, ratio(1.1, 1.2, 1.3)), 0.005)
    assert "0.5% noise floor" in decision.reason


@pytest.mark.parametrize(
    ("estimate", "expected"),
    [
        (ratio(0.80, 0.85, 0.90), False),
        (ratio(0.95, 1.00, 1.05), True),
        (ratio(0.80, 0.90, 1 / 1.01), True),
        (ratio(1.10, 1.20, 1.30), True),
    ],
)
def test_the_parent_rule_drops_only_clear_slowdowns(
    estimate: RatioEstimate, expected: bool
) -> None:
    # screen_gate=parent: no win over the frontier is needed (here there is none anywhere).
    screened = ScreenReading(
        vs_parent=estimate, vs_frontier_by_config={"1": 0.9}, parent_is_frontier=True
    )
    gate = gate_screen(screened, FLOOR, require_frontier_win=False)
    assert gate is (ScreenGate.SWEEP if expected else ScreenGate.SLOWER_THAN_PARENT)
    assert gate_screen(screened, FLOOR) is not ScreenGate.SWEEP  # the default rule stops it


def test_verdict_values_are_stable_strings() -> None:
    assert [verdict.value for verdict in Verdict] == [
        "promoted",
        "rejected",
        "inconclusive",
        "failed_correctness",
        "failed_static",
        "failed_run",
        "no_run",
        "duplicate",
    ]


def test_a_tainted_measurement_never_promotes_or_succeeds() -> None:
    clear_win = RatioEstimate(median=2.0, ci_low=1.9, ci_high=2.1)
    clean = decide_verdict(
        VerdictEvidence(correct=True, vs_parent=clear_win, vs_frontier=None), 0.01
    )
    assert clean.verdict is Verdict.PROMOTED and clean.success
    tainted = decide_verdict(
        VerdictEvidence(correct=True, vs_parent=clear_win, vs_frontier=None, tainted=True), 0.01
    )
    assert tainted.verdict is Verdict.INCONCLUSIVE and not tainted.success
    assert "tainted" in tainted.reason


def reading(
    vs_parent: RatioEstimate | None, by_config: dict[str, float], parent_is_frontier: bool
) -> ScreenReading:
    """A screen reading from its parts."""
    return ScreenReading(
        vs_parent=vs_parent, vs_frontier_by_config=by_config, parent_is_frontier=parent_is_frontier
    )


NEUTRAL = ratio(0.99, 1.00, 1.01)


@pytest.mark.parametrize(
    ("screened", "expected"),
    [
        # An inert change of the frontier: 1.00x everywhere goes no further.
        (reading(NEUTRAL, {"1": 1.004, "2": 0.998}, True), ScreenGate.NO_WIN_OVER_FRONTIER),
        # A win on one config is a possible regime: it earns the sweep.
        (reading(NEUTRAL, {"1": 0.97, "2": 1.05}, True), ScreenGate.SWEEP),
        # A clear slowdown against the parent stops it whatever the frontier says.
        (reading(ratio(0.8, 0.85, 0.9), {"1": 1.2}, False), ScreenGate.SLOWER_THAN_PARENT),
        # Clearly faster than a parent that is not the frontier: its lineage improves.
        (reading(ratio(1.1, 1.2, 1.3), {"1": 0.9}, False), ScreenGate.SWEEP),
        # ... but not when the parent is the frontier and no config beats it.
        (reading(ratio(1.1, 1.2, 1.3), {"1": 0.9}, True), ScreenGate.NO_WIN_OVER_FRONTIER),
        # No frontier timing at all: only the parent rule applies.
        (reading(NEUTRAL, {}, False), ScreenGate.SWEEP),
        # Exactly at the floor is not beyond it.
        (reading(NEUTRAL, {"1": 1.01}, True), ScreenGate.NO_WIN_OVER_FRONTIER),
    ],
)
def test_screen_gate(screened: ScreenReading, expected: ScreenGate) -> None:
    assert gate_screen(screened, FLOOR) is expected


def test_a_tainted_screen_leaves_the_decision_to_the_sweep() -> None:
    quiet = reading(NEUTRAL, {"1": 1.0}, True)
    assert gate_screen(quiet, FLOOR) is ScreenGate.NO_WIN_OVER_FRONTIER
    busy = quiet.model_copy(update={"tainted": True})
    assert gate_screen(busy, FLOOR) is ScreenGate.SWEEP


def test_screen_gate_checks_the_floor() -> None:
    with pytest.raises(ValueError, match="noise floor"):
        gate_screen(reading(NEUTRAL, {}, True), float("nan"))
