"""A promoted composition credits the ideas whose candidates it serves sizes with."""

from __future__ import annotations

from pathlib import Path

from ledger import CandidateRecord, Ledger, Record, VerdictRecord
from orchestrator.events import EventKind, IdeaRegistered, StepStarted
from orchestrator.state import SearchState, derive_state

SEED, FUSED, PACKED, COMPOSED = "a" * 40, "b" * 40, "c" * 40, "d" * 40


def candidate(sha: str, parent: str | None, step: int, idea: str | None) -> CandidateRecord:
    return CandidateRecord(
        sha=sha,
        tree_sha=sha[::-1],
        parent_sha=parent,
        step=step,
        idea_id=idea,
        agent="offline",
        message=idea or "seed",
        prompt_hash=None,
        cost={},
    )


def verdict(sha: str, name: str, success: bool, step: int) -> VerdictRecord:
    return VerdictRecord(
        candidate_sha=sha,
        verdict=name,
        stage="sweep",
        reason=name,
        objective=1.0,
        details={"step": step, "success": success},
    )


def started(step: int, idea: str, composition: dict[str, object] | None = None) -> Record:
    return StepStarted(
        step=step,
        parent_sha=SEED,
        idea_id=idea,
        parent_theta=0.5,
        idea_theta=0.5,
        idea_forced=False,
        parent_forced=False,
        composition=composition,
    ).to_event(EventKind.STEP_STARTED)


def derive(tmp_path: Path, composed_verdict: str) -> SearchState:
    records: list[Record] = [
        IdeaRegistered(
            idea_id=idea,
            text=idea,
            source="library",
            quality=0.5,
            uncertainty=0.5,
            targets={},
            devices=["cpu"],
        ).to_event(EventKind.IDEA_REGISTERED)
        for idea in ("fused-schedule", "packed-qkv", "compose-regimes")
    ]
    records += [candidate(SEED, None, 0, None), verdict(SEED, "promoted", False, 0)]
    records += [started(1, "fused-schedule"), candidate(FUSED, SEED, 1, "fused-schedule")]
    records += [verdict(FUSED, "failed_correctness", False, 1)]  # failed one config
    records += [started(2, "packed-qkv"), candidate(PACKED, SEED, 2, "packed-qkv")]
    records += [verdict(PACKED, "rejected", False, 2)]
    plan: dict[str, object] = {"variants": [SEED, f"{FUSED}#r1", FUSED], "assignment": {}}
    records += [started(3, "compose-regimes", plan)]
    records += [candidate(COMPOSED, SEED, 3, "compose-regimes")]
    success = composed_verdict == "promoted"
    records += [verdict(COMPOSED, composed_verdict, success, 3)]
    with Ledger.open_path(tmp_path / f"{composed_verdict}.sqlite") as ledger:
        ledger.append_many(records)
        return derive_state(ledger)


def counts(state: SearchState, idea: str) -> tuple[int, int]:
    return state.ideas[idea].successes, state.ideas[idea].failures


def test_a_promoted_composition_turns_its_parts_failure_into_a_success(tmp_path: Path) -> None:
    state = derive(tmp_path, "promoted")
    assert counts(state, "fused-schedule") == (1, 0)  # named twice in the plan, credited once
    assert counts(state, "packed-qkv") == (0, 1)  # not composed: its failure stands
    assert counts(state, "compose-regimes") == (1, 0)


def test_a_composition_that_was_not_promoted_credits_nothing(tmp_path: Path) -> None:
    state = derive(tmp_path, "rejected")
    assert counts(state, "fused-schedule") == (0, 1)
    assert counts(state, "compose-regimes") == (0, 1)
