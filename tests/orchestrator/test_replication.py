"""Verification riding on a sweep: the replaced frontier joins the next sweep and decides."""

from __future__ import annotations

from harness.models import ConfigResult, EvaluationResult, Outcome, RatioStats
from orchestrator.change_scope import ComparisonScope
from orchestrator.replication import PREVIOUS_ARM, replication_records, riding_verification
from orchestrator.settings import Settings, VerificationMode
from orchestrator.state import CandidateView, SearchState
from search import RatioEstimate, VerificationVerdict, decide_replication

SEED, OLD, NEW, CHILD = "0" * 40, "1" * 40, "2" * 40, "3" * 40
WHOLE = ComparisonScope(configs=None, floor=0.01)


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
    timed = result((2.0, 1.95, 2.05), (1.0, 0.99, 1.01))
    real = replication_records((NEW, OLD), arms, timed, WHOLE)
    assert [r.kind for r in real] == ["verification"]
    assert real[0].payload["verdict"] == VerificationVerdict.CONFIRMED.value
    # The interval is divided the wide way: both links' uncertainty is in it.
    assert real[0].payload["replication"]["ci_low"] == 1.95 / 1.01
    lucky = replication_records(
        (NEW, OLD), arms, result((0.98, 0.97, 0.99), (1.0, 0.995, 1.005)), WHOLE
    )
    assert [r.kind for r in lucky] == ["verification", "frontier_demoted"]
    assert lucky[0].payload["verdict"] == VerificationVerdict.REFUTED.value
    unsure = replication_records(
        (NEW, OLD), arms, result((1.0, 0.96, 1.04), (1.0, 0.99, 1.01)), WHOLE
    )
    assert unsure[0].payload["verdict"] == VerificationVerdict.INCONCLUSIVE.value
    tainted = result((2.0, 1.95, 2.05), (1.0, 0.99, 1.01)).model_copy(update={"tainted": True})
    assert replication_records((NEW, OLD), arms, tainted, WHOLE) == []


def ratio(other: str, values: tuple[float, float, float]) -> RatioStats:
    median, low, high = values
    return RatioStats(
        arm="candidate", other=other, median=median, ci_low=low, ci_high=high, rounds=20
    )


def test_a_frontier_that_changed_one_config_is_replicated_on_that_config() -> None:
    # The new frontier differs from the old one on config "wide" only (17% faster there);
    # over all four configs the gain reads 1.04x, inside a 6% floor: refuted. On its scope it
    # replicates, against that config's own floor.
    arms = {"candidate": CHILD, "parent": NEW, PREVIOUS_ARM: OLD}
    configs = [
        ConfigResult(
            config_id=name,
            ratios=[ratio(PREVIOUS_ARM, to_old), ratio("parent", (1.0, 0.995, 1.005))],
        )
        for name, to_old in (
            ("wide", (1.17, 1.15, 1.19)),
            ("a", (1.0, 0.99, 1.01)),
            ("b", (1.0, 0.99, 1.01)),
            ("c", (1.0, 0.99, 1.01)),
        )
    ]
    whole = result((1.04, 1.035, 1.045), (1.0, 0.995, 1.005)).model_copy(
        update={"configs": configs}
    )
    loose = ComparisonScope(configs=None, floor=0.06)
    refuted = replication_records((NEW, OLD), arms, whole, loose)
    assert refuted[0].payload["verdict"] == VerificationVerdict.REFUTED.value
    scoped = ComparisonScope(configs=["wide"], floor=0.06)
    confirmed = replication_records((NEW, OLD), arms, whole, scoped)
    assert [r.kind for r in confirmed] == ["verification"]
    assert confirmed[0].payload["verdict"] == VerificationVerdict.CONFIRMED.value
    assert "on configs wide" in confirmed[0].payload["reason"]
    # A scoped floor above the gain refuses it again: the floor is the scope's, not 0.
    strict = ComparisonScope(configs=["wide"], floor=0.2)
    assert replication_records((NEW, OLD), arms, whole, strict)[0].payload["verdict"] == (
        VerificationVerdict.REFUTED.value
    )
    # ... unless the whole objective clears the run's own floor (a noisy config's scope).
    noisy = ComparisonScope(configs=["wide"], floor=0.2, run_floor=0.01)
    kept = replication_records((NEW, OLD), arms, whole, noisy)
    assert kept[0].payload["verdict"] == VerificationVerdict.CONFIRMED.value
    assert "on configs" not in kept[0].payload["reason"]


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
