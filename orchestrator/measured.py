"""The measured stages of a step, screen and full sweep, each in three parts: planned where
the state is, judged on one device (possibly on a worker thread), recorded where the state is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.models import EvaluationRequest, EvaluationResult, Outcome
from ledger import Record
from orchestrator.arms import screen_arms, sweep_arms
from orchestrator.change_scope import (
    change_scope,
    scoped_evidence,
    whole_evidence,
)
from orchestrator.evaluation import (
    BASELINE_ARM,
    StageRequest,
    build_request,
    evaluation_records,
    judge,
    ratio_dict,
    tolerance_used,
)
from orchestrator.events import Stage, VerdictDetails
from orchestrator.judge_watch import last_progress
from orchestrator.replication import replication_records, riding_verification
from orchestrator.screen_scope import screen_configs
from orchestrator.settings import ScreenGateRule, Settings, default_timing
from orchestrator.stages import LoopContext, estimate, failed_verdict, verdict_record
from orchestrator.state import SearchState, StepView
from orchestrator.taint import tainted_line
from search import (
    ConfigTiming,
    Decision,
    RatioEstimate,
    ScreenGate,
    ScreenReading,
    Verdict,
    compute_objective,
    decide_verdict,
    gate_screen,
)

# A screen's cap never falls below this: the first build of a kernel-compiling candidate
# (Triton, Inductor) takes tens of seconds on a cold cache before anything is wrong.
SCREEN_FLOOR_S = 60.0


@dataclass(frozen=True)
class StagePlan:
    """One judge run, fully described: what it measures, where its files go, what it
    shows while it runs, and the frontier it is measured against."""

    job: StageRequest
    request: EvaluationRequest
    work: Path
    what: str
    frontier_sha: str | None
    # The verification a sweep carries for the frontier it was planned against (if any).
    riding: tuple[str, str] | None = None


def plan_stage(
    ctx: LoopContext, job: StageRequest, frontier: str | None, riding: tuple[str, str] | None
) -> StagePlan:
    """Materialize the arms and build the judge request (git and files: the state's side)."""
    work = ctx.judging.evals_dir / f"step-{job.step:05d}-{job.name}"
    slot = ctx.judging.slot_name
    where = f" on {slot}" if ctx.judging.runner.slot is not None and slot != ctx.device else ""
    return StagePlan(
        job=job,
        request=build_request(ctx.judging, job),
        work=work,
        what=f"{job.stage.value} of {job.sha[:10]} (step {job.step}){where}",
        frontier_sha=frontier,
        riding=riding,
    )


def run_plan(ctx: LoopContext, plan: StagePlan) -> EvaluationResult:
    """The judge subprocess of a plan, on the context's device (safe on a worker thread)."""
    return judge(ctx.judging, plan.request, plan.work, plan.what)


def _records(
    ctx: LoopContext, plan: StagePlan, result: EvaluationResult, superseded_by: str | None = None
) -> list[Record]:
    slot = ctx.judging.slot_name if ctx.judging.runner.slot is not None else None
    return evaluation_records(plan.job, plan.request, result, slot, superseded_by)


def _label(ctx: LoopContext, step: int) -> str:
    """How a result line starts: indented under its step in a serial run; with several
    devices, results arrive out of order, so the line names its step and device."""
    if ctx.judging.runner.slot is None:
        return "  "
    return f"  step {step} on {ctx.judging.slot_name}: "


def plan_screen(ctx: LoopContext, state: SearchState, step: StepView) -> StagePlan:
    """Correctness and a short paired timing against the parent on the screening configs."""
    assert step.sha is not None
    job = StageRequest(
        step=step.started.step,
        sha=step.sha,
        stage=Stage.SCREEN,
        arms=screen_arms(step.sha, step.started.parent_sha, state.frontier_sha),
        config_ids=screen_configs(ctx, state, step),
        timing=ctx.settings.screen_timing or default_timing(ctx.device, "screen"),
        config_weights=state.config_weights,
        time_limit_s=screen_time_limit(ctx.settings),
        attempt=step.timed_out_screens,
        regression_trials=state.regression_trials(),
    )
    return plan_stage(ctx, job, state.frontier_sha, None)


def screen_time_limit(settings: Settings) -> float:
    """The longest one screen may take: its share of the run's budget, at least
    SCREEN_FLOOR_S (a first build compiles), at most the cap of any evaluation."""
    share = settings.screen_time_share * settings.minutes * 60.0
    return min(settings.eval_timeout_s, max(SCREEN_FLOOR_S, share))


def record_screen(ctx: LoopContext, plan: StagePlan, result: EvaluationResult) -> None:
    """The screen's evidence, and a verdict when it failed or is clearly slower than its
    parent (the candidate then goes no further)."""
    job = plan.job
    label = _label(ctx, job.step)
    records = _records(ctx, plan, result)
    retry = job.attempt < ctx.settings.screen_timeout_retries
    if result.outcome is Outcome.TIMEOUT and retry:
        if retry_can_finish(job.config_ids, result):
            ctx.ledger.append_many(records)  # no verdict: the step screens again
            ctx.reporter.line(
                f"{label}screen: timeout after {result.wall_s:.1f} s; screened again "
                f"(attempt {job.attempt + 2}), past what the compile caches kept"
            )
            return
        ctx.reporter.line(
            f"{label}screen: timeout after {result.wall_s:.1f} s, early in its configs "
            f"({len(job.config_ids)}): not screened again, since at its pace the rest "
            "would not fit in the same limit"
        )
    if result.outcome is not Outcome.PASSED:
        records.append(failed_verdict(job.sha, job.step, Stage.SCREEN, result))
        ctx.ledger.append_many(records)
        problem = result.message.strip()[:300]
        ctx.reporter.line(f"{label}screen: {result.outcome.value}: {problem}")
        return
    vs_parent = estimate(result.aggregate("parent"))
    text = f"{vs_parent.describe()} vs parent" if vs_parent else "no timing"
    vs_frontier = estimate(result.aggregate("frontier"))
    text += f", {vs_frontier.describe()} vs frontier" if vs_frontier else ""
    reading = screen_reading(job.arms, plan.frontier_sha, result, vs_parent)
    require_win = ctx.settings.screen_gate is ScreenGateRule.FRONTIER
    gate = gate_screen(reading, ctx.noise_floor, require_win)
    if gate is not ScreenGate.SWEEP:
        details = VerdictDetails(
            step=job.step, success=False, vs_parent=ratio_dict(result.aggregate("parent"))
        )
        reason = f"screen: {GATE_REASONS[gate]} ({text})"
        records.append(verdict_record(job.sha, Verdict.REJECTED, reason, Stage.SCREEN, details))
        ctx.ledger.append_many(records)
        ctx.reporter.line(
            f"{label}screen: correct, {text}: rejected, {GATE_REASONS[gate]} "
            f"({result.wall_s:.1f} s)"
        )
        return
    ctx.ledger.append_many(records)
    ctx.reporter.line(f"{label}screen: correct, {text} ({result.wall_s:.1f} s)")


def retry_can_finish(config_ids: list[str], result: EvaluationResult) -> bool:
    """Whether a cut screen's retry could finish in the same limit. The retry finds built
    what the cut judge finished (the compile caches) and about half of the config it was
    building; the rest must fit in the time the cut judge spent on those, at its pace. On
    the H200, run 14 retried two screens cut while building the second of five configs, and
    both were cut again (120 s); the retries that finished were cut in their last config."""
    reached = last_progress(result.message)
    if reached is None or reached[0] not in config_ids or reached[1] != "correctness":
        return True  # unknown, or past the builds: the caches hold every config's
    done = config_ids.index(reached[0]) + 0.5
    return len(config_ids) - done <= done


GATE_REASONS = {
    ScreenGate.SLOWER_THAN_PARENT: "clearly slower than its parent",
    ScreenGate.NO_WIN_OVER_FRONTIER: "faster than the frontier beyond the noise floor on no "
    "screening config",
}


def screen_reading(
    arms: dict[str, str],
    frontier_sha: str | None,
    result: EvaluationResult,
    vs_parent: RatioEstimate | None,
) -> ScreenReading:
    """The gate's input: the aggregate against the parent, and each screening config's median
    against the frontier (the parent's arm when the parent is the frontier)."""
    parent_is_frontier = frontier_sha is not None and arms.get("parent") == frontier_sha
    other = "frontier" if "frontier" in arms else "parent" if parent_is_frontier else None
    by_config = {
        config.config_id: ratio.median
        for config in result.configs
        for ratio in config.ratios
        if other is not None and ratio.arm == "candidate" and ratio.other == other
    }
    return ScreenReading(
        vs_parent=vs_parent,
        vs_frontier_by_config=by_config,
        parent_is_frontier=parent_is_frontier,
        tainted=result.tainted,
    )


def screen_step(ctx: LoopContext, state: SearchState, step: StepView) -> None:
    """Plan, judge and record the screen in one go (the serial loop)."""
    plan = plan_screen(ctx, state, step)
    record_screen(ctx, plan, run_plan(ctx, plan))


@dataclass(frozen=True)
class SweepJob:
    """The full sweep of one candidate."""

    step: int
    sha: str
    parent_sha: str | None

    @property
    def is_seed(self) -> bool:
        """The seed has no parent: its sweep makes it the initial frontier."""
        return self.parent_sha is None


def decide(
    ctx: LoopContext, state: SearchState, job: SweepJob, result: EvaluationResult
) -> tuple[Decision, VerdictDetails, float | None]:
    """Verdict, its details and the objective from a passed full sweep."""
    per_config = []
    speedups = {}
    for config in result.configs:
        medians = {t.arm: t.median_ns for t in config.timings}
        per_config.append(
            ConfigTiming(
                config_id=config.config_id,
                baseline_s=medians[BASELINE_ARM] / 1e9,
                candidate_s=medians["candidate"] / 1e9,
            )
        )
        base = next((r for r in config.ratios if r.other == BASELINE_ARM), None)
        if base is not None:
            speedups[config.config_id] = base.median
    objective = compute_objective(per_config, ctx.objective_spec(state))
    scoped: dict[str, object] = {}
    if job.is_seed:
        reason = "seed candidate: the initial frontier"
        decision = Decision(verdict=Verdict.PROMOTED, success=False, reason=reason)
    else:
        decision, scoped = _sweep_decision(ctx, state, job, result)
    details = VerdictDetails(
        step=job.step,
        success=decision.success,
        vs_parent=ratio_dict(result.aggregate("parent")),
        vs_frontier=ratio_dict(result.aggregate("frontier")),
        vs_baseline=ratio_dict(result.aggregate(BASELINE_ARM)),
        frontier_before=state.frontier_sha,
        per_config_speedup=speedups,
        per_config_tolerance_used=tolerance_used(result),
        capped_configs=objective.capped_configs if objective else [],
        objective_kind=ctx.settings.objective.value,
        noise_floor=ctx.noise_floor,
        taint=result.taint,
    ).model_copy(update=scoped)
    return decision, details, objective.value if objective else None


def _sweep_decision(
    ctx: LoopContext, state: SearchState, job: SweepJob, result: EvaluationResult
) -> tuple[Decision, dict[str, object]]:
    """The verdict read on the configs the candidate's change reaches (the details to record
    when it was), or over all of them when that promotes and the scoped reading does not (a
    device whose single configs read noisily)."""
    evidence, scope = scoped_evidence(ctx, state, (job.parent_sha, job.sha), result)
    decision = decide_verdict(evidence, ctx.noise_floor)
    if scope.configs is None:
        return decision, {}
    whole = decide_verdict(whole_evidence(result), ctx.noise_floor)
    if whole.verdict is Verdict.PROMOTED and decision.verdict is not Verdict.PROMOTED:
        return whole, {}
    scoped: dict[str, object] = {
        "scope": scope.configs,
        "scope_vs_parent": _dumped(evidence.vs_parent),
        "scope_vs_frontier": _dumped(evidence.vs_frontier),
    }
    return decision.model_copy(update={"reason": decision.reason + scope.describe()}), scoped


def _dumped(value: RatioEstimate | None) -> dict[str, float] | None:
    return value.model_dump() if value is not None else None


def plan_sweep(ctx: LoopContext, state: SearchState, job: SweepJob) -> StagePlan:
    """All configs, correctness then interleaved timing against parent, baseline and frontier
    (and the previous frontier, when this sweep carries its verification)."""
    view = state.steps.get(job.step)
    attempt = (view.tainted_sweeps + view.superseded_sweeps) if view is not None else 0
    arms = sweep_arms(job.sha, job.parent_sha, state.frontier_sha)
    riding = riding_verification(ctx.settings, state, arms) if not job.is_seed else None
    stage_job = StageRequest(
        step=job.step,
        sha=job.sha,
        stage=Stage.SWEEP,
        arms=arms,
        config_ids=list(ctx.config_set.config_ids),
        timing=ctx.settings.sweep_timing or default_timing(ctx.device, "sweep"),
        config_weights=state.config_weights,
        attempt=attempt,
        regression_trials=state.regression_trials(),
    )
    return plan_stage(ctx, stage_job, state.frontier_sha, riding)


def record_sweep(
    ctx: LoopContext, state: SearchState, sweep: SweepJob, plan: StagePlan, result: EvaluationResult
) -> Verdict | None:
    """The evidence and the verdict in one transaction, decided on the state as it is now. A
    tainted sweep, or one whose frontier was replaced while it ran (another device promoted),
    is kept without a verdict and measured again (None); taint only up to
    settings.taint_remeasures times."""
    view = state.steps.get(sweep.step)
    retried = view.tainted_sweeps if view is not None else 0
    label = _label(ctx, sweep.step)
    passed = result.outcome is Outcome.PASSED
    if passed and not sweep.is_seed and state.frontier_sha != plan.frontier_sha:
        ctx.ledger.append_many(_records(ctx, plan, result, superseded_by=state.frontier_sha))
        ctx.reporter.line(
            f"{label}sweep: the frontier became {str(state.frontier_sha)[:10]} "
            "while it ran; measured again against it"
        )
        return None
    records = _records(ctx, plan, result)
    if passed and result.tainted and not sweep.is_seed and retried < ctx.settings.taint_remeasures:
        ctx.ledger.append_many(records)  # the evidence is kept; the step measures again
        ctx.reporter.line(tainted_line(result.taint, retried + 1, again=True))
        return None
    if not passed:
        verdict = failed_verdict(sweep.sha, sweep.step, Stage.SWEEP, result)
        records.append(verdict)
        ctx.ledger.append_many(records)
        problem = result.message.strip()[:300]
        ctx.reporter.line(f"{label}sweep: {result.outcome.value}: {problem}")
        return Verdict(verdict.verdict)
    decision, details, objective = decide(ctx, state, sweep, result)
    records.append(
        verdict_record(
            sweep.sha, decision.verdict, decision.reason, Stage.SWEEP, details, objective
        )
    )
    arms = plan.job.arms
    # Two sweeps in flight may both have planned to carry the frontier's verification: the
    # first to finish records it, the others' would only repeat it.
    riding = plan.riding if plan.riding and state.pending_verification() == plan.riding else None
    riders = []
    if riding:
        configs = [c.config_id for c in result.configs if c.ratios]
        scope = change_scope(ctx, state, (riding[1], riding[0]), configs)
        riders = replication_records(riding, arms, result, scope)
    ctx.ledger.append_many([*records, *riders])
    for rider in riders[:1]:
        ctx.reporter.line(f"  verifier: {rider.payload['verdict']}: {rider.payload['reason']}")
    shown = f"{objective:.3f}x over baseline" if objective is not None else "no objective"
    ctx.reporter.line(
        f"{label}sweep: {decision.verdict.value}: {decision.reason}; {shown} "
        f"({result.wall_s:.1f} s)"
    )
    if result.tainted and not sweep.is_seed:
        ctx.reporter.line(tainted_line(result.taint, retried + 1, again=False))
    return decision.verdict


def sweep_step(ctx: LoopContext, state: SearchState, job: SweepJob) -> Verdict | None:
    """Plan, judge and record a full sweep in one go (the serial loop)."""
    plan = plan_sweep(ctx, state, job)
    return record_sweep(ctx, state, job, plan, run_plan(ctx, plan))
