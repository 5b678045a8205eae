"""A screen cut at its time limit runs again before the candidate is judged failed_run (a
real softmax run, real git, the real judge for the screen that runs; the cut judge is the
runner's TIMEOUT result, as it reports one)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agents.tunables import read_tunables
from harness.models import PROGRESS_PREFIX, EvaluationResult, Outcome
from orchestrator import service
from orchestrator.events import EventKind
from orchestrator.idea_arms import ideas_for_parent
from orchestrator.judge_watch import last_progress
from orchestrator.loop import choose_step, current_state, ensure_seed
from orchestrator.measured import (
    StagePlan,
    plan_screen,
    record_screen,
    retry_can_finish,
    run_plan,
)
from orchestrator.stages import LoopContext, expand_step, operator_constraints, static_step
from orchestrator.status import build_status, format_status
from orchestrator.workspace import read_file
from search import Verdict
from tests.orchestrator.conftest import ListReporter, fast_settings

pytestmark = pytest.mark.slow


def _cut(plan: StagePlan, tail: str = "") -> EvaluationResult:
    """What the runner returns for a judge it killed at the screen's limit (tail: the
    judge's log tail the runner appends)."""
    return EvaluationResult(
        evaluation_id=plan.request.evaluation_id,
        nonce="",
        outcome=Outcome.TIMEOUT,
        message="judge exceeded 60 s (its own time limit) and was killed with its processes"
        + (f"; log tail:\n{tail}" if tail else ""),
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
    # ratchet status says so.
    report = build_status(ctx.paths.root, ctx.ledger)
    assert set(report.left_alone) == set(constraints) - set(state.constraints)
    assert "left alone (candidates changing them were cut twice)" in format_status(report)
    ctx.ledger.close()


def test_no_retries_means_the_first_cut_is_final(tmp_path: Path) -> None:
    ctx, _ = _screened_step(tmp_path, screen_timeout_retries=0)
    plan = plan_screen(ctx, current_state(ctx), current_state(ctx).steps[1])
    record_screen(ctx, plan, _cut(plan))
    assert current_state(ctx).steps[1].verdict is Verdict.FAILED_RUN
    ctx.ledger.close()


def test_a_screen_cut_early_in_its_configs_is_not_screened_again(tmp_path: Path) -> None:
    ctx, reporter = _screened_step(tmp_path)
    plan = plan_screen(ctx, current_state(ctx), current_state(ctx).steps[1])
    # The softmax workload screens one config; a screen of all of them has a pace to read.
    configs = list(ctx.config_set.config_ids)
    assert len(configs) >= 2, configs
    plan = replace(plan, job=replace(plan.job, config_ids=configs))
    # Cut while building the first config: the rest cannot fit in the same limit.
    tail = f"{PROGRESS_PREFIX}config {configs[0]}: correctness"
    record_screen(ctx, plan, _cut(plan, tail))
    step = current_state(ctx).steps[1]
    assert step.verdict is Verdict.FAILED_RUN and step.timed_out_screens == 1
    assert any("not screened again" in line for line in reporter.lines)
    ctx.ledger.close()


def test_retry_reads_the_cut_judges_pace() -> None:
    five = ["2", "1", "7", "8", "13"]

    def cut(tail: str) -> EvaluationResult:
        return EvaluationResult(
            evaluation_id="e", nonce="", outcome=Outcome.TIMEOUT, message=f"cut; log tail:\n{tail}"
        )

    line = PROGRESS_PREFIX + "config {}: {}"
    # Run 14 on the H200: cut building the 2nd of 5, cut again on the retry; run 16: cut in
    # the 5th, finished on the retry.
    assert not retry_can_finish(five, cut(line.format("1", "correctness")))
    assert retry_can_finish(five, cut(line.format("8", "correctness")))
    assert retry_can_finish(five, cut(line.format("13", "correctness")))
    assert retry_can_finish(five, cut(line.format("2", "timing")))  # every build done
    assert retry_can_finish(five, cut("no judge line"))  # unknown: retried as before
    assert retry_can_finish(["8"], cut(line.format("8", "correctness")))  # half of one
    two = line.format("2", "correctness") + "\n" + line.format("1", "correctness")
    assert last_progress(two) == ("1", "correctness")
