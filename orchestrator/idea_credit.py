"""Credit for the ideas whose candidates a promoted composition put to work."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # state.py calls in here while it derives the state
    from orchestrator.state import SearchState

# A DispatchPlan names a regime of a composed candidate as "<sha>#<regime>".
REGIME_SEPARATOR = "#"


def credit_composed_parts(state: SearchState) -> None:
    """An idea whose candidate lost or failed as a whole, but which a promoted composition
    serves some sizes with, made the frontier faster: that candidate's failure counts as a
    success of its idea, once per candidate. (Run 9 on the H200: fused-schedule's candidates
    failed one config each and were composed into every later frontier, yet the idea stood
    at 0 successes in 3 trials.) The incumbent, the seed and tainted candidates earn nothing."""
    credited: set[str] = set()
    for step in state.steps.values():
        plan = step.started.composition
        composed = state.candidates.get(step.sha or "")
        if not plan or composed is None or not composed.success:
            continue
        for variant in list(plan.get("variants", []))[1:]:  # the incumbent comes first
            sha = str(variant).split(REGIME_SEPARATOR, 1)[0]
            part = state.candidates.get(sha)
            if part is None or sha in credited or part.success or part.tainted:
                continue
            idea = state.ideas.get(part.idea_id or "")
            if idea is None or part.parent_sha is None or idea.failures < 1:
                continue
            idea.failures -= 1
            idea.successes += 1
            credited.add(sha)
