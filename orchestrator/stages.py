"""The pipeline of one candidate: expand -> static checks -> screen -> full sweep -> verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import git

from agents.expander import (
    Expander,
    ExpansionContext,
    ExpansionOutcome,
    ExpansionRequest,
    ExpansionResult,
    IdeaBrief,
)
from agents.llm.session import LLMSession
from harness.models import EvaluationResult, Outcome, RatioStats
from harness.static_checks import check_sources, parse_constraint
from kernels.workload import ConfigSet, Workload
from ledger import CandidateRecord, Ledger, Record, VerdictRecord
from orchestrator.arms import recombination_donors, screen_arms, sweep_arms
from orchestrator.evaluation import (
    BASELINE_ARM,
    Judging,
    StageRequest,
    evaluation_records,
    judge_stage,
    ratio_dict,
)
from orchestrator.events import (
    EventKind,
    ExpansionFailed,
    LessonNoted,
    Stage,
    StaticChecked,
    StepStarted,
    VerdictDetails,
)
from orchestrator.repeats import static_line
from orchestrator.replication import replication_records, riding_verification
from orchestrator.settings import Settings, default_timing
from orchestrator.state import SearchState, StepView
from orchestrator.taint import tainted_line
from orchestrator.workspace import RunPaths, branch_commit, read_sources, step_branch, tree_of
from search import (
    ConfigTiming,
    Decision,
    ObjectiveSpec,
    RatioEstimate,
    Verdict,
    VerdictEvidence,
    compute_objective,
    decide_verdict,
    screen_filter,
)

FAILED_OUTCOMES = {
    Outcome.INCORRECT: Verdict.FAILED_CORRECTNESS,
    Outcome.COMPILE_ERROR: Verdict.FAILED_RUN,
    Outcome.RUNTIME_ERROR: Verdict.FAILED_RUN,
    Outcome.TIMEOUT: Verdict.FAILED_RUN,
    Outcome.NO_RESULT: Verdict.FAILED_RUN,
    Outcome.NO_RUN: Verdict.NO_RUN,
    Outcome.STATIC_REJECTED: Verdict.FAILED_STATIC,
    Outcome.REJECTED: Verdict.FAILED_CORRECTNESS,
}


class Reporter(Protocol):
    """Where progress goes (the terminal, a test's list)."""

    def line(self, text: str) -> None:
        """Show one line of progress."""


@dataclass
class LoopContext:
    """Everything a step needs, wired once by the service."""

    settings: Settings
    workload: Workload
    device: str
    config_set: ConfigSet
    paths: RunPaths
    ledger: Ledger
    repo: git.Repo
    expander: Expander
    judging: Judging
    reporter: Reporter
    noise_floor: float
    llm: LLMSession | None = None
    # Builds the prompt context of an LLM expansion from the ledger (None: offline runs).
    context_for: Callable[[SearchState, StepStarted], ExpansionContext] | None = None

    def objective_spec(self, state: SearchState) -> ObjectiveSpec:
        """The configured aggregate with the PRIORITY config weights in force."""
        return ObjectiveSpec(
            kind=self.settings.objective,
            cap=self.settings.objective_cap,
            weights=state.config_weights,
        )


def estimate(stats: RatioStats | None) -> RatioEstimate | None:
    """Harness ratio -> search estimate."""
    if stats is None:
        return None
    return RatioEstimate(median=stats.median, ci_low=stats.ci_low, ci_high=stats.ci_high)


def expand_step(ctx: LoopContext, state: SearchState, step: StepView) -> None:
    """Commit the step's candidate (reusing the step's branch after a crash) and record it."""
    number, started = step.started.step, step.started
    idea = state.ideas[started.idea_id]
    if recover_commit(ctx, started, ctx.expander.name):
        return
    frontier = state.frontier_sha
    request = ExpansionRequest(
        repo_path=ctx.paths.repo,
        worktree_root=ctx.paths.worktrees,
        parent_sha=started.parent_sha,
        branch=step_branch(number),
        candidate_file=ctx.workload.candidate_file,
        idea=IdeaBrief(
            idea_id=idea.idea_id,
            text=idea.text,
            source=idea.source,
            targets=idea.targets,
            quality=idea.quality,
        ),
        constraints=state.constraints,
        donor_shas=recombination_donors(state, started.parent_sha),
        frontier_sha=frontier,
        step=number,
        context=ctx.context_for(state, started) if ctx.context_for else None,
        known_trees=[c.tree_sha for c in state.candidates.values()],
        seed=ctx.settings.seed * 1_000_003 + number,
    )
    record_expansion(ctx, step, ctx.expander.expand(request))


def recover_commit(ctx: LoopContext, started: StepStarted, agent: str) -> bool:
    """Record the commit a crashed run left on the step's branch; False when there is none."""
    existing = branch_commit(ctx.repo, step_branch(started.step))
    if existing is None:
        return False
    commit = ctx.repo.commit(existing)
    record = CandidateRecord(
        sha=existing,
        tree_sha=tree_of(ctx.repo, existing),
        parent_sha=started.parent_sha,
        step=started.step,
        idea_id=started.idea_id,
        agent=agent,
        message=str(commit.message),
        prompt_hash=None,
        cost={"wall_s": 0.0},
    )
    ctx.ledger.append(record)
    ctx.reporter.line(f"  recovered commit {existing[:10]} of step {started.step} after a restart")
    return True


def record_expansion(ctx: LoopContext, step: StepView, result: ExpansionResult) -> None:
    """The candidate an expansion committed, or why it committed none, into the ledger."""
    number, started = step.started.step, step.started
    ctx.ledger.append_many(lesson_records(started, result))
    if result.outcome is not ExpansionOutcome.COMMITTED or result.sha is None:
        retryable = result.outcome.infrastructure and result.outcome != ExpansionOutcome.NO_CHANGE
        tried = step.expansion_attempts + 1
        failure = ExpansionFailed(
            step=number,
            parent_sha=started.parent_sha,
            idea_id=started.idea_id,
            outcome=result.outcome.value,
            message=result.message,
            infrastructure=result.outcome.infrastructure,
            retries_left=max(0, ctx.settings.expansion_retries + 1 - tried) if retryable else 0,
        )
        ctx.ledger.append(failure.to_event(EventKind.EXPANSION_FAILED))
        scored = "not scored" if result.outcome.infrastructure else "scored against the idea"
        ctx.reporter.line(f"  expansion failed ({result.outcome}, {scored}): {result.message}")
        return
    ctx.ledger.append(
        CandidateRecord(
            sha=result.sha,
            tree_sha=result.tree_sha or tree_of(ctx.repo, result.sha),
            parent_sha=started.parent_sha,
            step=number,
            idea_id=started.idea_id,
            agent=result.agent,
            message=result.message,
            prompt_hash=result.prompt_hash,
            cost=expansion_cost(result),
        )
    )
    title = result.message.splitlines()[0] if result.message else ""
    ctx.reporter.line(f"  committed {result.sha[:10]}  {title}  ({result.wall_s:.1f} s)")


def lesson_records(started: StepStarted, result: ExpansionResult) -> list[Record]:
    """The lessons an expansion noted, as ledger events (kept whatever its outcome)."""
    return [
        LessonNoted(
            step=started.step,
            parent_sha=started.parent_sha,
            idea_id=started.idea_id,
            agent=result.agent,
            text=text,
        ).to_event(EventKind.LESSON)
        for text in result.lessons
    ]


def expansion_cost(result: ExpansionResult) -> dict[str, float]:
    """Wall time of the expansion, its benchmarks' device time and wall time by tool."""
    cost = {"wall_s": round(result.wall_s, 3), "bench_device_s": result.bench_device_s}
    cost.update({f"tool_{name}_s": seconds for name, seconds in result.tool_wall_s.items()})
    return cost


def static_step(ctx: LoopContext, state: SearchState, step: StepView) -> None:
    """Static checks; a failure ends the step with FAILED_STATIC."""
    assert step.sha is not None
    constraints = [parse_constraint(text) for text in state.constraints]
    report = check_sources(
        read_sources(ctx.repo, step.sha),
        ctx.workload.static_policy,
        ctx.workload.candidate_file,
        constraints,
    )
    checked = StaticChecked(
        step=step.started.step,
        sha=step.sha,
        passed=report.passed,
        findings=[f.model_dump(mode="json") for f in report.findings],
    )
    records: list[Record] = [checked.to_event(EventKind.STATIC_CHECKED)]
    if not report.passed:
        details = VerdictDetails(step=step.started.step, success=False)
        records.append(
            _verdict(step.sha, Verdict.FAILED_STATIC, report.summary(), Stage.STATIC, details)
        )
    ctx.ledger.append_many(records)
    ctx.reporter.line(static_line(state, report))  # repeated findings are not printed again


def _verdict(
    sha: str,
    verdict: Verdict,
    reason: str,
    stage: Stage,
    details: VerdictDetails,
    objective: float | None = None,
) -> VerdictRecord:
    return VerdictRecord(
        candidate_sha=sha,
        verdict=verdict.value,
        reason=reason,
        stage=stage.value,
        objective=objective,
        details=details.model_dump(mode="json"),
    )


def _failed_verdict(sha: str, step: int, stage: Stage, result: EvaluationResult) -> VerdictRecord:
    verdict = FAILED_OUTCOMES[result.outcome]
    first_line = result.message.strip().splitlines()[0] if result.message.strip() else ""
    cause = result.reason.value if result.reason else result.outcome.value
    reason = f"{stage.value}: {cause}: {first_line}"
    details = VerdictDetails(step=step, success=False, reject_reason=cause)
    return _verdict(sha, verdict, reason, stage, details)


def screen_step(ctx: LoopContext, state: SearchState, step: StepView) -> None:
    """Correctness and a short paired timing against the parent on the screening configs."""
    assert step.sha is not None
    number = step.started.step
    redirect = state.redirect if state.redirect and number <= state.redirect.until_step else None
    configs = (
        list(redirect.configs)
        if redirect and redirect.configs
        else list(ctx.config_set.screening_ids)
    )
    job = StageRequest(
        step=number,
        sha=step.sha,
        stage=Stage.SCREEN,
        arms=screen_arms(step.sha, step.started.parent_sha, state.frontier_sha),
        config_ids=configs,
        timing=ctx.settings.screen_timing or default_timing(ctx.device, "screen"),
        config_weights=state.config_weights,
    )
    request, result = judge_stage(ctx.judging, job)
    records = evaluation_records(job, request, result)
    if result.outcome is not Outcome.PASSED:
        records.append(_failed_verdict(step.sha, number, Stage.SCREEN, result))
        ctx.ledger.append_many(records)
        ctx.reporter.line(f"  screen: {result.outcome.value}: {result.message.strip()[:300]}")
        return
    vs_parent = estimate(result.aggregate("parent"))
    text = f"{vs_parent.describe()} vs parent" if vs_parent else "no timing"
    vs_frontier = estimate(result.aggregate("frontier"))
    text += f", {vs_frontier.describe()} vs frontier" if vs_frontier else ""
    if vs_parent is not None and not screen_filter(vs_parent, ctx.noise_floor):
        details = VerdictDetails(
            step=number, success=False, vs_parent=ratio_dict(result.aggregate("parent"))
        )
        reason = f"screen: clearly slower than its parent ({text})"
        records.append(_verdict(step.sha, Verdict.REJECTED, reason, Stage.SCREEN, details))
        ctx.ledger.append_many(records)
        ctx.reporter.line(f"  screen: correct, {text}: rejected ({result.wall_s:.1f} s)")
        return
    ctx.ledger.append_many(records)
    ctx.reporter.line(f"  screen: correct, {text} ({result.wall_s:.1f} s)")


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
    if job.is_seed:
        reason = "seed candidate: the initial frontier"
        decision = Decision(verdict=Verdict.PROMOTED, success=False, reason=reason)
    else:
        evidence = VerdictEvidence(
            correct=True,
            vs_parent=estimate(result.aggregate("parent")),
            vs_frontier=estimate(result.aggregate("frontier")),
            tainted=result.tainted,
        )
        decision = decide_verdict(evidence, ctx.noise_floor)
    details = VerdictDetails(
        step=job.step,
        success=decision.success,
        vs_parent=ratio_dict(result.aggregate("parent")),
        vs_frontier=ratio_dict(result.aggregate("frontier")),
        vs_baseline=ratio_dict(result.aggregate(BASELINE_ARM)),
        frontier_before=state.frontier_sha,
        per_config_speedup=speedups,
        capped_configs=objective.capped_configs if objective else [],
        objective_kind=ctx.settings.objective.value,
        noise_floor=ctx.noise_floor,
        taint=result.taint,
    )
    return decision, details, objective.value if objective else None


def sweep_step(ctx: LoopContext, state: SearchState, job: SweepJob) -> Verdict | None:
    """All configs, correctness then interleaved timing against parent, baseline and frontier;
    the evidence and the verdict are written in one transaction. A tainted sweep is recorded
    without a verdict and measured again (None), up to settings.taint_remeasures times."""
    view = state.steps.get(job.step)
    retried = view.tainted_sweeps if view is not None else 0
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
        attempt=retried,
    )
    request, result = judge_stage(ctx.judging, stage_job)
    records = evaluation_records(stage_job, request, result)
    passed = result.outcome is Outcome.PASSED
    if passed and result.tainted and not job.is_seed and retried < ctx.settings.taint_remeasures:
        ctx.ledger.append_many(records)  # the evidence is kept; the step measures again
        ctx.reporter.line(tainted_line(result.taint, retried + 1, again=True))
        return None
    if not passed:
        verdict = _failed_verdict(job.sha, job.step, Stage.SWEEP, result)
        records.append(verdict)
        ctx.ledger.append_many(records)
        ctx.reporter.line(f"  sweep: {result.outcome.value}: {result.message.strip()[:300]}")
        return Verdict(verdict.verdict)
    decision, details, objective = decide(ctx, state, job, result)
    records.append(
        _verdict(job.sha, decision.verdict, decision.reason, Stage.SWEEP, details, objective)
    )
    riders = replication_records(riding, arms, result, ctx.noise_floor) if riding else []
    ctx.ledger.append_many([*records, *riders])
    for rider in riders[:1]:
        ctx.reporter.line(f"  verifier: {rider.payload['verdict']}: {rider.payload['reason']}")
    shown = f"{objective:.3f}x over baseline" if objective is not None else "no objective"
    ctx.reporter.line(
        f"  sweep: {decision.verdict.value}: {decision.reason}; {shown} ({result.wall_s:.1f} s)"
    )
    if result.tainted and not job.is_seed:
        ctx.reporter.line(tainted_line(result.taint, retried + 1, again=False))
    return decision.verdict
