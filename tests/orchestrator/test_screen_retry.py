"""A screen cut at its time limit runs again before the candidate is judged failed_run (a
real softmax run, real git, the real judge for the screen that runs; the cut judge is the
runner's TIMEOUT result, as it reports one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.tunables import read_tunables
from harness.models import EvaluationResult, Outcome
from orchestrator import service
from orchestrator.events import EventKind
from orchestrator.idea_arms import ideas_for_parent
from orchestrator.loop import choose_step, current_state, ensure_seed
from orchestrator.measured import StagePlan, plan_screen, record_screen, run_plan
from orchestrator.stages import LoopContext, expand_step, operator_constraints, static_step
from orchestrator.workspace import read_file
from search import Verdict
from tests.orchestrator.conftest import ListReporter, fast_settings

pytestmark = pytest.mark.slow


def _cut(plan: StagePlan) -> EvaluationResult:
    """What the runner returns for a judge it killed at the screen's limit."""
    return EvaluationResult(
        evaluation_id=plan.request.evaluation_id,
        nonce="",
        outcome=Outcome.TIMEOUT,
        message="judge exceeded 60 s (its own time limit) and was killed with its processes",
        wall_s=60.0,
    )


def _screened_step(tmp_path: Path, **overrides: object) -> tuple[LoopContext, ListReporter]:
    reporter = ListReporter()
    ctx = service.prepare_run(fast_settings(tmp_path / "run", **overrides), reporter).ctx
    state = ensure_seed(ctx, current_state(ctx))
    ctx.ledger.append(choose_step(ctx, state).to_event(EventKind.STEP_STARTED))
    expand_step(ctx, current_state(ctx), current_state(ctx).steps[1])
    static_step(ctx, current_state(ctx), current_state(ctx).steps[1])
    return ctx, reporter


def test_a_cut_screen_runs_again_in_its_own_directory_and_is_judged_then(
    tmp_path: Path,
) -> None:
    ctx, reporter = _screened_step(tmp_path)
    first = plan_screen(ctx, current_state(ctx), current_state(ctx).steps[1])
    record_screen(ctx, first, _cut(first))
    step = current_state(ctx).steps[1]
    assert step.verdict is None and not step.closed and step.screen is None
    assert step.timed_out_screens == 1
    assert any("screened again" in line for line in reporter.lines)
    again = plan_screen(ctx, current_state(ctx), step)
    assert again.job.attempt == 1 and again.work != first.work
    assert again.request.evaluation_id != first.request.evaluation_id
    record_screen(ctx, again, run_plan(ctx, again))  # the real judge, this time to the end
    step = current_state(ctx).steps[1]
    assert step.screen is not None and step.screen.outcome != Outcome.TIMEOUT.value
    ctx.ledger.close()


def test_a_screen_cut_again_fails_to_run_and_teaches_nothing(tmp_path: Path) -> None:
    ctx, _ = _screened_step(tmp_path)
    idea = current_state(ctx).steps[1].started.idea_id
    failures = current_state(ctx).ideas[idea].failures
    for _ in range(2):
        plan = plan_screen(ctx, current_state(ctx), current_state(ctx).steps[1])
        record_screen(ctx, plan, _cut(plan))
    state = current_state(ctx)
    step = state.steps[1]
    assert step.verdict is Verdict.FAILED_RUN and step.closed and step.timed_out_screens == 2
    assert step.sha is not None and state.candidates[step.sha].timed_out
    assert state.ideas[idea].failures == failures  # an infrastructure outcome: not scored
    # Nor drawn again in this run: its next screen would be cut the same way.
    parent = str(state.frontier_sha)
    assert idea not in {a.idea_id for a in ideas_for_parent(ctx, state, parent)}
    assert idea in {a.idea_id for a in state.idea_arms(ctx.device)}  # still registered
    # What the cut child moved is asked of no later expansion (the operator's own mutations
    # of other ideas included); the user's constraints still come first.
    child = read_tunables(read_file(ctx.repo, step.sha, ctx.workload.candidate_file))
    seed = read_tunables(read_file(ctx.repo, parent, ctx.workload.candidate_file))
    moved = {f"forbid {k}={v}" for k, v in child.items() if seed.get(k) != v}
    constraints = operator_constraints(ctx, state)
    assert moved and moved <= set(constraints)
    assert constraints[: len(state.constraints)] == state.constraints
    ctx.ledger.close()


def test_no_retries_means_the_first_cut_is_final(tmp_path: Path) -> None:
    ctx, _ = _screened_step(tmp_path, screen_timeout_retries=0)
    plan = plan_screen(ctx, current_state(ctx), current_state(ctx).steps[1])
    record_screen(ctx, plan, _cut(plan))
    assert current_state(ctx).steps[1].verdict is Verdict.FAILED_RUN
    ctx.ledger.close()
