"""Feasibility: a frontier judged on its config set's untimed configs before it ships as one."""

from __future__ import annotations

import secrets

from harness.models import EvaluationRequest, Outcome, share_text
from harness.trials import correctness_trials, new_salt
from orchestrator.evaluation import commit_arm, judge, tolerance_used
from orchestrator.events import EventKind, FeasibilityChecked
from orchestrator.stages import LoopContext
from orchestrator.state import SearchState

# The first official trial and the first salted (padded) one: each trial of a 100k-token
# config is a forward and a float64 oracle pass of minutes, not milliseconds.
FEASIBILITY_TRIALS = 2


def message_ends(message: str, tail_chars: int = 2500) -> str:
    """The first line (what failed) and the end (where the exception is) of a long message:
    run 18's first 500 characters cut off the exception that said the judge ran out of
    memory, not the candidate."""
    text = message.strip()
    if len(text) <= tail_chars + 200:
        return text
    first = text.splitlines()[0][:200]
    return f"{first}\n[...]\n{text[-tail_chars:]}"


def feasibility_due(ctx: LoopContext, state: SearchState) -> str | None:
    """The frontier, when the config set has feasibility configs it was never judged on."""
    sha = state.frontier_sha
    if not ctx.settings.check_feasibility or not ctx.config_set.feasibility_ids:
        return None
    return sha if sha is not None and sha not in state.feasibility else None


def check_feasibility(ctx: LoopContext, sha: str) -> FeasibilityChecked:
    """Judge the candidate on the feasibility configs (correctness against the workload's
    oracle, no timing) and record what it got."""
    configs = list(ctx.config_set.feasibility_ids)
    work = ctx.paths.evals / f"feasibility-{sha[:12]}"
    trials = correctness_trials(ctx.workload.official_trials[:1], new_salt())
    request = EvaluationRequest(
        evaluation_id=f"{sha}:feasibility",
        workload=ctx.judging.workload_ref,
        device=ctx.device,
        config_ids=configs,
        arms=[commit_arm(ctx.judging, "candidate", sha, work)],
        judged_arm="candidate",
        trials=trials[:FEASIBILITY_TRIALS],
        oracle_config_ids=configs,
        timing=None,
        seed=secrets.randbelow(2**31),
        torch_threads=ctx.judging.torch_threads,
        device_peaks=ctx.judging.device_peaks,
    )
    ctx.reporter.line(f"feasibility of the frontier {sha[:10]} on configs {', '.join(configs)}")
    result = judge(ctx.judging, request, work, f"feasibility of {sha[:10]}")
    checked = FeasibilityChecked(
        sha=sha,
        configs=configs,
        passed=result.outcome is Outcome.PASSED,
        outcome=result.outcome.value,
        message=message_ends(result.message),
        infrastructure=result.judge_failed,
        wall_s=result.wall_s,
        elements=sum(t.total_elements for c in result.configs for t in c.trials),
        failed_elements=sum(t.failed_elements for c in result.configs for t in c.trials),
        tolerance_used=max(tolerance_used(result).values(), default=None),
    )
    ctx.ledger.append(checked.to_event(EventKind.FEASIBILITY))
    first_line = (checked.message.splitlines() or [""])[0]
    verdict = "passed" if checked.passed else f"FAILED ({first_line})"
    if checked.infrastructure:
        verdict = f"not checked: {'; '.join(result.taint)} (infrastructure; checked again)"
    used = checked.tolerance_used
    worst = f", the worst used {share_text(used)} of its tolerance" if used is not None else ""
    ctx.reporter.line(
        f"  feasibility: {verdict}; {checked.failed_elements:,} of {checked.elements:,} "
        f"elements outside the tolerance{worst} ({checked.wall_s:.1f} s)"
    )
    return checked
