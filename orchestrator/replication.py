"""Verification that rides on a sweep: the new frontier timed beside the one it replaced."""

from __future__ import annotations

from harness.models import EvaluationResult
from ledger import EventRecord
from orchestrator.change_scope import ComparisonScope
from orchestrator.events import EventKind, FrontierDemoted, Verification
from orchestrator.settings import Settings, VerificationMode
from orchestrator.state import SearchState
from search import (
    RatioEstimate,
    VerificationDecision,
    VerificationVerdict,
    decide_replication,
)

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
    pending: tuple[str, str],
    arms: dict[str, str],
    result: EvaluationResult,
    scope: ComparisonScope,
) -> list[EventRecord]:
    """The verdict on the frontier from a sweep that timed it beside the one it replaced:
    (candidate vs previous) / (candidate vs frontier), bounds divided the wide way, read on
    the configs where the two frontiers' code differs (the scope its promotion read)."""
    sha, against = pending
    by_sha = {commit: name for name, commit in arms.items()}
    if result.tainted:
        return []  # nothing learnt; the next sweep tries again
    compared = (by_sha[against], by_sha[sha])
    read = _replication(result, compared, scope)
    if read is None:
        return []
    if scope.configs is not None and read[1].verdict is not VerificationVerdict.CONFIRMED:
        # As promotion does: the whole objective may confirm what one noisy config cannot,
        # and the scoped reading refutes only what the whole one refutes too.
        whole = _replication(result, compared, scope.whole())
        if whole is not None and (
            whole[1].verdict is VerificationVerdict.CONFIRMED
            or (
                whole[1].verdict is not VerificationVerdict.REFUTED
                and read[1].verdict is VerificationVerdict.REFUTED
            )
        ):
            read, scope = whole, scope.whole()
    replication, decision = read
    event = Verification(
        sha=sha,
        against=against,
        verdict=decision.verdict.value,
        reason=f"{decision.reason} (on the sweep {result.evaluation_id}){scope.describe()}",
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


def _replication(
    result: EvaluationResult, compared: tuple[str, str], scope: ComparisonScope
) -> tuple[RatioEstimate, VerificationDecision] | None:
    """(candidate vs the previous frontier's arm) / (candidate vs the frontier's arm) over the
    scope, and what it decides against the scope's floor (None: an arm has no ratio)."""
    to_previous = scope.estimate(result, compared[0])
    to_frontier = scope.estimate(result, compared[1])
    if to_previous is None or to_frontier is None:
        return None
    replication = RatioEstimate(
        median=to_previous.median / to_frontier.median,
        ci_low=to_previous.ci_low / to_frontier.ci_high,
        ci_high=to_previous.ci_high / to_frontier.ci_low,
    )
    return replication, decide_replication(replication, scope.floor)
