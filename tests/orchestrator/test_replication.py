"""Verification riding on a sweep: the replaced frontier joins the next sweep and decides."""

from __future__ import annotations

from harness.models import EvaluationResult, Outcome, RatioStats
from orchestrator.replication import PREVIOUS_ARM, replication_records, riding_verification
from orchestrator.settings import Settings, VerificationMode
from orchestrator.state import CandidateView, SearchState
from search import RatioEstimate, VerificationVerdict, decide_replication

SEED, OLD, NEW, CHILD = "0" * 40, "1" * 40, "2" * 40, "3" * 40


def state_with_pending() -> SearchState:
    state = SearchState(seed_sha=SEED, frontier_sha=NEW)
    new = CandidateView(
        sha=NEW, tree_sha="t", parent_sha=OLD, step=2, idea_id=None, agent="offline", message=""
    )
    new.details = {"frontier_before": OLD}
    state.candidates = {NEW: new}
    return state


def settings(mode: VerificationMode) -> Settings:
    return Settings.model_validate({"run_dir": "/tmp/r", "verification": mode})


def result(
    to_previous: tuple[float, float, float], to_new: tuple[float, float, float]
) -> EvaluationResult:
    stats = [
        RatioStats(arm="candidate", other=name, median=m, ci_low=lo, ci_high=hi, rounds=20)
        for name, (m, lo, hi) in ((PREVIOUS_ARM, to_previous), ("parent", to_new))
    ]
    return EvaluationResult(
        evaluation_id=f"{CHILD}:sweep", nonce="n", outcome=Outcome.PASSED, aggregates=stats
    )


def test_the_replaced_frontier_rides_on_the_next_sweep_of_a_child() -> None:
    arms = {"candidate": CHILD, "parent": NEW, "baseline": "reference"}
    pending = riding_verification(settings(VerificationMode.AMORTIZED), state_with_pending(), arms)
    assert pending == (NEW, OLD) and arms[PREVIOUS_ARM] == OLD
    # Separate mode, or a sweep that does not time the frontier, carries nothing.
    arms = {"candidate": CHILD, "parent": NEW}
    assert (
        riding_verification(settings(VerificationMode.SEPARATE), state_with_pending(), arms) is None
    )
    assert PREVIOUS_ARM not in arms
    unrelated = {"candidate": CHILD, "parent": OLD}
    assert (
        riding_verification(settings(VerificationMode.AMORTIZED), state_with_pending(), unrelated)
        is None
    )


def test_the_sweep_confirms_refutes_or_leaves_it_open() -> None:
    arms = {"candidate": CHILD, "parent": NEW, PREVIOUS_ARM: OLD}
    real = replication_records((NEW, OLD), arms, result((2.0, 1.95, 2.05), (1.0, 0.99, 1.01)), 0.01)
    assert [r.kind for r in real] == ["verification"]
    assert real[0].payload["verdict"] == VerificationVerdict.CONFIRMED.value
    # The interval is divided the wide way: both links' uncertainty is in it.
    assert real[0].payload["replication"]["ci_low"] == 1.95 / 1.01
    lucky = replication_records(
        (NEW, OLD), arms, result((0.98, 0.97, 0.99), (1.0, 0.995, 1.005)), 0.01
    )
    assert [r.kind for r in lucky] == ["verification", "frontier_demoted"]
    assert lucky[0].payload["verdict"] == VerificationVerdict.REFUTED.value
    unsure = replication_records(
        (NEW, OLD), arms, result((1.0, 0.96, 1.04), (1.0, 0.99, 1.01)), 0.01
    )
    assert unsure[0].payload["verdict"] == VerificationVerdict.INCONCLUSIVE.value
    tainted = result((2.0, 1.95, 2.05), (1.0, 0.99, 1.01)).model_copy(update={"tainted": True})
    assert replication_records((NEW, OLD), arms, tainted, 0.01) == []


def test_a_replication_is_refuted_only_when_the_whole_interval_says_so() -> None:
    floor = 0.01
    assert decide_replication(
        RatioEstimate(median=1.1, ci_low=1.05, ci_high=1.2), floor
    ).verdict is (VerificationVerdict.CONFIRMED)
    assert decide_replication(
        RatioEstimate(median=1.0, ci_low=0.98, ci_high=1.01), floor
    ).verdict is (VerificationVerdict.REFUTED)
    assert decide_replication(
        RatioEstimate(median=1.02, ci_low=0.99, ci_high=1.05), floor
    ).verdict is (VerificationVerdict.INCONCLUSIVE)
