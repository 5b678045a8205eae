"""Scored idea proposals from an LLM: the reply format, its parsing, and the rubric scores."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from pydantic import BaseModel, Field, ValidationError

from agents.llm.conversation import AssistantItem, Conversation, UserText
from agents.llm.session import LLMSession
from prompts import RenderedPrompt

RATING_LEVELS = 5
REPLY_FORMAT = (
    '{"proposals": [{"text": "...", "rationale": "...", "judgments": [3, 4, 2, 4, 3]}]} '
    "(judgments: integers 1-5)"
)


class Proposal(BaseModel):
    """One idea as the model proposed it."""

    text: str = Field(min_length=5, max_length=2000, description="The idea.")
    rationale: str = Field(default="", max_length=4000, description="Why it should help.")
    judgments: list[int] = Field(min_length=1, max_length=20, description="Ratings 1..5.")


class ProposalReply(BaseModel):
    """The whole reply."""

    proposals: list[Proposal] = Field(max_length=20, description="Proposed ideas.")


class ScoredIdea(BaseModel):
    """A proposal with the rubric quality q and uncertainty H the idea sampler uses."""

    text: str = Field(description="The idea.")
    rationale: str = Field(description="Why.")
    quality: float = Field(gt=0, lt=1, description="Mean rating mapped into (0, 1).")
    uncertainty: float = Field(ge=0, le=1, description="Normalized entropy of the ratings.")


def score(proposal: Proposal) -> ScoredIdea:
    """q from the mean rating, H from the normalized entropy of the ratings' histogram."""
    ratings = [min(RATING_LEVELS, max(1, r)) for r in proposal.judgments]
    quality = (sum(ratings) / len(ratings) - 1) / (RATING_LEVELS - 1)
    counts = Counter(ratings)
    entropy = -sum((c / len(ratings)) * math.log(c / len(ratings)) for c in counts.values())
    uncertainty = entropy / math.log(RATING_LEVELS) if len(ratings) > 1 else 1.0
    return ScoredIdea(
        text=proposal.text.strip(),
        rationale=proposal.rationale.strip(),
        quality=min(0.98, max(0.02, quality)),
        uncertainty=min(1.0, max(0.0, uncertainty)),
    )


def parse_reply(text: str) -> ProposalReply:
    """The JSON object in the model's text; ValueError shows the expected format."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise ValueError(f"the reply contains no JSON object; expected {REPLY_FORMAT}")
    try:
        return ProposalReply.model_validate(json.loads(match.group(0)))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(
            f"the reply does not match the format ({exc}); expected {REPLY_FORMAT}"
        ) from exc


def ask_for_proposals(
    session: LLMSession, role: str, prompt: RenderedPrompt, max_output_tokens: int = 4096
) -> list[ScoredIdea]:
    """Ask once, and once more with the parse error if the reply is malformed."""
    conversation = Conversation(system=prompt.text, items=[UserText(text="Your proposals:")])
    for attempt in range(2):
        turn = session.ask((role, prompt.template_hash), conversation, [], max_output_tokens)
        try:
            return [score(p) for p in parse_reply(turn.text).proposals]
        except ValueError as exc:
            if attempt == 1:
                raise
            conversation.items.append(AssistantItem(turn=turn))
            conversation.items.append(UserText(text=f"{exc}. Answer again with only the JSON."))
    return []
