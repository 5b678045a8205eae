"""When the researcher and the workload inspector run, and how their ideas enter the ledger."""

from __future__ import annotations

import git

from agents.inspector import inspect_workload
from agents.llm.conversation import LLMError
from agents.proposals import ScoredIdea
from agents.researcher import IdeaOutcome, research
from ledger import Record
from orchestrator.events import AgentRun, EventKind, IdeaRegistered, LLMCallEvent
from orchestrator.stages import LoopContext
from orchestrator.state import SearchState


def drain_llm_calls(ctx: LoopContext, step: int) -> None:
    """Write every LLM call made since the last drain to the ledger."""
    if ctx.llm is None:
        return
    records: list[Record] = [
        LLMCallEvent(step=step, **call.model_dump()).to_event(EventKind.LLM_CALL)
        for call in ctx.llm.drain()
    ]
    if records:
        ctx.ledger.append_many(records)


def _register(prefix: str, source: str, ideas: list[ScoredIdea]) -> list[Record]:
    return [
        IdeaRegistered(
            idea_id=f"{prefix}-{i}",
            text=idea.text,
            source=source,
            quality=idea.quality,
            uncertainty=idea.uncertainty,
            targets={},
            devices=["cpu", "cuda"],
        ).to_event(EventKind.IDEA_REGISTERED)
        for i, idea in enumerate(ideas)
    ]


MAX_NOTES = 8000


def repository_notes(ctx: LoopContext, sha: str | None) -> str:
    """The markdown and text notes of the frontier's tree (an LLM expander may keep some)."""
    if sha is None:
        return ""
    tree = ctx.repo.commit(sha).tree
    notes = [
        f"## {blob.path}\n{blob.data_stream.read().decode('utf-8', errors='replace')}"
        for blob in tree.traverse()
        if isinstance(blob, git.Blob) and str(blob.path).endswith((".md", ".txt"))
    ]
    return "\n\n".join(notes)[:MAX_NOTES]


def research_due(ctx: LoopContext, state: SearchState) -> bool:
    """New LITERATURE arrived, or the periodic researcher is due."""
    if ctx.llm is None:
        return False
    if state.literature_since_research():
        return True
    every = ctx.settings.research_every
    return every > 0 and state.next_step - state.research_step >= every


def run_researcher(ctx: LoopContext, state: SearchState) -> None:
    """Scored proposals from literature, notes and outcomes become idea arms."""
    assert ctx.llm is not None
    outcomes = [
        IdeaOutcome(text=i.text, trials=i.trials, successes=i.successes)
        for i in state.ideas.values()
    ]
    ideas: list[ScoredIdea] = []
    error = None
    try:
        notes = repository_notes(ctx, state.frontier_sha)
        ideas = research(ctx.llm, ctx.workload, state.literature, outcomes, notes)
    except (LLMError, ValueError) as exc:
        error = str(exc)
    prefix = f"researcher-{state.latest_message_seq}-{state.next_step}"
    run = AgentRun(
        step=state.next_step,
        last_message_seq=state.latest_message_seq,
        ideas=len(ideas),
        error=error,
    )
    ctx.ledger.append_many(
        [*_register(prefix, "researcher", ideas), run.to_event(EventKind.RESEARCH)]
    )
    drain_llm_calls(ctx, state.next_step)
    ctx.reporter.line(f"researcher: {len(ideas)} ideas" + (f" ({error})" if error else ""))


def run_inspector(ctx: LoopContext, state: SearchState) -> None:
    """Ideas from looking at the inputs and configurations, once per run."""
    assert ctx.llm is not None
    ideas: list[ScoredIdea] = []
    error = None
    try:
        ideas = inspect_workload(ctx.llm, ctx.workload, list(ctx.config_set.config_ids))
    except (LLMError, ValueError) as exc:
        error = str(exc)
    run = AgentRun(
        step=state.next_step,
        last_message_seq=state.latest_message_seq,
        ideas=len(ideas),
        error=error,
    )
    records = [*_register("inspector", "inspector", ideas), run.to_event(EventKind.INSPECTION)]
    ctx.ledger.append_many(records)
    drain_llm_calls(ctx, state.next_step)
    ctx.reporter.line(f"workload inspector: {len(ideas)} ideas" + (f" ({error})" if error else ""))
