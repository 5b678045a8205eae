"""The researcher: literature, notes and past outcomes in, scored idea proposals out."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agents.llm.session import LLMSession
from agents.proposals import ScoredIdea, ask_for_proposals
from kernels.workload import Workload
from prompts import render_prompt


class IdeaOutcome(BaseModel):
    """How an idea did so far."""

    text: str = Field(description="The idea.")
    trials: int = Field(description="Experiments that used it.")
    successes: int = Field(description="Of which measurably faster than their parent.")


def research(
    session: LLMSession,
    workload: Workload,
    literature: list[str],
    outcomes: list[IdeaOutcome],
    notes: str = "",
    max_ideas: int = 5,
) -> list[ScoredIdea]:
    """Scored proposals (q, H) for the idea sampler; raises LLMError when the model fails."""
    prompt = render_prompt(
        "researcher",
        {
            "workload_name": workload.name,
            "workload_description": workload.description,
            "literature": "\n".join(f"- {item}" for item in literature) or "- (none)",
            "notes": notes.strip() or "(none)",
            "outcomes": "\n".join(f"- {o.text} ({o.trials} / {o.successes})" for o in outcomes)
            or "- (none yet)",
            "max_ideas": str(max_ideas),
        },
    )
    return ask_for_proposals(session, "researcher", prompt)[:max_ideas]
