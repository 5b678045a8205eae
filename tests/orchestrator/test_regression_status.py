"""A candidate's standing on the inputs that demoted earlier frontiers (pure: a state by hand)."""

from __future__ import annotations

from kernels.workload import TrialSpec
from orchestrator.inherited import RegressionStatus, regression_status
from orchestrator.state import CHECK_ATTEMPTS, SearchState

INPUTS = TrialSpec(seed=4321, padding_ratio=0.25, input_scale=0.5)


def _state() -> SearchState:
    """Frontier 'old' demoted at step 5's check on config 6: 'new' stands."""
    state = SearchState()
    state.demotion_inputs = {5: ("old", ["6"], [INPUTS])}
    return state


def test_a_standing_frontier_is_not_judged_until_its_recheck_ran() -> None:
    state = _state()
    assert regression_status(state, "new") is RegressionStatus.NOT_JUDGED
    state.rechecked = {"new": {5}}
    assert regression_status(state, "new") is RegressionStatus.PASSED


def test_the_demoted_frontier_failed_and_a_run_without_demotions_records_none() -> None:
    state = _state()
    state.inherited_misses = {"old": (5, {"6": 1.06})}
    assert regression_status(state, "old") is RegressionStatus.FAILED
    assert regression_status(SearchState(), "new") is RegressionStatus.NONE_RECORDED


def test_checks_the_judge_never_answered_leave_it_unanswered() -> None:
    state = _state()
    state.rechecked = {"new": {5}}
    state.unanswered_checks = {("new", (5,)): CHECK_ATTEMPTS - 1}
    assert regression_status(state, "new") is RegressionStatus.PASSED  # answered on a retry
    state.unanswered_checks = {("new", (5,)): CHECK_ATTEMPTS}
    assert regression_status(state, "new") is RegressionStatus.UNANSWERED
