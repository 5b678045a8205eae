"""Honest credit: infrastructure outcomes of an expansion never count against an idea or a clade."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.expander import ExpansionOutcome
from ledger import CandidateRecord, Ledger, VerdictRecord
from orchestrator.events import (
    EvaluationSummary,
    EventKind,
    ExpansionFailed,
    IdeaRegistered,
    Stage,
    StepStarted,
)
from orchestrator.state import SearchState, derive_state

SEED = "a" * 40
EVAL = EventKind.EVALUATION


def started(step: int) -> StepStarted:
    """Step `step` on the seed with the idea 'fuse'."""
    return StepStarted(
        step=step,
        parent_sha=SEED,
        idea_id="fuse",
        parent_theta=0.5,
        idea_theta=0.5,
        idea_forced=False,
        parent_forced=False,
    )


def child_record(sha: str) -> CandidateRecord:
    """Step 1's candidate: a child of the seed for the idea 'fuse'."""
    return CandidateRecord(
        sha=sha,
        tree_sha="d" * 40,
        parent_sha=SEED,
        step=1,
        idea_id="fuse",
        agent="offline",
        message="m",
        prompt_hash=None,
        cost={},
    )


def _ledger(tmp_path: Path, outcomes: list[ExpansionOutcome]) -> SearchState:
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        ledger.append(
            CandidateRecord(
                sha=SEED,
                tree_sha="b" * 40,
                parent_sha=None,
                step=0,
                idea_id=None,
                agent="seed",
                message="seed",
                prompt_hash=None,
                cost={},
            )
        )
        ledger.append(
            VerdictRecord(
                candidate_sha=SEED,
                verdict="promoted",
                stage="sweep",
                reason="seed",
                objective=1.0,
                details={},
            )
        )
        for idea in ("fuse", "pack"):
            registered = IdeaRegistered(
                idea_id=idea,
                text=idea,
                source="library",
                quality=0.5,
                uncertainty=0.5,
                targets={},
                devices=["cpu"],
            )
            ledger.append(registered.to_event(EventKind.IDEA_REGISTERED))
        for step, outcome in enumerate(outcomes, 1):
            failed = ExpansionFailed(
                step=step,
                parent_sha=SEED,
                idea_id="fuse",
                outcome=outcome.value,
                message="why",
                infrastructure=outcome.infrastructure,
            )
            ledger.append_many(
                [
                    started(step).to_event(EventKind.STEP_STARTED),
                    failed.to_event(EventKind.EXPANSION_FAILED),
                ]
            )
        return derive_state(ledger)


@pytest.mark.parametrize(
    "outcome",
    [
        ExpansionOutcome.PROVIDER_ERROR,
        ExpansionOutcome.MALFORMED_REPLIES,
        ExpansionOutcome.NO_CHANGE,
        ExpansionOutcome.INFRASTRUCTURE_ERROR,
    ],
)
def test_infrastructure_failures_are_not_scored(tmp_path: Path, outcome: ExpansionOutcome) -> None:
    state = _ledger(tmp_path, [outcome])
    assert state.ideas["fuse"].failures == 0
    assert [n.node_id for n in state.lineage()] == [SEED]
    assert state.steps[1].closed  # skipped: the next step draws afresh


def test_a_real_failure_is_scored_against_the_idea_and_the_clade(tmp_path: Path) -> None:
    # Can the check fail? The same ledger with an agent that tried and gave up.
    state = _ledger(tmp_path, [ExpansionOutcome.FAILED])
    assert state.ideas["fuse"].failures == 1
    leaves = [n for n in state.lineage() if n.node_id != SEED]
    assert [(n.parent_id, n.outcome.value) for n in leaves] == [(SEED, "failure")]


def test_a_parent_is_exhausted_once_every_idea_made_no_change(tmp_path: Path) -> None:
    state = _ledger(tmp_path, [ExpansionOutcome.NO_CHANGE])
    assert state.exhausted_parents("cpu") == set()  # 'pack' was never tried there
    state.no_change[SEED].add("pack")
    assert state.exhausted_parents("cpu") == {SEED}
    (seed,) = state.lineage(frozenset(state.exhausted_parents("cpu")))
    assert not seed.expandable


def _sweep(step: int, sha: str, taint: list[str]) -> EvaluationSummary:
    return EvaluationSummary(
        step=step,
        sha=sha,
        evaluation_id=f"{sha}:sweep",
        stage=Stage.SWEEP,
        outcome="passed",
        message="",
        wall_s=1.0,
        protocol="p",
        fingerprint_id=None,
        timer_resolution_ns=None,
        arms={},
        configs=[],
        aggregates=[],
        trial_seeds=[],
        taint=taint,
    )


def test_a_tainted_sweep_is_measured_again_and_its_verdict_never_scored(tmp_path: Path) -> None:
    child = "c" * 40
    state = _ledger(tmp_path, [])
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        ledger.append(started(1).to_event(EventKind.STEP_STARTED))
        ledger.append(child_record(child))
        ledger.append(_sweep(1, child, ["2 other processes used 1.8 CPU cores"]).to_event(EVAL))
        state = derive_state(ledger)
        step = state.steps[1]
        assert step.sweep is None and step.tainted_sweeps == 1 and not step.closed
        # Measured again, tainted again: the verdict closes the step, and is never scored.
        ledger.append(_sweep(1, child, ["thermal slowdown"]).to_event(EVAL))
        details = {"success": False, "taint": ["thermal slowdown"]}
        ledger.append(
            VerdictRecord(
                candidate_sha=child,
                verdict="inconclusive",
                stage="sweep",
                reason="tainted",
                objective=1.0,
                details=details,
            )
        )
        state = derive_state(ledger)
    assert state.steps[1].closed and state.steps[1].tainted_sweeps == 2
    assert state.ideas["fuse"].failures == 0 and state.candidates[child].tainted
    outcomes = {n.node_id: n.outcome.value for n in state.lineage()}
    assert outcomes[child] == "untried"


def test_a_provider_error_with_retries_left_keeps_the_step_open(tmp_path: Path) -> None:
    state = _ledger(tmp_path, [])
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        ledger.append(started(1).to_event(EventKind.STEP_STARTED))
        for retries_left in (1, 0):
            failed = ExpansionFailed(
                step=1,
                parent_sha=SEED,
                idea_id="fuse",
                outcome=ExpansionOutcome.PROVIDER_ERROR.value,
                message="503",
                infrastructure=True,
                retries_left=retries_left,
            )
            ledger.append(failed.to_event(EventKind.EXPANSION_FAILED))
            state = derive_state(ledger)
            assert state.steps[1].closed is (retries_left == 0)
    assert state.steps[1].expansion_attempts == 2 and state.ideas["fuse"].failures == 0


def _judged_child(tmp_path: Path, verdict: str, reject_reason: str) -> SearchState:
    """The seed's ledger plus one child of idea 'fuse' whose screen ended in `verdict`."""
    child = "e" * 40
    _ledger(tmp_path, [])
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        ledger.append(started(1).to_event(EventKind.STEP_STARTED))
        ledger.append(child_record(child))
        details = {"step": 1, "success": False, "reject_reason": reject_reason}
        ledger.append(
            VerdictRecord(
                candidate_sha=child,
                verdict=verdict,
                stage="screen",
                reason=f"screen: {reject_reason}: ...",
                objective=None,
                details=details,
            )
        )
        return derive_state(ledger)


def test_a_judge_that_ran_out_of_time_is_not_scored(tmp_path: Path) -> None:
    # product.md: timeouts never count as a node's or an idea's failure (the H200 charged an
    # idea with screens cut at 78 s while Triton still compiled its kernels).
    state = _judged_child(tmp_path, "failed_run", "timeout")
    child = state.candidates["e" * 40]
    assert child.timed_out and not child.expandable
    assert (state.ideas["fuse"].successes, state.ideas["fuse"].failures) == (0, 0)
    outcomes = {n.node_id: n.outcome.value for n in state.lineage()}
    assert outcomes == {SEED: "untried", child.sha: "untried"}
    assert state.steps[1].closed  # recorded apart: the step is over, the verdict stands


@pytest.mark.parametrize("reason", ["runtime_error", "compile_error"])
def test_a_candidate_that_crashed_is_scored(tmp_path: Path, reason: str) -> None:
    # Can the check fail? The same ledger with a judge that finished and found a crash.
    state = _judged_child(tmp_path, "failed_run", reason)
    assert not state.candidates["e" * 40].timed_out
    assert state.ideas["fuse"].failures == 1
    outcomes = {n.node_id: n.outcome.value for n in state.lineage()}
    assert outcomes["e" * 40] == "failure"
