"""The screen gate's reading of a judge result: which arm stands for the frontier, per config."""

from __future__ import annotations

from harness.models import ConfigResult, EvaluationResult, Outcome, RatioStats
from orchestrator.measured import screen_reading
from search import RatioEstimate, ScreenGate, gate_screen


def _result(ratios: dict[str, dict[str, float]]) -> EvaluationResult:
    """A passed screen whose candidate has these medians against each other arm, per config."""
    configs = [
        ConfigResult(
            config_id=config_id,
            ratios=[
                RatioStats(
                    arm="candidate",
                    other=other,
                    median=m,
                    ci_low=m * 0.99,
                    ci_high=m * 1.01,
                    rounds=10,
                )
                for other, m in by_arm.items()
            ],
        )
        for config_id, by_arm in ratios.items()
    ]
    return EvaluationResult(evaluation_id="e", nonce="n", outcome=Outcome.PASSED, configs=configs)


NEUTRAL = RatioEstimate(median=1.0, ci_low=0.99, ci_high=1.01)


def test_the_parent_stands_for_the_frontier_when_it_is_the_frontier() -> None:
    result = _result({"1": {"parent": 1.002}, "2": {"parent": 0.999}})
    reading = screen_reading({"candidate": "c", "parent": "f"}, "f", result, NEUTRAL)
    assert reading.parent_is_frontier
    assert reading.vs_frontier_by_config == {"1": 1.002, "2": 0.999}
    assert gate_screen(reading, 0.01) is ScreenGate.NO_WIN_OVER_FRONTIER


def test_the_frontier_arm_is_read_when_the_parent_is_another_candidate() -> None:
    result = _result(
        {"1": {"parent": 1.3, "frontier": 0.98}, "2": {"parent": 1.2, "frontier": 1.04}}
    )
    arms = {"candidate": "c", "parent": "p", "frontier": "f"}
    reading = screen_reading(arms, "f", result, NEUTRAL)
    assert not reading.parent_is_frontier
    assert reading.vs_frontier_by_config == {"1": 0.98, "2": 1.04}
    assert gate_screen(reading, 0.01) is ScreenGate.SWEEP  # config 2 beats the frontier


def test_without_a_frontier_nothing_is_read_against_it() -> None:
    result = _result({"1": {"parent": 1.0}})
    reading = screen_reading({"candidate": "c", "parent": "p"}, None, result, NEUTRAL)
    assert reading.vs_frontier_by_config == {}
    assert gate_screen(reading, 0.01) is ScreenGate.SWEEP
