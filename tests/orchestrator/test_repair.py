"""Which candidates the repair step may start from, read from a search state."""

from __future__ import annotations

from harness.models import Outcome
from orchestrator.events import Stage
from orchestrator.idea_arms import unmeasured_ideas
from orchestrator.repair import missed_candidates, repairs_started
from orchestrator.state import CandidateView, SearchState, StepView
from search import Verdict
from tests.orchestrator.conftest import config_digest, evaluation_summary, step_started


def _step(
    state: SearchState, number: int, parent: str, idea: str = "i", **extra: object
) -> StepView:
    state.steps[number] = StepView(started=step_started(number, parent, idea, **extra))
    return state.steps[number]


def _candidate(
    state: SearchState, sha: str, parent: str | None, step: int, verdict: Verdict
) -> CandidateView:
    cand = CandidateView(
        sha=sha, tree_sha=sha, parent_sha=parent, step=step, idea_id="i", agent="a", message=""
    )
    cand.verdict, cand.verdict_stage = verdict, Stage.SWEEP
    state.candidates[sha] = cand
    return cand


def _failed(state: SearchState, sha: str, parent: str, step: int, share: float) -> None:
    view = _step(state, step, parent)
    _candidate(state, sha, parent, step, Verdict.FAILED_CORRECTNESS)
    configs = [config_digest("6", False, tolerance_used=share), config_digest("1")]
    view.sweep = evaluation_summary(step, sha, Stage.SWEEP, configs)


def _run() -> SearchState:
    """seed <- fused (promoted at step 1, later demoted) <- child (step 2, failed where it
    ran fused's code); seed <- narrow (step 3) and wide (step 4) misses of their own."""
    state = SearchState()
    _candidate(state, "seed", None, 0, Verdict.PROMOTED)
    _step(state, 1, "seed")
    _candidate(state, "fused", "seed", 1, Verdict.PROMOTED)
    _failed(state, "child", "fused", 2, 1.4)
    state.demoted.add("fused")
    state.inherited_failures.add("child")
    state.inherited_misses["fused"] = (2, {"6": 1.4})
    _failed(state, "narrow", "seed", 3, 1.2)
    _failed(state, "wide", "seed", 4, 300.0)
    return state


def test_own_misses_and_demoted_frontiers_are_candidates_for_repair() -> None:
    found = {m.sha: (m.step, dict(m.failed_shares)) for m in missed_candidates(_run())}
    # The child failed as its parent does: the parent is the one to repair, at the child's
    # step, with the child's shares on the configs where it ran the parent's code.
    assert found == {"fused": (2, {"6": 1.4}), "narrow": (3, {"6": 1.2}), "wide": (4, {"6": 300.0})}


def test_no_repair_from_a_composition_or_under_a_parent_that_does_not_stand() -> None:
    state = _run()
    state.steps[3].started = state.steps[3].started.model_copy(update={"composition": {}})
    state.demoted.add("seed")  # every remaining miss hangs from the seed
    assert missed_candidates(state) == []


def test_a_repair_step_marks_its_miss_repaired() -> None:
    state = _run()
    _step(state, 5, "seed", repair_of="narrow")
    assert repairs_started(state) == frozenset({"narrow"})


def test_failed_shares_read_a_demoted_frontier_from_its_childs_miss() -> None:
    state = _run()
    assert state.failed_shares("narrow") == {"6": 1.2}
    assert state.failed_shares("fused") == {"6": 1.4}  # its child's, where it ran fused's code
    assert state.failed_shares("seed") == {}  # no step of its own was judged failing


def test_a_repairs_own_miss_is_not_repaired_again() -> None:
    state = _run()
    _step(state, 5, "seed", repair_of="narrow")
    _candidate(state, "fix", "seed", 5, Verdict.FAILED_CORRECTNESS)
    state.steps[5].sweep = evaluation_summary(
        5, "fix", Stage.SWEEP, [config_digest("6", False, tolerance_used=1.1)]
    )
    assert "fix" not in {m.sha for m in missed_candidates(state)}
    # The same miss from an ordinary expansion is one to repair: the rule reads the step.
    state.steps[5].started = state.steps[5].started.model_copy(update={"repair_of": None})
    assert "fix" in {m.sha for m in missed_candidates(state)}


def test_ideas_whose_screens_were_cut_are_unmeasured() -> None:
    state = _run()
    _step(state, 5, "seed", "slow-idea")
    cut = _candidate(state, "cut", "seed", 5, Verdict.FAILED_RUN)
    assert unmeasured_ideas(state) == frozenset()  # a failed run is not a cut screen
    cut.details["reject_reason"] = Outcome.TIMEOUT.value
    assert unmeasured_ideas(state) == frozenset({"slow-idea"})
