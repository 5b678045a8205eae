"""Failures a child inherited: configs its change cannot reach, failed on inputs its parent fails.

A child of the offline operator or the composer differs from its parent only in its settings.
Where the settings it runs a configuration with are the parent's, or differ only in tunables
the parent's code never read there (its recorder's report), the child runs the parent's code
exactly. When it fails such a configuration, the failure is the parent's: on the H200 (run 9,
steps 16 and 21; run 10, step 11) children that changed another regime failed the
frontier's own config-6 regime by one element on fresh inputs, and the idea was blamed while
the frontier stood. The parent is judged again on the very inputs that failed; if it fails
them, a frontier is demoted (the previous one stands again) and the child's idea is not
charged with the failure.
"""

from __future__ import annotations

import enum
import secrets
from pathlib import Path
from typing import Any

from agents.regimes import changed_settings
from agents.tunables import TunablesError
from harness.models import EvaluationRequest, EvaluationResult, Outcome
from kernels.workload import TrialSpec
from orchestrator.evaluation import commit_arm, judge
from orchestrator.events import EvaluationSummary, EventKind, FrontierDemoted, InheritedCheck
from orchestrator.screen_scope import same_code_sources
from orchestrator.stages import LoopContext, timed_sizes
from orchestrator.state import CHECK_ATTEMPTS, SearchState, StepView
from search import Verdict

# Only the newest closed steps are looked at: a step is checked right after it closes, and
# older failures of a frontier's children were looked at then.
RECENT_STEPS = 8


def _failed_evaluation(step: StepView) -> EvaluationSummary | None:
    for summary in (step.sweep, step.screen):
        if summary is not None and any(not c.correct for c in summary.configs):
            return summary
    return None


def inherited_configs(ctx: LoopContext, state: SearchState, step: StepView) -> dict[str, TrialSpec]:
    """The configs the step's child failed while running its parent's code there, each with
    the inputs of its first failing trial ({} when there are none, or it cannot be told)."""
    summary, child = _failed_evaluation(step), step.sha
    parent = step.started.parent_sha
    sources = None if summary is None or child is None else same_code_sources(ctx, parent, child)
    if summary is None or sources is None:
        return {}
    try:
        changed = changed_settings(*sources, timed_sizes(ctx))
    except (TunablesError, SyntaxError):
        return {}
    if changed is None:
        return {}
    read = state.settings_read.get(parent, {})
    inherited = {}
    for config in summary.configs:
        names = changed.get(config.config_id)
        if config.correct or config.failed_trial is None or names is None:
            continue
        if not names or (config.config_id in read and not names & read[config.config_id]):
            inherited[config.config_id] = config.failed_trial
    return inherited


def inherited_check_due(
    ctx: LoopContext, state: SearchState
) -> tuple[StepView, dict[str, TrialSpec]] | None:
    """A recently failed child of the frontier with failures that are the frontier's own to
    check, and which ones (None: nothing to check)."""
    frontier = state.frontier_sha
    if frontier is None or not ctx.settings.check_inherited_failures:
        return None
    for number in sorted(state.steps, reverse=True)[:RECENT_STEPS]:
        step = state.steps[number]
        if number in state.inherited_checked or step.started.parent_sha != frontier:
            continue
        if step.verdict is not Verdict.FAILED_CORRECTNESS:
            continue
        key = (number, str(step.sha))
        if key not in ctx.caches.inherited:  # commits never change: read them once
            ctx.caches.inherited[key] = inherited_configs(ctx, state, step)
        configs = ctx.caches.inherited[key]
        if configs:
            return step, configs
    return None


def check_inherited(
    ctx: LoopContext, step: StepView, configs: dict[str, TrialSpec]
) -> InheritedCheck:
    """Judge the parent on the inputs its child failed with its code; demote the parent
    (the frontier) when it fails them too."""
    parent, child = step.started.parent_sha, str(step.sha)
    number = step.started.step
    trials = list({t.model_dump_json(): t for t in configs.values()}.values())
    where = ", ".join(sorted(configs))
    ctx.reporter.line(
        f"  step {number} failed config(s) {where} with its parent's code there: judging the "
        f"parent {parent[:10]} on the same inputs"
    )
    work = ctx.paths.evals / f"step-{number:05d}-inherited"
    judged = _judge_inputs(ctx, (parent, f"inherited-{number}"), sorted(configs), trials, work)
    check = InheritedCheck(
        step=number,
        child_sha=child,
        parent_sha=parent,
        configs=sorted(configs),
        trials=trials,
        **_judge_said(judged),
    )
    reason = (
        f"fails config(s) {where} on the inputs its child {child[:10]} (step {number}) "
        f"failed there with its code: {check.message[:300]}"
    )
    said = _outcome_line(check, "the failure stays the child's")
    _record_check(ctx, check, reason, f"  inherited check: {parent[:10]} {said}")
    return check


def frontier_recheck_due(
    ctx: LoopContext, state: SearchState
) -> tuple[str, dict[int, tuple[str, list[str], list[TrialSpec]]]] | None:
    """The frontier and the inputs that demoted earlier frontiers which it was not judged on
    yet (None: nothing to check). A frontier that stands again after a demotion, or a later
    one built on it, may run the demoted code on those configs: on an H100 (run 20) three
    demotions in a row each restored a frontier with the same failing config-6 code, and
    it was exported."""
    frontier = state.frontier_sha
    if frontier is None or not ctx.settings.check_inherited_failures:
        return None
    seen = state.rechecked.get(frontier, set())
    due = {
        step: inputs
        for step, inputs in state.demotion_inputs.items()
        if step not in seen and inputs[0] != frontier
    }
    return (frontier, due) if due else None


def recheck_frontier(
    ctx: LoopContext, frontier: str, due: dict[int, tuple[str, list[str], list[TrialSpec]]]
) -> InheritedCheck:
    """Judge the frontier on the inputs that demoted earlier ones; demote it when it fails."""
    steps = sorted(due)
    configs = sorted({config for _, names, _ in due.values() for config in names})
    trials = list({t.model_dump_json(): t for *_, ts in due.values() for t in ts}.values())
    demoted = due[steps[-1]][0]
    where = ", ".join(configs)
    ctx.reporter.line(
        f"  frontier {frontier[:10]}: judged on the inputs of config(s) {where} that demoted "
        f"{len(steps)} earlier frontier(s) (checks of steps {', '.join(map(str, steps))})"
    )
    work = ctx.paths.evals / f"step-{steps[-1]:05d}-recheck-{frontier[:10]}"
    judged = _judge_inputs(ctx, (frontier, f"recheck-{steps[-1]}"), configs, trials, work)
    check = InheritedCheck(
        step=steps[-1],
        child_sha=demoted,
        parent_sha=frontier,
        configs=_failed_configs(judged) or configs,
        trials=trials,
        recheck_of=steps,
        **_judge_said(judged),
    )
    reason = (
        f"fails config(s) {where} on the inputs that demoted {demoted[:10]} (step "
        f"{steps[-1]}'s check): {check.message[:300]}"
    )
    said = _outcome_line(check, "it stands")
    _record_check(ctx, check, reason, f"  frontier recheck: {frontier[:10]} {said}")
    return check


class RegressionStatus(enum.StrEnum):
    """What a candidate did on the inputs that demoted earlier frontiers of its run."""

    PASSED = "passed"
    FAILED = "failed"
    UNANSWERED = "unanswered"  # its checks ran, the judge never answered: unchecked on them
    NOT_JUDGED = "not judged"
    NONE_RECORDED = "none recorded"


def regression_status(state: SearchState, sha: str) -> RegressionStatus:
    """The candidate's standing on the inputs that demoted other frontiers (a frontier is
    judged on them before the run stops; one exported earlier may not have been)."""
    if sha in state.inherited_misses:
        return RegressionStatus.FAILED
    due = {step for step, inputs in state.demotion_inputs.items() if inputs[0] != sha}
    if not due:
        return RegressionStatus.NONE_RECORDED
    if not due <= state.rechecked.get(sha, set()):
        return RegressionStatus.NOT_JUDGED
    unanswered = any(
        judged == sha and runs >= CHECK_ATTEMPTS
        for (judged, _), runs in state.unanswered_checks.items()
    )
    return RegressionStatus.UNANSWERED if unanswered else RegressionStatus.PASSED


def said_nothing(result: EvaluationResult) -> bool:
    """The judge's run says nothing of the candidate: no device, the judge's own step failed,
    or the run was cut by its time limit (infrastructure, never held against the candidate)."""
    return result.judge_failed or result.outcome in (Outcome.NO_RUN, Outcome.TIMEOUT)


def failed_check(result: EvaluationResult) -> bool:
    """The judged candidate failed the inputs: wrong there, or its own code raised, did not
    compile, returned nothing or was refused by the judge on them. Only a pass and what says
    nothing of it (said_nothing) leave it standing: code that crashes on inputs a run has
    drawn is no more correct on them than code that is wrong there."""
    return result.outcome is not Outcome.PASSED and not said_nothing(result)


def _judge_said(judged: EvaluationResult) -> dict[str, Any]:
    """An InheritedCheck's fields that come from its judge run."""
    return {
        "outcome": judged.outcome.value,
        "parent_failed": failed_check(judged),
        "message": judged.message.strip()[:500],
        "infrastructure": said_nothing(judged),
    }


def _outcome_line(check: InheritedCheck, passed: str) -> str:
    """What the run's log says of the check's outcome (``passed``: when the judged one stands
    on an answer that is not a failure)."""
    if check.parent_failed:
        how = "" if check.outcome == Outcome.INCORRECT.value else f" ({check.outcome})"
        return f"fails them too{how}: demoted, the previous frontier stands"
    if check.infrastructure:
        return (
            f"{check.outcome} ({check.message[:120]}): says nothing of it, which stands; the "
            f"check runs again, up to {CHECK_ATTEMPTS} such runs in all"
        )
    return f"{check.outcome}: {passed}"


def _failed_configs(result: EvaluationResult) -> list[str]:
    """The configs with a failing trial: what a failed recheck holds against the frontier
    (the composition keeps it out of those configs only)."""
    return sorted(c.config_id for c in result.configs if any(not t.passed for t in c.trials))


def _judge_inputs(
    ctx: LoopContext,
    judged: tuple[str, str],
    configs: list[str],
    trials: list[TrialSpec],
    work: Path,
) -> EvaluationResult:
    """One judge run of a candidate's correctness on exactly these inputs, no timing
    (``judged``: its sha and the evaluation's label)."""
    sha, label = judged
    request = EvaluationRequest(
        evaluation_id=f"{sha}:{label}",
        workload=ctx.judging.workload_ref,
        device=ctx.device,
        config_ids=configs,
        arms=[commit_arm(ctx.judging, "candidate", sha, work)],
        trials=trials,
        timing=None,
        seed=secrets.randbelow(2**31),
        torch_threads=ctx.judging.torch_threads,
        device_peaks=ctx.judging.device_peaks,
    )
    check = "inherited check" if label.startswith("inherited") else "frontier recheck"
    return judge(ctx.judging, request, work, f"{check} of {sha[:10]}")


def _record_check(ctx: LoopContext, check: InheritedCheck, reason: str, line: str) -> None:
    """The check, and the judged candidate's demotion when it failed, in one transaction."""
    records = [check.to_event(EventKind.INHERITED_CHECK)]
    if check.parent_failed:
        demotion = FrontierDemoted(sha=check.parent_sha, reason=reason)
        records.append(demotion.to_event(EventKind.FRONTIER_DEMOTED))
    ctx.ledger.append_many(records)
    ctx.reporter.line(line)
