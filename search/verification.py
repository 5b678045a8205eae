"""The verifier's rule: a new frontier stands only if a fresh replication clears the noise floor
while its controls behave (A/A shows nothing, a planted slowdown is caught)."""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field

from search.promotion import Change, RatioEstimate, classify_change


class VerificationVerdict(enum.StrEnum):
    """What the verifier concluded about a frontier claim."""

    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"


class VerificationEvidence(BaseModel):
    """One fresh evaluation: the claim, an A/A control and a positive control."""

    model_config = ConfigDict(frozen=True)

    replication: RatioEstimate = Field(description="Candidate vs the frontier it replaced.")
    aa_control: RatioEstimate = Field(description="Candidate vs a byte-identical copy.")
    positive_control: RatioEstimate = Field(
        description="Candidate vs a planted slowdown of itself (must read clearly faster)."
    )
    tainted: bool = Field(default=False, description="Contention seen while timing.")


class VerificationDecision(BaseModel):
    """Verdict and a sentence with the numbers."""

    model_config = ConfigDict(frozen=True)

    verdict: VerificationVerdict = Field(description="Confirmed, refuted or inconclusive.")
    reason: str = Field(description="Why.")


def decide_verification(evidence: VerificationEvidence, noise_floor: float) -> VerificationDecision:
    """Controls first (a broken measurement refutes nothing), then the replication."""
    if evidence.tainted:
        return VerificationDecision(
            verdict=VerificationVerdict.INCONCLUSIVE,
            reason="the replication was tainted by contention; nothing is concluded",
        )
    if classify_change(evidence.aa_control, noise_floor) is not Change.NO_CLEAR_CHANGE:
        return VerificationDecision(
            verdict=VerificationVerdict.INCONCLUSIVE,
            reason=f"the A/A control read {evidence.aa_control.describe()}: identical code "
            "looked different, so this measurement cannot decide",
        )
    if classify_change(evidence.positive_control, noise_floor) is not Change.FASTER:
        return VerificationDecision(
            verdict=VerificationVerdict.INCONCLUSIVE,
            reason=f"the planted slowdown was not caught ({evidence.positive_control.describe()}):"
            " the check could not fail",
        )
    if classify_change(evidence.replication, noise_floor) is Change.FASTER:
        return VerificationDecision(
            verdict=VerificationVerdict.CONFIRMED,
            reason=f"replicated in a fresh process: {evidence.replication.describe()} vs the "
            "previous frontier, with both controls behaving",
        )
    return VerificationDecision(
        verdict=VerificationVerdict.REFUTED,
        reason=f"a fresh replication read {evidence.replication.describe()} vs the previous "
        "frontier, which does not clear the noise floor; the controls behaved",
    )


def decide_replication(replication: RatioEstimate, noise_floor: float) -> VerificationDecision:
    """A replication carried by a later sweep (no controls of its own: the run's A/A floor was
    calibrated): confirmed when clearly faster than the frontier it replaced, refuted only when
    the whole interval says it is not, inconclusive otherwise."""
    if classify_change(replication, noise_floor) is Change.FASTER:
        return VerificationDecision(
            verdict=VerificationVerdict.CONFIRMED,
            reason=f"replicated on a later sweep: {replication.describe()} vs the previous "
            "frontier",
        )
    if replication.ci_high <= 1 + noise_floor:
        return VerificationDecision(
            verdict=VerificationVerdict.REFUTED,
            reason=f"a later sweep read {replication.describe()} vs the previous frontier, "
            "which cannot clear the noise floor",
        )
    return VerificationDecision(
        verdict=VerificationVerdict.INCONCLUSIVE,
        reason=f"a later sweep read {replication.describe()} vs the previous frontier: "
        "neither clearly faster nor clearly not",
    )
