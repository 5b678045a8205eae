"""Which gains on the frontier's lineage the search discovered and which were enabled by hand."""

from __future__ import annotations

import enum

from pydantic import BaseModel, Field

from orchestrator.state import CandidateView, SearchState

OFFLINE_AGENT = "offline"
COMPOSER_AGENT = "composer"


class GainOrigin(enum.StrEnum):
    """Where a step's change came from."""

    SEARCH_CODE = "search_code"  # an agent the search ran wrote the code
    SEARCH_SWITCH = "search_switch"  # the search turned on a code path written by hand
    SEARCH_COMPOSITION = "search_composition"  # the search dispatched to winners it measured
    HAND = "hand"  # a person chose it: a human IDEA, or a forced parent or idea


class FrontierGain(BaseModel):
    """One step on the path from the seed to the frontier."""

    step: int = Field(description="Step that made the candidate.")
    sha: str = Field(description="The candidate's commit.")
    idea_id: str | None = Field(description="Idea it implemented.")
    idea_source: str | None = Field(description="'library', 'human' or an agent's proposal.")
    agent: str = Field(description="Agent that wrote the candidate ('offline': tunables only).")
    objective: float | None = Field(description="Its objective (higher is faster).")
    gain: float | None = Field(
        description="Paired speedup over its parent from its sweep (None: unmeasured)."
    )
    origin: GainOrigin = Field(description="Discovered by the search, or enabled by hand.")
    note: str = Field(description="Why this origin, in words.")
    scope: list[str] | None = Field(
        default=None,
        description="The configs its verdict read when its code differed from the frontier's "
        "only there (None: all of them).",
    )
    scoped_gain: float | None = Field(
        default=None, description="Its paired speedup over the frontier on that scope."
    )


def _origin(state: SearchState, cand: CandidateView) -> tuple[GainOrigin, str]:
    step = state.steps.get(cand.step)
    idea = state.ideas.get(cand.idea_id or "")
    if idea is not None and idea.source == "human":
        return GainOrigin.HAND, f"a human IDEA by {idea.author}"
    if step is not None and (step.started.parent_forced or step.started.idea_forced):
        return GainOrigin.HAND, "a REDIRECT or a must-try idea forced this step"
    if cand.agent == COMPOSER_AGENT:
        return (
            GainOrigin.SEARCH_COMPOSITION,
            "the search composed variants it had measured, each serving the sizes where this "
            "run measured it fastest",
        )
    if cand.agent == OFFLINE_AGENT:
        return (
            GainOrigin.SEARCH_SWITCH,
            "the search chose the setting; the code behind the switch was in the seed, "
            "written by hand",
        )
    return GainOrigin.SEARCH_CODE, f"code written by the agent {cand.agent}"


def _gain_over_parent(state: SearchState, cand: CandidateView) -> float | None:
    """The sweep's paired ratio to the parent; objectives from two sweeps only where none
    exists (each sweep times its own baseline, so their quotient is no paired measurement)."""
    paired = cand.details.get("vs_parent")
    if isinstance(paired, dict) and isinstance(paired.get("median"), int | float):
        return float(paired["median"])
    parent = state.candidates.get(cand.parent_sha or "")
    base = parent.objective if parent is not None else None
    return cand.objective / base if cand.objective is not None and base else None


def frontier_gains(state: SearchState) -> list[FrontierGain]:
    """The declared lineage from the seed to the frontier, each step with its origin."""
    path = [state.candidates[sha] for sha in state.ancestry(state.frontier_sha)]
    gains = []
    for cand in reversed(path):
        if cand.parent_sha is None:
            continue  # the seed: the starting point, not a gain
        gain = _gain_over_parent(state, cand)
        origin, note = _origin(state, cand)
        idea = state.ideas.get(cand.idea_id or "")
        gains.append(
            FrontierGain(
                step=cand.step,
                sha=cand.sha,
                idea_id=cand.idea_id,
                idea_source=idea.source if idea else None,
                agent=cand.agent,
                objective=cand.objective,
                gain=gain,
                origin=origin,
                note=note,
                **_scoped(cand),
            )
        )
    return gains


def _scoped(cand: CandidateView) -> dict[str, object]:
    """The scope its verdict read and its gain there (nothing when unscoped)."""
    scope, ratio = cand.details.get("scope"), cand.details.get("scope_vs_frontier")
    ratio = ratio or cand.details.get("scope_vs_parent")
    if not isinstance(scope, list) or not isinstance(ratio, dict):
        return {}
    return {"scope": [str(c) for c in scope], "scoped_gain": float(ratio["median"])}


def format_gains(gains: list[FrontierGain]) -> list[str]:
    """Lines for `status` and the end of a run."""
    if not gains:
        return ["gains: none yet (the frontier is the seed)"]
    lines = ["gains on the frontier's lineage (discovered by the search, or enabled by hand):"]
    for g in gains:
        gain = f"{g.gain:.3f}x" if g.gain is not None else "-"
        where = ""
        if g.scope is not None and g.scoped_gain is not None:
            where = f", {g.scoped_gain:.3f}x on configs {', '.join(g.scope)} (all it changed)"
        lines.append(
            f"  step {g.step:>3} {g.sha[:10]} {gain:>8} idea {g.idea_id}: {g.origin.value} "
            f"({g.note}{where})"
        )
    return lines
