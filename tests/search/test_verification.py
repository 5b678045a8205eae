"""The verifier's rule: controls first, then the replication decides."""

from __future__ import annotations

from search import (
    RatioEstimate,
    VerificationEvidence,
    VerificationVerdict,
    decide_verification,
)

FLOOR = 0.01
FASTER = RatioEstimate(median=1.3, ci_low=1.25, ci_high=1.35)
SAME = RatioEstimate(median=1.0, ci_low=0.995, ci_high=1.006)
SLOWER = RatioEstimate(median=0.8, ci_low=0.78, ci_high=0.82)


def evidence(
    replication: RatioEstimate,
    aa: RatioEstimate = SAME,
    planted: RatioEstimate = FASTER,
    tainted: bool = False,
) -> VerificationEvidence:
    return VerificationEvidence(
        replication=replication, aa_control=aa, positive_control=planted, tainted=tainted
    )


def test_a_replicated_claim_with_good_controls_is_confirmed() -> None:
    assert decide_verification(evidence(FASTER), FLOOR).verdict is VerificationVerdict.CONFIRMED


def test_a_claim_that_does_not_replicate_is_refuted() -> None:
    for replication in (SAME, SLOWER):
        decision = decide_verification(evidence(replication), FLOOR)
        assert decision.verdict is VerificationVerdict.REFUTED and "replication" in decision.reason


def test_broken_controls_make_it_inconclusive_never_refuted() -> None:
    aa_broken = decide_verification(evidence(SAME, aa=FASTER), FLOOR)
    assert aa_broken.verdict is VerificationVerdict.INCONCLUSIVE and "A/A" in aa_broken.reason
    blind = decide_verification(evidence(SAME, planted=SAME), FLOOR)
    assert blind.verdict is VerificationVerdict.INCONCLUSIVE and "could not fail" in blind.reason
    tainted = decide_verification(evidence(SAME, tainted=True), FLOOR)
    assert tainted.verdict is VerificationVerdict.INCONCLUSIVE
