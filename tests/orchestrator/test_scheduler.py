"""Steps in flight at once: a sweep whose frontier moved while it ran is measured again, the
pipeline's size, and --max-candidates counted with the expansions still running."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agents.expander import ExpansionOutcome, ExpansionResult
from orchestrator import service
from orchestrator.budget import Invocation, budget_stop
from orchestrator.events import EventKind, StepStarted
from orchestrator.loop import choose_step, current_state, ensure_seed
from orchestrator.measured import SweepJob, plan_sweep, record_sweep, run_plan
from orchestrator.scheduler import Dispatcher, unique_result
from orchestrator.stages import DeviceWorker, expand_step, static_step
from orchestrator.state import CandidateView, SearchState, StepView
from search import Verdict
from tests.orchestrator.conftest import ListReporter, fast_settings
from tests.orchestrator.test_verifier import promote_by_hand


@pytest.mark.slow
def test_a_sweep_whose_frontier_moved_is_kept_without_a_verdict_and_measured_again(
    tmp_path: Path,
) -> None:
    reporter = ListReporter()
    ctx = service.prepare_run(fast_settings(tmp_path / "run", devices="0,1"), reporter).ctx
    state = ensure_seed(ctx, current_state(ctx))
    started = choose_step(ctx, state)
    ctx.ledger.append(started.to_event(EventKind.STEP_STARTED))
    expand_step(ctx, current_state(ctx), current_state(ctx).steps[1])
    static_step(ctx, current_state(ctx), current_state(ctx).steps[1])
    step = current_state(ctx).steps[1]
    assert step.sha is not None and step.static is not None and step.static.passed
    device = ctx.on_worker(ctx.workers[1])
    sweep = SweepJob(1, step.sha, step.started.parent_sha)
    plan = plan_sweep(device, current_state(ctx), sweep)
    result = run_plan(device, plan)
    # Meanwhile another device promotes: the frontier this sweep measured against is gone.
    moved, _ = promote_by_hand(ctx, ("# --- end ratchet", "# moved\n# --- end ratchet"), 2)
    assert record_sweep(device, current_state(ctx), sweep, plan, result) is None
    state = current_state(ctx)
    view = state.steps[1]
    assert view.sweep is None and view.superseded_sweeps == 1 and not view.closed
    assert state.candidates[step.sha].verdict is None
    assert any("while it ran" in line for line in reporter.lines)
    again = plan_sweep(device, state, sweep)
    assert again.job.attempt == 1 and again.frontier_sha == moved
    assert moved in again.job.arms.values()
    verdict = record_sweep(device, current_state(ctx), sweep, again, run_plan(device, again))
    assert verdict in set(Verdict)  # judged this time, against the frontier of now
    assert current_state(ctx).steps[1].closed
    ctx.ledger.close()


@pytest.mark.slow
def test_a_dispatch_for_one_step_leaves_every_other_open_step_waiting(tmp_path: Path) -> None:
    # The closing composition runs its own step only: a step an LLM budget left open stays
    # open for a resumed run instead of spending what is no longer there.
    ctx = service.prepare_run(fast_settings(tmp_path / "run"), ListReporter()).ctx
    state = ensure_seed(ctx, current_state(ctx))
    for _ in range(2):
        ctx.ledger.append(choose_step(ctx, current_state(ctx)).to_event(EventKind.STEP_STARTED))
    dispatcher = Dispatcher(ctx, [DeviceWorker(ctx.judging, 0.01)])
    assert not dispatcher.dispatch(current_state(ctx), only=2)
    assert set(dispatcher.running) == {2}
    while dispatcher.running:
        dispatcher.collect(lambda: current_state(ctx))
    state = current_state(ctx)
    assert state.steps[2].sha is not None and state.steps[1].sha is None
    assert [s.started.step for s in state.open_steps] == [1, 2]  # 2 waits for its checks
    ctx.ledger.close()


def _state_with_open_steps(expanding: int, candidates: int) -> SearchState:
    state = SearchState()
    for number in range(1, expanding + 1):
        started = StepStarted(
            step=number,
            parent_sha="p",
            idea_id="i",
            parent_theta=0.5,
            idea_theta=0.5,
            idea_forced=False,
            parent_forced=False,
        )
        state.steps[number] = StepView(started=started)
    for index in range(candidates):
        sha = f"c{index}"
        state.candidates[sha] = CandidateView(
            sha=sha, tree_sha="t", parent_sha="p", step=index, idea_id="i", agent="a", message=""
        )
    return state


def test_expansions_in_flight_count_toward_max_candidates() -> None:
    invocation = Invocation(
        started_at=time.monotonic(), first_step=1, start_seq=0, earlier_s=0.0, earlier_count=0
    )
    assert budget_stop(invocation, _state_with_open_steps(0, 3), 1e9, 5) is None
    assert budget_stop(invocation, _state_with_open_steps(2, 3), 1e9, 5) == "reached 5 candidates"


def test_the_pipeline_is_one_step_for_one_device_and_one_expander(tmp_path: Path) -> None:
    class Ctx:
        def __init__(self, expanders: int) -> None:
            self.settings = fast_settings(tmp_path / "r", expanders=expanders)

    worker = DeviceWorker(judging=None, noise_floor=0.01)  # type: ignore[arg-type]
    assert Dispatcher(Ctx(1), [worker]).capacity == 1  # type: ignore[arg-type]
    assert Dispatcher(Ctx(2), [worker]).capacity == 3  # type: ignore[arg-type]
    assert Dispatcher(Ctx(2), [worker, worker]).capacity == 4  # type: ignore[arg-type]


def test_an_expansion_that_made_what_another_recorded_made_nothing_new() -> None:
    state = _state_with_open_steps(0, 2)  # candidates c0 (tree t) and c1 (tree t)
    made = ExpansionResult(
        outcome=ExpansionOutcome.COMMITTED, agent="offline", sha="x", tree_sha="t"
    )
    same = unique_result(state, made)
    assert same.outcome is ExpansionOutcome.NO_CHANGE and same.sha is None
    assert "same code as step 0" in same.message
    fresh = made.model_copy(update={"tree_sha": "new"})
    assert unique_result(state, fresh) is fresh
