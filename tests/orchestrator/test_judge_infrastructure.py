"""A judge whose own step failed is infrastructure to the orchestrator: the candidate's
verdict is tainted (never scored), a frontier's feasibility stays unchecked, and the message
keeps the exception at its end."""

from __future__ import annotations

from pathlib import Path

from harness.models import EvaluationResult, Outcome, RejectReason
from ledger import Ledger
from orchestrator.events import EventKind, FeasibilityChecked, Stage
from orchestrator.feasibility import message_ends
from orchestrator.judge_file import verdict_of
from orchestrator.stages import failed_verdict
from orchestrator.state import CandidateView, derive_state
from search import Verdict

TRACEBACK = "Traceback (most recent call last):\n" + "  frame\n" * 400


def result(outcome: Outcome, taint: list[str], reason: RejectReason | None) -> EvaluationResult:
    return EvaluationResult(
        evaluation_id="e",
        nonce="n",
        outcome=outcome,
        message="the judge's own poison fill step failed (not the candidate):\n" + TRACEBACK,
        wall_s=1.0,
        reason=reason,
        tainted=bool(taint),
        taint=taint,
    )


def view(details: dict[str, object], verdict: Verdict) -> CandidateView:
    return CandidateView(
        sha="c",
        tree_sha="t",
        parent_sha="p",
        step=1,
        idea_id="i",
        agent="a",
        message="m",
        verdict=verdict,
        details=details,
    )


def test_a_judge_step_failure_gives_a_tainted_verdict_that_is_not_scored() -> None:
    judged = result(Outcome.NO_RESULT, ["the judge's own poison fill step failed"], None)
    record = failed_verdict("c", 1, Stage.SCREEN, judged)
    assert view(record.details, Verdict(record.verdict)).tainted


def test_the_candidate_raising_is_scored() -> None:
    raised = result(Outcome.RUNTIME_ERROR, [], RejectReason.RUNTIME_ERROR)
    record = failed_verdict("c", 1, Stage.SCREEN, raised)
    assert not view(record.details, Verdict(record.verdict)).tainted


def test_a_rejection_timed_under_contention_is_still_scored() -> None:
    # Tainted by contention, rejected for an impossible time: the cheat is charged, not excused.
    taint = ["config 1: other processes used 0.99 CPU cores while timing"]
    cheat = result(Outcome.REJECTED, taint, RejectReason.IMPLAUSIBLE_TIME)
    assert cheat.tainted and not cheat.judge_failed
    record = failed_verdict("c", 1, Stage.SWEEP, cheat)
    assert not view(record.details, Verdict(record.verdict)).tainted
    assert verdict_of(cheat) == "rejected"
    judged = result(Outcome.NO_RESULT, ["the judge's own reference step failed"], None)
    assert verdict_of(judged) == "no_result"
    assert verdict_of(result(Outcome.NO_RESULT, [], None)) == "rejected"  # e.g. no result file


def checked(sha: str, infrastructure: bool) -> FeasibilityChecked:
    return FeasibilityChecked(
        sha=sha,
        configs=["14"],
        passed=False,
        outcome="no_result",
        message="m",
        infrastructure=infrastructure,
        wall_s=1.0,
        elements=0,
        failed_elements=0,
    )


def test_feasibility_the_judge_failed_stays_unchecked(tmp_path: Path) -> None:
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        ledger.append(checked("a" * 40, infrastructure=True).to_event(EventKind.FEASIBILITY))
        ledger.append(checked("b" * 40, infrastructure=False).to_event(EventKind.FEASIBILITY))
        state = derive_state(ledger)
    assert state.feasibility == {"b" * 40: False}  # 'a' is checked again at the next stop


def test_a_long_message_keeps_its_first_line_and_its_end() -> None:
    message = "what failed\n" + "x\n" * 5000 + "MemoryError: the end"
    kept = message_ends(message)
    assert kept.startswith("what failed\n[...]") and kept.endswith("MemoryError: the end")
    assert len(kept) < 3000
    assert message_ends("short\nmessage") == "short\nmessage"
