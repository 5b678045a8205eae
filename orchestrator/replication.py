"""Verification that rides on a sweep: the new frontier timed beside the one it replaced."""

from __future__ import annotations

from harness.models import EvaluationResult
from ledger import EventRecord
from orchestrator.events import EventKind, FrontierDemoted, Verification
from orchestrator.settings import Settings, VerificationMode
from orchestrator.state import SearchState
from search import RatioEstimate, VerificationVerdict, decide_replication

PREVIOUS_ARM = "previous"  # the replaced frontier, timed on a later sweep to verify the new one


def riding_verification(
    settings: Settings, state: SearchState, arms: dict[str, str]
) -> tuple[str, str] | None:
    """When verification rides on sweeps and the frontier awaits it: (frontier, the one it
    replaced), with the replaced one added to this sweep's arms if it is not there yet. The
    frontier itself is in every sweep (as parent or frontier arm)."""
    if settings.verification != VerificationMode.AMORTIZED or not settings.verify_frontier:
        return None
    pending = state.pending_verification()
    if pending is None or pending[0] not in arms.values():
        return None
    if pending[1] not in arms.values():
        arms[PREVIOUS_ARM] = pending[1]
    return pending


def replication_records(
    pending: tuple[str, str], arms: dict[str, str], result: EvaluationResult, noise_floor: float
) -> list[EventRecord]:
    """The verdict on the frontier from a sweep that timed it beside the one it replaced:
    (candidate vs previous) / (candidate vs frontier), bounds divided the wide way."""
    sha, against = pending
    by_sha = {commit: name for name, commit in arms.items()}
    to_previous = result.aggregate(by_sha[against])
    to_frontier = result.aggregate(by_sha[sha])
    if result.tainted or to_previous is None or to_frontier is None:
        return []  # nothing learnt; the next sweep tries again
    replication = RatioEstimate(
        median=to_previous.median / to_frontier.median,
        ci_low=to_previous.ci_low / to_frontier.ci_high,
        ci_high=to_previous.ci_high / to_frontier.ci_low,
    )
    decision = decide_replication(replication, noise_floor)
    event = Verification(
        sha=sha,
        against=against,
        verdict=decision.verdict.value,
        reason=f"{decision.reason} (on the sweep {result.evaluation_id})",
        replication=replication.model_dump(),
        aa_control=None,
        positive_control=None,
        evaluation_outcome=result.outcome.value,
    )
    records = [event.to_event(EventKind.VERIFICATION)]
    if decision.verdict is VerificationVerdict.REFUTED:
        demoted = FrontierDemoted(sha=sha, reason=decision.reason)
        records.append(demoted.to_event(EventKind.FRONTIER_DEMOTED))
    return records
