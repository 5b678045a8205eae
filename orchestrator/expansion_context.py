"""What an LLM expansion is told, from the ledger: per-config tables of parent and frontier,
the parent's files, the frontier's diff, earlier attempts, the workload, the device, lessons."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import git

from agents.expander import ExpansionContext
from harness.models import share_text
from kernels.workload import Workload
from ledger import Ledger
from orchestrator.events import EvaluationSummary, EventKind, Stage, StepStarted
from orchestrator.state import SearchState, StepView
from orchestrator.workspace import read_sources

if TYPE_CHECKING:  # the loop context imports this module's builder
    from orchestrator.stages import LoopContext

# Share of the context budget each section may fill (the rest of a section is cut).
SHARES = {
    "parent_table": 0.10,
    "frontier_table": 0.08,
    "file_map": 0.04,
    "frontier_diff": 0.22,
    "attempts": 0.22,
    "workload_profile": 0.08,
    "device": 0.08,
    "lessons": 0.18,
}
ATTEMPTS = 6
LESSONS = 30


def cut(text: str, limit: int) -> str:
    """At most `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 60)].rstrip() + f"\n[... {len(text) - limit + 60} characters cut]"


def _sweeps(ledger: Ledger) -> dict[str, EvaluationSummary]:
    sweeps = {}
    for stored in ledger.events(kind=EventKind.EVALUATION.value):
        summary = EvaluationSummary.model_validate(stored.record.payload)
        if summary.stage is Stage.SWEEP:
            sweeps[summary.sha] = summary
    return sweeps


def _ratio(ratios: list[dict[str, object]], other: str) -> str:
    found = next((r for r in ratios if r.get("other") == other), None)
    if found is None:
        return "-"
    return f"{found['median']:.3f}x [{found['ci_low']:.3f}, {found['ci_high']:.3f}]"


def config_table(summary: EvaluationSummary | None) -> str:
    """A sweep's per-config correctness and paired ratios."""
    if summary is None:
        return "(no full sweep recorded)"
    rows = [
        "| config | correct | max abs err | tolerance used | x baseline | x parent |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for c in summary.configs:
        err = f"{c.max_abs_error:.2e}" if c.max_abs_error is not None else "-"
        used = share_text(c.tolerance_used) if c.tolerance_used is not None else "-"
        correct = "yes" if c.correct else f"NO ({c.failed_elements} failing)"
        rows.append(
            f"| {c.config_id} | {correct} | {err} | {used} | {_ratio(c.ratios, 'baseline')} | "
            f"{_ratio(c.ratios, 'parent')} |"
        )
    return "\n".join(rows)


@dataclass(frozen=True)
class ContextSources:
    """Where the context is read from."""

    ledger: Ledger
    repo: git.Repo
    budget_chars: int
    device: str  # what the device section says (figures, roofline floors)
    workload_profile: str


def _file_map(repo: git.Repo, sha: str) -> str:
    sources = read_sources(repo, sha)
    return "\n".join(f"{path}  {len(text.splitlines())} lines" for path, text in sources.items())


def _diff(repo: git.Repo, parent: str, frontier: str | None) -> str:
    if frontier is None or frontier == parent:
        return "(the parent is the frontier)"
    return str(repo.git.diff(parent, frontier)) or "(no difference in files)"


def _attempt(state: SearchState, step: StepView, repo: git.Repo) -> str:
    started = step.started
    head = f"- step {started.step}: idea {started.idea_id} on {started.parent_sha[:10]}"
    if step.expansion_failed is not None and step.sha is None:
        failed = step.expansion_failed
        return f"{head}: no candidate ({failed.outcome}): {failed.message[:300]}"
    if step.sha is None:
        return f"{head}: in progress"
    cand = state.candidates[step.sha]
    stat = str(repo.git.diff("--shortstat", started.parent_sha, step.sha)).strip()
    verdict = cand.verdict.value if cand.verdict else "not judged yet"
    reason = ""
    if step.static is not None and not step.static.passed:
        reason = "; ".join(str(f.get("message", "")) for f in step.static.findings[:3])
    elif step.sweep is not None or step.screen is not None:
        evaluation = step.sweep or step.screen
        assert evaluation is not None
        reason = evaluation.message.strip().splitlines()[-1][:300] if evaluation.message else ""
    title = cand.message.splitlines()[0][:120] if cand.message else ""
    objective = f", {cand.objective:.3f}x over baseline" if cand.objective else ""
    return f"{head}: {step.sha[:10]} '{title}' ({stat}): {verdict}{objective}. {reason}".rstrip()


def _attempts(state: SearchState, started: StepStarted, repo: git.Repo) -> str:
    """Steps on the same parent, with the same idea, or the one that made the parent."""
    parent_step = (
        state.candidates[started.parent_sha].step
        if started.parent_sha in state.candidates
        else None
    )
    related = [
        step
        for number, step in sorted(state.steps.items())
        if number != started.step
        and (
            step.started.parent_sha == started.parent_sha
            or step.started.idea_id == started.idea_id
            or number == parent_step
        )
    ]
    lines = [_attempt(state, step, repo) for step in related[-ATTEMPTS:]]
    return "\n".join(lines) or "(none yet: this is the first attempt on this parent and idea)"


def _lessons(state: SearchState) -> str:
    lessons = state.lessons[-LESSONS:]
    return "\n".join(f"- (step {n.step}, {n.agent}) {n.text}" for n in lessons) or "(empty)"


def build_context(
    sources: ContextSources, state: SearchState, started: StepStarted
) -> ExpansionContext:
    """Every section, each cut to its share of the budget."""
    sweeps = _sweeps(sources.ledger)
    frontier = state.frontier_sha
    sections = {
        "parent_table": config_table(sweeps.get(started.parent_sha)),
        "frontier_table": config_table(sweeps.get(frontier)) if frontier else "(no frontier)",
        "file_map": _file_map(sources.repo, started.parent_sha),
        "frontier_diff": _diff(sources.repo, started.parent_sha, frontier),
        "attempts": _attempts(state, started, sources.repo),
        "workload_profile": sources.workload_profile,
        "device": sources.device,
        "lessons": _lessons(state),
    }
    return ExpansionContext(
        **{
            name: cut(text, int(sources.budget_chars * SHARES[name]))
            for name, text in sections.items()
        }
    )


def device_section(workload: Workload, config_ids: list[str], report: dict[str, Any]) -> str:
    """The device's qualification figures and each config's roofline floor (FLOPs over the
    measured matmul rate, bytes over the measured copy bandwidth, whichever is larger)."""
    figures = ", ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in report.items()
    )
    flops_rate = float(report.get("matmul_flops_per_s") or 0.0)
    bandwidth = float(report.get("copy_bytes_per_s") or 0.0)
    lines = [f"measured: {figures}" if figures else "measured: (no qualification yet)"]
    if flops_rate > 0 and bandwidth > 0:
        runtime = workload.load_runtime()
        lines += ["| config | GFLOP | MB moved | floor us |", "|---|---:|---:|---:|"]
        for config_id in config_ids:
            flops, moved = runtime.cost(workload.configs[config_id])
            floor = max(flops / flops_rate, moved / bandwidth) * 1e6
            lines.append(f"| {config_id} | {flops / 1e9:.3f} | {moved / 1e6:.2f} | {floor:.2f} |")
    return "\n".join(lines)


def workload_profile(workload: Workload, config_ids: list[str], inspector_ideas: list[str]) -> str:
    """The run's configurations and what the workload inspector said about them."""
    lines = [f"{workload.name}: {workload.description}", f"baseline: {workload.baseline}"]
    for config_id in config_ids:
        fields = workload.configs[config_id].model_dump()
        lines.append(f"- config {config_id}: " + ", ".join(f"{k}={v}" for k, v in fields.items()))
    if inspector_ideas:
        lines.append("workload inspector:")
        lines += [f"- {text}" for text in inspector_ideas]
    return "\n".join(lines)


def context_builder(
    ctx: LoopContext,
) -> Callable[[SearchState, StepStarted], ExpansionContext]:
    """The loop's context_for: sources read afresh at every expansion."""

    def build(state: SearchState, started: StepStarted) -> ExpansionContext:
        ids = list(ctx.config_set.config_ids)
        report = dict((state.qualification or {}).get("report", {}))
        inspector = [i.text for i in state.ideas.values() if i.source == "inspector"]
        sources = ContextSources(
            ledger=ctx.ledger,
            repo=ctx.repo,
            budget_chars=ctx.settings.llm_context_chars,
            device=device_section(ctx.workload, ids, report),
            workload_profile=workload_profile(ctx.workload, ids, inspector),
        )
        return build_context(sources, state, started)

    return build
