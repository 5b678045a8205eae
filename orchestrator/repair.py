"""The repair step: a candidate that missed the tolerance narrowly, given a headroom idea."""

from __future__ import annotations

import numpy as np

from orchestrator.events import StepStarted
from orchestrator.idea_arms import open_arms, unmeasured_ideas, untried_arms
from orchestrator.stages import LoopContext
from orchestrator.state import CandidateView, SearchState
from search import (
    IdeaArm,
    MissedCandidate,
    PriorStrength,
    RepairSettings,
    Verdict,
    choose_idea,
    choose_repair,
)


def missed_candidates(state: SearchState) -> list[MissedCandidate]:
    """Expansions that failed the correctness gate on their own (not their parent's failure
    on the same inputs), and frontiers demoted for failing a child's inputs (the child's
    shares there, where it ran their code), each from a parent still standing."""
    missed = []
    for cand in state.candidates.values():
        if not _repairable(state, cand):
            continue
        shares = state.failed_shares(cand.sha)
        if cand.sha in state.inherited_misses and cand.sha in state.demoted:
            when = state.inherited_misses[cand.sha][0]  # its failure came to light there
            missed.append(MissedCandidate(sha=cand.sha, step=when, failed_shares=shares))
        elif cand.verdict is Verdict.FAILED_CORRECTNESS and shares:
            missed.append(MissedCandidate(sha=cand.sha, step=cand.step, failed_shares=shares))
    return missed


def _repairable(state: SearchState, cand: CandidateView) -> bool:
    """An expansion (not a composition, a repair, nor the seed), not failing only as its
    parent does, whose parent is measured and still standing. A repair's own miss is not
    repaired again: a repair is one speculative step, never a chain (runs 13 and 14 on the
    H200 each spent a step repairing a repair that had failed on another config)."""
    step = state.steps.get(cand.step)
    parent = state.candidates.get(cand.parent_sha or "")
    return (
        step is not None
        and step.started.composition is None
        and step.started.repair_of is None
        and cand.sha not in state.inherited_failures
        and parent is not None
        and parent.expandable
        and parent.sha not in state.demoted
    )


def repairs_started(state: SearchState) -> frozenset[str]:
    """The candidates a repair step has already started from."""
    return frozenset(s.started.repair_of for s in state.steps.values() if s.started.repair_of)


def repair_start(ctx: LoopContext, state: SearchState) -> StepStarted | None:
    """A repair step when one is due: the newest narrow miss not repaired yet on which a
    headroom idea still changes something, its idea drawn by the idea sampler among those;
    None when repairs are off or nothing is due."""
    if not ctx.settings.repair_narrow_misses:
        return None
    rule = RepairSettings(margin=ctx.settings.repair_margin)
    unmeasured = unmeasured_ideas(state)
    headroom = [
        a
        for a in state.idea_arms(ctx.device)
        if state.ideas[a.idea_id].headroom and a.idea_id not in unmeasured
    ]
    done = set(repairs_started(state))
    while headroom:
        miss = choose_repair(missed_candidates(state), frozenset(done), rule)
        if miss is None:
            return None
        done.add(miss.sha)
        # Only ideas that act in the code that ran the failing configs can give them room
        # (run 13: normalized-softmax, fused-only, was drawn for a miss on the torch path).
        failed = set(miss.failed_shares)
        arms = open_arms(ctx, state, miss.sha, untried_arms(state, miss.sha, headroom), failed)
        if arms:
            return _started(ctx, state, state.candidates[miss.sha], arms)
    return None


def _started(
    ctx: LoopContext, state: SearchState, miss: CandidateView, arms: list[IdeaArm]
) -> StepStarted:
    number = state.next_step
    rng = np.random.default_rng([ctx.settings.seed, number])
    strength = PriorStrength(k_min=ctx.settings.k_min, k_max=ctx.settings.k_max)
    idea = choose_idea(arms, strength, rng)
    assert miss.parent_sha is not None  # missed_candidates keeps children only
    return StepStarted(
        step=number,
        parent_sha=miss.parent_sha,
        idea_id=idea.idea_id,
        parent_theta=None,
        idea_theta=idea.theta,
        idea_forced=idea.forced,
        parent_forced=False,
        repair_of=miss.sha,
    )
