"""The search loop: choose parent and idea, run the pipeline, repeat until a budget ends."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agents.expander import ExpansionOutcome
from agents.llm.session import BudgetExhaustedError
from orchestrator.agent_runs import drain_llm_calls, research_due, run_inspector, run_researcher
from orchestrator.budget import Invocation, begin_invocation, budget_stop
from orchestrator.composition import composition_plan, composition_step
from orchestrator.events import EventKind, RunStopped, StepStarted
from orchestrator.feasibility import check_feasibility, feasibility_due
from orchestrator.idea_arms import ideas_for_parent
from orchestrator.inherited import (
    check_inherited,
    frontier_recheck_due,
    inherited_check_due,
    recheck_frontier,
)
from orchestrator.measured import SweepJob, sweep_step
from orchestrator.repair import repair_start
from orchestrator.repeats import repeated_failure_stop
from orchestrator.scheduler import Dispatcher
from orchestrator.settings import VerificationMode
from orchestrator.stages import DeviceWorker, LoopContext
from orchestrator.state import SearchState, derive_state, infrastructure_failure
from orchestrator.taint import TaintSummary, taint_summary
from orchestrator.verification import verify_frontier
from search import PriorStrength, SpeedBand, Verdict, choose_idea, choose_parent


class SeedFailedError(RuntimeError):
    """The seed candidate did not pass the judge: nothing can be searched from it."""


@dataclass
class StopSignal:
    """Set by a signal handler; the loop stops between stages."""

    requested: bool = False


@dataclass
class RunSummary:
    """How an invocation ended."""

    reason: str
    steps: int
    elapsed_s: float
    state: SearchState = field(repr=False)
    taint: TaintSummary | None = None  # the full sweeps of this invocation


def _human_prior(ctx: LoopContext) -> tuple[float, float]:
    return (ctx.settings.human_idea_quality, ctx.settings.human_idea_uncertainty)


def current_state(ctx: LoopContext) -> SearchState:
    """The search state as the ledger says it is now (new messages included)."""
    return derive_state(ctx.ledger, _human_prior(ctx))


def on_first_device(ctx: LoopContext) -> LoopContext:
    """The context of the run's first device, for work outside the dispatcher (the seed's
    sweep, a separate verification, feasibility): its judging and its own noise floor."""
    return ctx.on_worker(ctx.workers[0]) if ctx.workers else ctx


def ensure_seed(ctx: LoopContext, state: SearchState) -> SearchState:
    """Judge the seed once (static checks and full sweep): it becomes the first frontier."""
    assert state.seed_sha is not None
    seed = state.candidates[state.seed_sha]
    if seed.verdict is not None:
        if seed.verdict is not Verdict.PROMOTED:
            raise SeedFailedError(f"the seed candidate was judged {seed.verdict}: see the ledger")
        return state
    ctx.reporter.line(f"seed {seed.sha[:10]}: judging the reference in the candidate API")
    verdict = sweep_step(on_first_device(ctx), state, SweepJob(0, seed.sha, None))
    if verdict is not Verdict.PROMOTED:
        raise SeedFailedError(
            f"the seed candidate failed the judge ({verdict}); the workload, its configs or the "
            f"device is broken: read {ctx.paths.evals}/step-00000-sweep/judge.log"
        )
    return current_state(ctx)


def speed_band(ctx: LoopContext, state: SearchState) -> SpeedBand | None:
    """Parents within the noise floor of the frontier's objective (None: no frontier yet)."""
    frontier = state.candidates.get(state.frontier_sha or "")
    if frontier is None or frontier.objective is None or frontier.objective <= 0:
        return None
    return SpeedBand(frontier_objective=frontier.objective, noise_floor=ctx.noise_floor)


def choose_step(ctx: LoopContext, state: SearchState) -> StepStarted:
    """Draw a parent (clade metaproductivity) and an idea (rubric priors) for the next step."""
    number = state.next_step
    rng = np.random.default_rng([ctx.settings.seed, number])
    redirect = state.redirect
    forced_parent = redirect.parent if redirect and number <= redirect.until_step else None
    parent_theta: float | None = None
    if forced_parent is None:
        parent = choose_parent(state.lineage(exhausted(ctx, state)), rng, speed_band(ctx, state))
        parent_sha, parent_theta = parent.node_id, parent.theta
    else:
        parent_sha = forced_parent
    strength = PriorStrength(k_min=ctx.settings.k_min, k_max=ctx.settings.k_max)
    idea = choose_idea(ideas_for_parent(ctx, state, parent_sha), strength, rng)
    return StepStarted(
        step=number,
        parent_sha=parent_sha,
        idea_id=idea.idea_id,
        parent_theta=parent_theta,
        idea_theta=idea.theta,
        idea_forced=idea.forced,
        parent_forced=forced_parent is not None,
    )


def next_start(ctx: LoopContext, state: SearchState) -> StepStarted:
    """Unless a REDIRECT forces a parent: a composition when the run's results call for one,
    else a repair of a narrow miss when one is due; otherwise a parent and an idea drawn by
    the samplers. The composition goes first: it is built from measurements already made,
    and it serves a narrow miss where the miss passed (run 14 on the H200 repaired a fused
    candidate that had failed one config of 13, twice in vain, while the plan that served the
    other 12 with it was due: 4.98x over that frontier by benchmarks/composition_replay.py)."""
    redirect = state.redirect
    if redirect is not None and redirect.parent and state.next_step <= redirect.until_step:
        return choose_step(ctx, state)
    plan = composition_plan(ctx, state)
    if plan is not None:
        return composition_step(state, plan)
    repair = repair_start(ctx, state)
    return repair if repair is not None else choose_step(ctx, state)


def _describe_start(state: SearchState, started: StepStarted) -> str:
    if started.composition is not None:
        regimes = len(started.composition.get("variants", []))
        gain = (
            started.composition["predicted_objective"] / started.composition["incumbent_objective"]
        )
        return (
            f"step {started.step}: compose {regimes} regimes on the frontier "
            f"{started.parent_sha[:10]} (predicted {gain:.3f}x over the best single variant, "
            "from this run's per-config results)"
        )
    idea = state.ideas[started.idea_id]
    if started.repair_of is not None:
        return (
            f"step {started.step}: repair {started.repair_of[:10]} (missed the tolerance "
            f"narrowly) with idea {idea.idea_id} (theta {started.idea_theta:.2f}), as a child "
            f"of {started.parent_sha[:10]}: {idea.text[:80]}"
        )
    parent = f"{started.parent_sha[:10]}" + (
        " (redirect)" if started.parent_forced else f" (theta {started.parent_theta:.2f})"
    )
    how = "forced: fresh human idea" if started.idea_forced else f"theta {started.idea_theta:.2f}"
    return f"step {started.step}: parent {parent}, idea {idea.idea_id} ({how}): {idea.text[:80]}"


def _stop_reason(ctx: LoopContext, state: SearchState, invocation: Invocation) -> str | None:
    """Why no new step may start now, if so."""
    settings = ctx.settings
    budget = budget_stop(invocation, state, settings.minutes, settings.max_candidates)
    if budget is not None:
        return budget
    if not any(node.expandable for node in state.lineage(exhausted(ctx, state))):
        return (
            "search space exhausted: every idea ended with no change on every candidate "
            "(inject an IDEA, or use an LLM expander)"
        )
    in_row = _infrastructure_failures_in_row(state)
    if in_row >= ctx.settings.max_infrastructure_failures:
        last = state.steps[max(state.steps)].expansion_failed
        detail = f"{last.outcome}: {last.message[:200]}" if last else ""
        return (
            f"{in_row} expansions in a row ended with an infrastructure failure ({detail}); "
            "fix the cause (provider, key, model) and run again to resume"
        )
    repeated = repeated_failure_stop(state, invocation.first_step, settings.max_same_failures)
    if repeated is not None:
        return repeated
    if ctx.llm is not None:
        return ctx.llm.budget.exhausted()
    return None


def exhausted(ctx: LoopContext, state: SearchState) -> frozenset[str]:
    """Candidates whose every idea ended with no change (never drawn as parents)."""
    return frozenset(state.exhausted_parents(ctx.device))


def _infrastructure_failures_in_row(state: SearchState) -> int:
    """Closed steps at the end of the run that ended in an infrastructure failure."""
    count = 0
    for number in sorted(state.steps, reverse=True):
        failed = state.steps[number].expansion_failed
        if state.steps[number].sha is not None:
            failed = None  # a retry committed: the step did not fail
        if failed is not None and failed.outcome == ExpansionOutcome.NO_CHANGE:
            continue  # nothing new to make is the exhaustion rule's business, not a fault
        if failed is None or not infrastructure_failure(failed):
            break
        count += 1
    return count


def _between_steps(ctx: LoopContext, state: SearchState) -> bool:
    """Verifier and researcher work due before the next step; True when something ran."""
    separate = ctx.settings.verification is VerificationMode.SEPARATE
    pending = state.pending_verification() if ctx.settings.verify_frontier else None
    if pending is not None and separate:
        sha, against = pending
        verify_frontier(on_first_device(ctx), sha, against, state.next_step)
        return True
    if _check_frontier_inputs(ctx, state):
        return True
    if research_due(ctx, state):
        run_researcher(ctx, state)
        return True
    return False


def _check_frontier_inputs(ctx: LoopContext, state: SearchState) -> bool:
    """A child's inherited failure checked on its parent, or the frontier judged on inputs
    that demoted earlier frontiers; True when one ran."""
    inherited = inherited_check_due(ctx, state)
    if inherited is not None:
        check_inherited(on_first_device(ctx), *inherited)
        return True
    recheck = frontier_recheck_due(ctx, state)
    if recheck is not None:
        recheck_frontier(on_first_device(ctx), *recheck)
        return True
    return False


def _closing_checks(ctx: LoopContext, state: SearchState) -> None:
    """The verification no later sweep carried, then the inputs that failed the frontier's
    children with its code or demoted earlier frontiers (each check may demote it: then the
    next one's)."""
    pending = state.pending_verification() if ctx.settings.verify_frontier else None
    if pending is not None:
        verify_frontier(on_first_device(ctx), pending[0], pending[1], state.next_step)
        state = current_state(ctx)
    # Each check marks its inputs checked for the candidate it judged: this ends.
    while _check_frontier_inputs(ctx, state):
        state = current_state(ctx)


def _demoted_since_last_step(ctx: LoopContext) -> bool:
    """A frontier was demoted after the last step started (no step could build on what
    stands again)."""
    starts = ctx.ledger.events(EventKind.STEP_STARTED.value)
    after = starts[-1].seq if starts else 0
    return bool(ctx.ledger.events(EventKind.FRONTIER_DEMOTED.value, after_seq=after))


def _closing_composition(ctx: LoopContext, stop: StopSignal) -> bool:
    """One composition step past the budget when a frontier was demoted after the last step
    (by the checks between steps or the closing ones) and the run's results call for one;
    True when it ran. Without it the run ends on whatever frontier stands again: run 20 (H100)
    demoted its fused frontiers for one config after its minutes and exported a 3.6x torch
    path where a composition serving that config by a variant proven on the demoting inputs
    was predicted at 19.75x from its own measurements."""
    if stop.requested or not _demoted_since_last_step(ctx):
        return False
    state = current_state(ctx)
    plan = composition_plan(ctx, state)
    if plan is None:
        return False
    started = composition_step(state, plan)
    ctx.ledger.append(started.to_event(EventKind.STEP_STARTED))
    ctx.reporter.line(
        "a frontier was demoted after the last step: one step past the budget, "
        + _describe_start(state, started)
    )
    _finish_step(ctx, stop, started.step)
    return True


def _dispatcher(ctx: LoopContext) -> Dispatcher:
    """The step pipeline over the run's devices (one judging here when it has none)."""
    return Dispatcher(ctx, list(ctx.workers) or [DeviceWorker(ctx.judging, ctx.noise_floor)])


def _finish_step(ctx: LoopContext, stop: StopSignal, number: int) -> None:
    """Run step `number` to its verdict, and no other (a step an LLM budget left open stays
    open for a resumed run; a stop leaves this one open too)."""
    dispatcher = _dispatcher(ctx)
    state_now = StateCache(ctx)
    while True:
        state = state_now()
        if not stop.requested and dispatcher.dispatch(state, only=number):
            continue
        done = number not in {step.started.step for step in state.open_steps}
        if not dispatcher.running and (stop.requested or done):
            return
        dispatcher.collect(state_now)


def _before_stopping(ctx: LoopContext, stop: StopSignal) -> None:
    """What a frontier still needs when the search ends: the closing checks, a composition
    when a frontier was demoted after the last step (and its checks), and (once per
    frontier, its configs cost minutes each) feasibility."""
    _closing_checks(ctx, current_state(ctx))
    if _closing_composition(ctx, stop):
        _closing_checks(ctx, current_state(ctx))
    due = feasibility_due(ctx, current_state(ctx))
    if due is not None:
        check_feasibility(on_first_device(ctx), due)


class StateCache:
    """The state as the ledger says it is now, derived again only when the ledger's head
    moved (the loop looks every half second while judges run; a derivation reads it all)."""

    def __init__(self, ctx: LoopContext) -> None:
        self.ctx = ctx
        self.head: tuple[int, str] | None = None
        self.state: SearchState | None = None

    def __call__(self) -> SearchState:
        head = self.ctx.ledger.head()
        if self.state is None or head != self.head:
            self.state, self.head = current_state(self.ctx), head
        return self.state


def _between_steps_due(ctx: LoopContext, state: SearchState) -> bool:
    """Verifier or researcher work waits to run (it needs the pipeline drained)."""
    separate = ctx.settings.verification is VerificationMode.SEPARATE
    pending = state.pending_verification() if ctx.settings.verify_frontier else None
    # The frontier may not stand.
    inherited = inherited_check_due(ctx, state) or frontier_recheck_due(ctx, state)
    return (pending is not None and separate) or inherited is not None or research_due(ctx, state)


def _search(ctx: LoopContext, stop: StopSignal, invocation: Invocation) -> tuple[str, int]:
    """Steps until a budget ends or a stop is asked for: open steps advance on free devices
    and expanders, new ones start while the pipeline has room; (reason, steps closed)."""
    dispatcher = _dispatcher(ctx)
    state_now = StateCache(ctx)
    closed_before = sum(step.closed for step in state_now().steps.values())
    reason = "budget"
    while True:
        state = state_now()
        if not stop.requested and dispatcher.dispatch(state):
            continue
        idle = not dispatcher.running and not state.open_steps
        if stop.requested:
            if not dispatcher.running:
                reason = "interrupted"
                break
        elif idle and _between_steps(ctx, state):
            continue
        elif not _between_steps_due(ctx, state) and dispatcher.can_start(state):
            stop_reason = _stop_reason(ctx, state, invocation)
            if stop_reason is None:
                started = next_start(ctx, state)
                ctx.ledger.append(started.to_event(EventKind.STEP_STARTED))
                ctx.reporter.line(_describe_start(state, started))
                continue
            if idle:
                reason = stop_reason
                break
        elif idle:
            stop_reason = _stop_reason(ctx, state, invocation)
            if stop_reason is not None:
                reason = stop_reason
                break
        dispatcher.collect(state_now)
    closed = sum(step.closed for step in state_now().steps.values())
    return reason, closed - closed_before


def run_loop(ctx: LoopContext, stop: StopSignal) -> RunSummary:
    """Resume any open steps, then start steps until a time, candidate or LLM budget ends."""
    state = current_state(ctx)
    invocation = begin_invocation(ctx.ledger.events(), state, ctx.ledger.head()[0])
    if invocation.earlier_count:
        ctx.reporter.line(
            f"budget: {ctx.settings.minutes:g} min for the whole run, "
            f"{invocation.earlier_s / 60:.1f} min used by its {invocation.earlier_count} "
            "earlier invocation(s)"
        )
    steps_done = 0
    state = ensure_seed(ctx, state)
    if ctx.llm is not None and ctx.settings.inspect_workload and not state.inspected:
        run_inspector(ctx, state)
        state = current_state(ctx)
    try:
        reason, steps_done = _search(ctx, stop, invocation)
    except BudgetExhaustedError as exc:
        # The open step stays open: a resumed run with a larger budget finishes it.
        reason = str(exc)
        drain_llm_calls(ctx, state.next_step)
    if reason != "interrupted":
        _before_stopping(ctx, stop)
    elapsed = invocation.elapsed_s()
    stopped = RunStopped(reason=reason, steps_this_invocation=steps_done, elapsed_s=elapsed)
    ctx.ledger.append(stopped.to_event(EventKind.RUN_STOPPED))
    return RunSummary(
        reason=reason,
        steps=steps_done,
        elapsed_s=elapsed,
        state=current_state(ctx),
        taint=taint_summary(ctx.ledger, after_seq=invocation.start_seq),
    )
