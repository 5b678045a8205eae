"""`ratchet status`: where a run stands, as a typed report (JSON) or text."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from harness.models import share_text
from ledger import Ledger, VerifyReport
from orchestrator.provenance import FrontierGain, format_gains, frontier_gains
from orchestrator.state import CandidateView, SearchState, derive_state
from orchestrator.taint import TaintSummary, describe_taint, taint_summary
from orchestrator.throughput import RunTime, format_run_time, run_time
from orchestrator.unmeasured import left_alone
from search import IdeaArm, PriorStrength, Verdict, posterior_parameters

CANDIDATES_SHOWN = 10  # rows of the candidates table unless --candidates says otherwise


class IdeaStatus(BaseModel):
    """One idea arm and what it has done."""

    id: str = Field(description="Idea id.")
    text: str = Field(description="The idea in words.")
    source: str = Field(description="'library' or 'human'.")
    author: str = Field(description="Who proposed it.")
    trials: int = Field(description="Experiments that used it.")
    successes: int = Field(description="Of which measurably faster than their parent.")
    quality: float = Field(description="Rubric score q (PRIORITY may have changed it).")
    uncertainty: float = Field(description="Rubric uncertainty H.")
    posterior_mean: float = Field(description="Mean of its Beta posterior.")


class FrontierStatus(BaseModel):
    """The best candidate so far."""

    sha: str = Field(description="Commit of the frontier candidate.")
    speedup: float | None = Field(description="Objective vs the baseline (e.g. geomean).")
    objective_kind: str | None = Field(description="Which aggregate 'speedup' is.")
    step: int = Field(description="Step that produced it (0: the seed).")
    idea_id: str | None = Field(description="Idea behind it.")
    per_config_speedup: dict[str, float] = Field(description="Uncapped per-config speedups.")
    per_config_tolerance_used: dict[str, float] = Field(
        default_factory=dict,
        description="Per config, the largest share of its tolerance any element of its sweep "
        "used (near 1: a pass a fresh input may undo; empty when not reported).",
    )
    vs_baseline: dict[str, float] | None = Field(description="Paired aggregate ratio and CI.")


class MessageStatus(BaseModel):
    """An injected message."""

    seq: int = Field(description="Ledger position.")
    kind: str = Field(description="IDEA, CONSTRAINT, PRIORITY, LITERATURE, REDIRECT or RETRACT.")
    text: str = Field(description="As written.")
    author: str = Field(description="Who injected it.")
    created_at: str = Field(description="When.")
    retracted_by: int | None = Field(
        default=None, description="Seq of the RETRACT that withdrew it (None: in force)."
    )


class CandidateStatus(BaseModel):
    """One row of the candidates table: a candidate, its verdict and its speed."""

    sha: str = Field(description="Commit of the candidate.")
    step: int = Field(description="Step that produced it (0: the seed).")
    parent_sha: str | None = Field(description="Declared parent commit (None: the seed).")
    idea_id: str | None = Field(description="Idea it implements.")
    verdict: str | None = Field(description="Its verdict (a Verdict value; None: not judged yet).")
    stage: str | None = Field(description="Stage that decided it: static, screen or sweep.")
    reason: str = Field(description="Why, in words.")
    objective: float | None = Field(
        description="Objective vs the baseline (the run's aggregate; None: not fully measured)."
    )
    vs_parent: float | None = Field(description="Median speed ratio vs its declared parent.")
    tainted: bool = Field(description="Judged from a sweep measured under contention.")
    frontier: bool = Field(description="It is the frontier now.")
    demoted: bool = Field(description="Promoted once, then its claim did not replicate.")


class StatusReport(BaseModel):
    """`ratchet status --json`."""

    run_dir: str = Field(description="The run directory.")
    workload: str | None = Field(description="Workload searched.")
    device: str | None = Field(description="Device judged on.")
    config_set: str | None = Field(description="Config set searched.")
    baseline: str | None = Field(description="Exactly what 'speedup' is measured against.")
    candidates: int = Field(description="Candidates in the ledger, the seed included.")
    steps: int = Field(description="Search steps started.")
    promoted: int = Field(description="Promotions to the frontier (the seed not counted).")
    verdicts: dict[str, int] = Field(description="Count of each verdict.")
    expansions_failed: int = Field(description="Steps whose expander committed nothing.")
    open_step: int | None = Field(description="A step in progress (resumed on restart).")
    frontier: FrontierStatus | None = Field(description="The best candidate so far.")
    ideas: list[IdeaStatus] = Field(description="Idea arms and their outcomes.")
    messages: list[MessageStatus] = Field(description="Injected messages in order.")
    constraints: list[str] = Field(description="CONSTRAINTs in force.")
    left_alone: list[str] = Field(
        default_factory=list,
        description="Settings the operator leaves alone beyond the CONSTRAINTs, as 'forbid "
        "TUNABLE=VALUE': what candidates cut twice changed (orchestrator/unmeasured.py).",
    )
    taint: TaintSummary = Field(description="Full sweeps measured under contention, and why.")
    noise_floor: float | None = Field(description="Calibrated A/A floor the promotions use.")
    noise_by_class: dict[str, float] = Field(description="A/A excursion per config class.")
    device_peaks: dict[str, float] = Field(description="Measured by qualification.")
    llm_calls: int = Field(description="LLM calls recorded (all agents).")
    llm_usd: float = Field(description="What they cost.")
    verifications: dict[str, str] = Field(description="Verifier verdict per frontier sha.")
    demoted: list[str] = Field(description="Frontiers whose claim did not replicate.")
    best_candidates: list[CandidateStatus] = Field(
        default_factory=list,
        description="The frontier and the best other candidates, promoted or not, by objective "
        "(unmeasured ones last); as many as asked for.",
    )
    gains: list[FrontierGain] = Field(
        default_factory=list,
        description="Steps from the seed to the frontier: discovered by the search or by hand.",
    )
    run_time: RunTime | None = Field(
        default=None,
        description="The run's wall time over its invocations, what it went to, and the "
        "candidates per hour it bought (None: no run started yet).",
    )
    ledger_entries: int = Field(description="Entries in the hash chain.")
    ledger_head: str = Field(description="Hash of the last entry.")
    ledger_verified: bool | None = Field(
        default=None,
        description="Whether the chain checked out (incrementally from the last verified head) "
        "before this report was built; None when it was not checked.",
    )
    ledger_problem: str | None = Field(
        default=None, description="What does not verify, when ledger_verified is false."
    )


def _frontier(state: SearchState) -> FrontierStatus | None:
    if state.frontier_sha is None:
        return None
    cand = state.candidates[state.frontier_sha]
    return FrontierStatus(
        sha=cand.sha,
        speedup=cand.objective,
        objective_kind=cand.details.get("objective_kind"),
        step=cand.step,
        idea_id=cand.idea_id,
        per_config_speedup=cand.details.get("per_config_speedup", {}),
        per_config_tolerance_used=cand.details.get("per_config_tolerance_used", {}),
        vs_baseline=cand.details.get("vs_baseline"),
    )


def _ideas(state: SearchState) -> list[IdeaStatus]:
    settings = state.run.settings if state.run else {}
    strength = PriorStrength(k_min=settings.get("k_min", 2.0), k_max=settings.get("k_max", 20.0))
    out = []
    for idea in state.ideas.values():
        arm = IdeaArm(
            idea_id=idea.idea_id,
            quality=idea.quality,
            uncertainty=idea.uncertainty,
            successes=idea.successes,
            failures=idea.failures,
            order=idea.order,
        )
        alpha, beta = posterior_parameters(arm, strength)
        out.append(
            IdeaStatus(
                id=idea.idea_id,
                text=idea.text,
                source=idea.source,
                author=idea.author,
                trials=idea.trials,
                successes=idea.successes,
                quality=idea.quality,
                uncertainty=idea.uncertainty,
                posterior_mean=alpha / (alpha + beta),
            )
        )
    return out


def _candidate_row(state: SearchState, cand: CandidateView) -> CandidateStatus:
    vs_parent = cand.details.get("vs_parent")
    return CandidateStatus(
        sha=cand.sha,
        step=cand.step,
        parent_sha=cand.parent_sha,
        idea_id=cand.idea_id,
        verdict=cand.verdict.value if cand.verdict else None,
        stage=cand.verdict_stage,
        reason=cand.reason,
        objective=cand.objective,
        vs_parent=float(vs_parent["median"]) if vs_parent else None,
        tainted=cand.tainted,
        frontier=cand.sha == state.frontier_sha,
        demoted=cand.sha in state.demoted,
    )


def best_candidates(state: SearchState, limit: int) -> list[CandidateStatus]:
    """The frontier and the best candidates by objective (unmeasured last, then newest first),
    `limit` in all: what a user compares the frontier with, rejected ones included."""
    if limit <= 0:
        return []
    ranked = sorted(
        state.candidates.values(),
        key=lambda c: (
            c.sha != state.frontier_sha,
            c.objective is None,
            -(c.objective or 0.0),
            -c.step,
        ),
    )
    return [_candidate_row(state, cand) for cand in ranked[:limit]]


def build_status(
    run_dir: Path,
    ledger: Ledger,
    chain: VerifyReport | None = None,
    candidates: int = CANDIDATES_SHOWN,
) -> StatusReport:
    """Everything `ratchet status` shows, derived from the ledger (and the chain check's
    outcome, when one was made); `candidates` rows in the candidates table."""
    state = derive_state(ledger)
    run = state.run
    verdicts = Counter(c.verdict.value for c in state.candidates.values() if c.verdict)
    promoted = sum(
        1
        for c in state.candidates.values()
        if c.verdict is Verdict.PROMOTED and c.parent_sha is not None
    )
    head_seq, head_hash = ledger.head()
    open_step = state.open_step
    return StatusReport(
        run_dir=str(run_dir),
        workload=run.workload if run else None,
        device=run.device if run else None,
        config_set=run.config_set if run else None,
        baseline=run.baseline if run else None,
        candidates=len(state.candidates),
        steps=len(state.steps),
        promoted=promoted,
        verdicts=dict(verdicts),
        expansions_failed=sum(
            1 for s in state.steps.values() if s.expansion_failed and s.sha is None
        ),
        open_step=open_step.started.step if open_step else None,
        frontier=_frontier(state),
        ideas=_ideas(state),
        messages=[
            MessageStatus(
                seq=m.seq,
                kind=m.record.kind,
                text=m.record.text,
                author=m.record.author,
                created_at=m.created_at,
                retracted_by=state.retracted.get(m.seq),
            )
            for m in ledger.messages()
        ],
        constraints=state.constraints,
        left_alone=left_alone(run_dir, state),
        taint=taint_summary(ledger),
        noise_floor=state.noise_floor(run.config_set) if run else None,
        noise_by_class=dict(state.noise_floors.get(run.config_set, {}).get("classes", {}))
        if run
        else {},
        device_peaks={
            k: float(v)
            for k, v in (state.qualification or {}).get("report", {}).items()
            if isinstance(v, int | float)
        },
        llm_calls=state.llm_calls,
        llm_usd=state.llm_usd,
        verifications=state.verifications,
        demoted=sorted(state.demoted),
        best_candidates=best_candidates(state, candidates),
        gains=frontier_gains(state),
        run_time=run_time(ledger.events(), len(state.candidates)) if run else None,
        ledger_entries=head_seq,
        ledger_head=head_hash,
        ledger_verified=None if chain is None else chain.ok,
        ledger_problem=None if chain is None else chain.problem,
    )


def format_config_speedups(speedups: dict[str, float], used: dict[str, float]) -> list[str]:
    """One line per config: its speedup, and how much of the tolerance its worst element used
    (a pass at 98% is one fresh input away from failing)."""
    lines = []
    for cid, value in speedups.items():
        share = f"  (tolerance used {share_text(used[cid])})" if cid in used else ""
        lines.append(f"    config {cid:>8}: {value:.3f}x{share}")
    return lines


def format_status(report: StatusReport) -> str:
    """Human-readable status."""
    lines = [
        f"run {report.run_dir}: {report.workload} on {report.device}, configs {report.config_set}",
        f"baseline: {report.baseline}",
        f"steps {report.steps}, candidates {report.candidates}, promoted {report.promoted}, "
        f"failed expansions {report.expansions_failed}"
        + (f", step {report.open_step} in progress" if report.open_step else ""),
        "verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(report.verdicts.items())),
    ]
    if report.frontier:
        f = report.frontier
        speed = f"{f.speedup:.3f}x" if f.speedup is not None else "n/a"
        lines.append(
            f"frontier {f.sha[:10]} (step {f.step}, idea {f.idea_id}): {speed} {f.objective_kind}"
        )
        lines.extend(format_config_speedups(f.per_config_speedup, f.per_config_tolerance_used))
        lines.extend(format_gains(report.gains))
    lines.extend(format_candidates(report.best_candidates, report.candidates))
    lines.append("ideas (trials/successes, posterior mean):")
    for idea in sorted(report.ideas, key=lambda i: -i.posterior_mean):
        lines.append(
            f"    {idea.id:<24} {idea.trials:>3}/{idea.successes:<3} {idea.posterior_mean:.2f}  "
            f"[{idea.source}] {idea.text[:60]}"
        )
    for m in report.messages:
        withdrawn = f" (retracted by #{m.retracted_by})" if m.retracted_by else ""
        lines.append(f"message #{m.seq} {m.kind} by {m.author}: {m.text[:70]}{withdrawn}")
    lines.extend(describe_taint(report.taint, "in this run"))
    if report.left_alone:
        settings = ", ".join(line.removeprefix("forbid ") for line in report.left_alone)
        lines.append(f"left alone (candidates changing them were cut twice): {settings}")
    if report.llm_calls:
        lines.append(f"LLM: {report.llm_calls} calls, ${report.llm_usd:.2f}")
    for sha, verdict in report.verifications.items():
        lines.append(f"verifier: {sha[:10]} {verdict}")
    if report.run_time is not None:
        lines.append(format_run_time(report.run_time))
    if report.noise_floor is not None:
        classes = ", ".join(f"{k} {v:.2%}" for k, v in report.noise_by_class.items())
        lines.append(f"noise floor {report.noise_floor:.2%} (A/A by config class: {classes})")
    checked = "" if report.ledger_verified is None else " (verified)"
    if report.ledger_verified is False:
        checked = " (NOT VERIFIED)"
    lines.append(
        f"ledger: {report.ledger_entries} entries, head "
        f"{report.ledger_entries}:{report.ledger_head}{checked}"
    )
    warning = chain_warning(report)
    return "\n".join([warning, *lines, warning] if warning else lines)


def _ratio(value: float | None) -> str:
    return f"{value:.3f}x" if value is not None else "-"


def format_candidates(rows: list[CandidateStatus], total: int) -> list[str]:
    """The candidates table: one line per candidate, the frontier marked '*'."""
    if not rows:
        return []
    lines = [
        f"candidates (the frontier, then the best by objective; {len(rows)} of {total}):",
        f"    {'sha':<10} {'step':>4} {'parent':<10} {'idea':<18} {'verdict':<18} "
        f"{'x baseline':>10} {'x parent':>9}  taint",
    ]
    for row in rows:
        mark = "*" if row.frontier else " "
        verdict = (row.verdict or "not judged") + (" (demoted)" if row.demoted else "")
        parent, idea = (row.parent_sha or "-")[:10], (row.idea_id or "-")[:18]
        lines.append(
            f"  {mark} {row.sha[:10]:<10} {row.step:>4} {parent:<10} {idea:<18} "
            f"{verdict:<18} {_ratio(row.objective):>10} {_ratio(row.vs_parent):>9}  "
            f"{'tainted' if row.tainted else ''}".rstrip()
        )
    return lines


def chain_warning(report: StatusReport) -> str | None:
    """The loud line a status whose ledger does not verify starts and ends with."""
    if report.ledger_verified is not False:
        return None
    return (
        f"WARNING: the ledger's hash chain does NOT verify: {report.ledger_problem}. Nothing "
        f"in this status can be trusted; run 'ratchet ledger verify --run-dir {report.run_dir}'"
    )
