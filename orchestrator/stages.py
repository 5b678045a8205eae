"""The pipeline of one candidate: expand -> static checks -> screen -> full sweep -> verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

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
from harness.static_checks import FileFindingsCache, check_sources, parse_constraint
from kernels.workload import ConfigSet, Workload
from ledger import CandidateRecord, Ledger, Record, VerdictRecord
from orchestrator.arms import recombination_donors
from orchestrator.evaluation import (
    Judging,
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
from orchestrator.settings import Settings
from orchestrator.state import SearchState, StepView
from orchestrator.unmeasured import forbid_lines, unmeasured_settings
from orchestrator.workspace import (
    RunPaths,
    branch_commit,
    read_file,
    read_sources,
    step_branch,
    tree_of,
)
from search import (
    ObjectiveSpec,
    RatioEstimate,
    Verdict,
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


@dataclass(frozen=True)
class DeviceWorker:
    """One device of the run: how it judges (here, or on a Ray actor) and its own A/A noise
    floor."""

    judging: Judging
    noise_floor: float

    @property
    def name(self) -> str:
        """The device slot's name."""
        return self.judging.slot_name


@dataclass
class DerivedCaches:
    """What the loop would otherwise derive again at every step from commits, which never
    change: static findings per file, and what composition reads of each candidate file.
    Parsing them all anew each step cost the judges' cores seconds a minute."""

    static: FileFindingsCache = field(default_factory=FileFindingsCache)
    # sha -> (the code outside its tunables and dispatch blocks, [(variant id, settings, the
    # configs they serve)]), or None when composition cannot read the candidate.
    composable: dict[str, Any] = field(default_factory=dict)
    # (step, child sha) -> the failed configs where the child runs its parent's code, with
    # the inputs that failed (orchestrator/inherited.py).
    inherited: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)


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
    # Every device the run evaluates on (empty: `judging` alone, the serial run).
    workers: tuple[DeviceWorker, ...] = ()
    # How an expansion reaches a remote expander (None: in this process).
    remote_expand: Callable[[ExpansionRequest], ExpansionResult] | None = None
    # Shared by every device's view of the context (on_worker copies the reference).
    caches: DerivedCaches = field(default_factory=DerivedCaches)

    def on_worker(self, worker: DeviceWorker) -> LoopContext:
        """This context as one device sees it: its judging and its noise floor."""
        return replace(self, judging=worker.judging, noise_floor=worker.noise_floor)

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
    if recover_commit(ctx, step.started, ctx.expander.name):
        return
    record_expansion(ctx, step, ctx.expander.expand(expansion_request(ctx, state, step)))


def expansion_request(ctx: LoopContext, state: SearchState, step: StepView) -> ExpansionRequest:
    """What the expander is asked to make at this step (read from the state, so built where
    the state is: the expansion itself may then run on another thread)."""
    number, started = step.started.step, step.started
    idea = state.ideas[started.idea_id]
    return ExpansionRequest(
        repo_path=ctx.paths.repo,
        worktree_root=ctx.paths.worktrees,
        parent_sha=started.parent_sha,
        source_sha=started.repair_of,
        source_misses=state.failed_shares(started.repair_of) if started.repair_of else {},
        branch=step_branch(number),
        candidate_file=ctx.workload.candidate_file,
        idea=IdeaBrief(
            idea_id=idea.idea_id,
            text=idea.text,
            source=idea.source,
            targets=idea.targets,
            quality=idea.quality,
        ),
        constraints=operator_constraints(ctx, state),
        donor_shas=recombination_donors(state, started.parent_sha),
        frontier_sha=state.frontier_sha,
        step=number,
        context=ctx.context_for(state, started) if ctx.context_for else None,
        known_trees=[c.tree_sha for c in state.candidates.values()],
        seed=ctx.settings.seed * 1_000_003 + number,
        config_sizes=timed_sizes(ctx),
        settings_read={
            config: sorted(names)
            for config, names in state.settings_read.get(
                started.repair_of or started.parent_sha, {}
            ).items()
        },
    )


def operator_constraints(ctx: LoopContext, state: SearchState) -> list[str]:
    """The user's CONSTRAINTs, then the settings no screen of this run could judge in time
    (unmeasured.py): the expander is asked to leave both alone."""

    def read_source(sha: str) -> str | None:
        try:
            return read_file(ctx.repo, sha, ctx.workload.candidate_file)
        except git.GitCommandError:
            return None

    derived = forbid_lines(unmeasured_settings(state, read_source, timed_sizes(ctx)))
    return [*state.constraints, *(c for c in derived if c not in state.constraints)]


def timed_sizes(ctx: LoopContext) -> dict[str, dict[str, float]]:
    """What a dispatch predicate reads for each configuration the run times (oracle-only
    configurations are checked, never timed, so no regime is chosen for them)."""
    oracle_only = ctx.workload.oracle_only_ids()
    return {
        c: ctx.workload.dispatch_features(c)
        for c in ctx.config_set.config_ids
        if c not in oracle_only
    }


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
        ctx.caches.static,
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
            verdict_record(step.sha, Verdict.FAILED_STATIC, report.summary(), Stage.STATIC, details)
        )
    ctx.ledger.append_many(records)
    ctx.reporter.line(static_line(state, report))  # repeated findings are not printed again


def verdict_record(
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


def failed_verdict(sha: str, step: int, stage: Stage, result: EvaluationResult) -> VerdictRecord:
    verdict = FAILED_OUTCOMES[result.outcome]
    first_line = result.message.strip().splitlines()[0] if result.message.strip() else ""
    cause = result.reason.value if result.reason else result.outcome.value
    reason = f"{stage.value}: {cause}: {first_line}"
    # The judge's own step failed: infrastructure, never scored. A rejection timed under
    # contention keeps no taint here: it is still charged to the candidate.
    taint = list(result.taint) if result.judge_failed else []
    details = VerdictDetails(step=step, success=False, reject_reason=cause, taint=taint)
    return verdict_record(sha, verdict, reason, stage, details)
