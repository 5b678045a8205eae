"""Ideas with their priors and posteriors, and every injected message with its effect so far."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ledger import Ledger
from orchestrator.events import EventKind
from orchestrator.messages import FORMATS, MessageKind
from orchestrator.run_view.common import RunData
from orchestrator.state import IdeaView
from search import IdeaArm, PriorStrength, posterior_parameters, prior_parameters


class IdeaRow(BaseModel):
    """One idea arm."""

    id: str = Field(description="Idea id (human-SEQ for an injected IDEA).")
    text: str = Field(description="The idea in words.")
    source: str = Field(description="library, human, researcher or inspector.")
    author: str = Field(description="Who proposed it.")
    quality: float = Field(description="Rubric score q (a PRIORITY may have changed it).")
    uncertainty: float = Field(description="Rubric uncertainty H.")
    prior_alpha: float = Field(description="Alpha of its Beta prior.")
    prior_beta: float = Field(description="Beta of its Beta prior.")
    prior_mean: float = Field(description="Mean of its prior.")
    posterior_alpha: float = Field(description="Alpha of its Beta posterior.")
    posterior_beta: float = Field(description="Beta of its Beta posterior.")
    posterior_mean: float = Field(description="Mean of its posterior.")
    trials: int = Field(description="Experiments that used it.")
    successes: int = Field(description="Of which measurably faster than their parent.")
    retracted: bool = Field(description="Withdrawn by a RETRACT: no longer drawn.")


class QueueMessage(BaseModel):
    """One injected message and what it has done."""

    seq: int = Field(description="Ledger seq: the message id.")
    kind: str = Field(description="IDEA, CONSTRAINT, PRIORITY, LITERATURE, REDIRECT, RETRACT.")
    text: str = Field(description="As written.")
    author: str = Field(description="Who injected it.")
    created_at: str = Field(description="When (ISO-8601, UTC).")
    retracted_by: int | None = Field(description="Seq of the RETRACT that withdrew it.")
    read: bool = Field(description="A step started after it: the search has read it.")
    effect: str = Field(description="Its effect so far, in words.")


class QueueView(BaseModel):
    """The queue page."""

    messages: list[QueueMessage] = Field(description="Every message, oldest first.")
    kinds: list[str] = Field(description="Kinds the inject form offers.")
    formats: dict[str, str] = Field(description="The text format of each kind (as the CLI).")


def _row(idea: IdeaView, strength: PriorStrength) -> IdeaRow:
    arm = IdeaArm(
        idea_id=idea.idea_id,
        quality=idea.quality,
        uncertainty=idea.uncertainty,
        successes=idea.successes,
        failures=idea.failures,
        order=idea.order,
    )
    prior_a, prior_b = prior_parameters(arm, strength)
    post_a, post_b = posterior_parameters(arm, strength)
    return IdeaRow(
        id=idea.idea_id,
        text=idea.text,
        source=idea.source,
        author=idea.author,
        quality=idea.quality,
        uncertainty=idea.uncertainty,
        prior_alpha=prior_a,
        prior_beta=prior_b,
        prior_mean=prior_a / (prior_a + prior_b),
        posterior_alpha=post_a,
        posterior_beta=post_b,
        posterior_mean=post_a / (post_a + post_b),
        trials=idea.trials,
        successes=idea.successes,
        retracted=idea.retracted,
    )


def ideas(data: RunData) -> list[IdeaRow]:
    """Every idea arm, in the order it joined the run."""
    settings = data.state.run.settings if data.state.run else {}
    strength = PriorStrength(k_min=settings.get("k_min", 2.0), k_max=settings.get("k_max", 20.0))
    return [_row(idea, strength) for idea in data.state.ideas.values()]


def _constraint_hits(ledger: Ledger, text: str) -> int:
    hits = 0
    for stored in ledger.events(kind=EventKind.STATIC_CHECKED.value):
        findings = stored.record.payload.get("findings", [])
        quoted = repr(text)  # findings name the CONSTRAINT as repr(text)
        hits += any(
            f.get("rule") == "constraint" and quoted in str(f.get("message")) for f in findings
        )
    return hits


def _effect(
    ledger: Ledger, data: RunData, kind: str, seq: int, text: str, payload: dict[str, Any]
) -> str:
    state = data.state
    if kind == MessageKind.IDEA:
        idea = state.ideas.get(f"human-{seq}")
        if idea is None:
            return "not an idea arm yet"
        return f"idea arm human-{seq}: {idea.trials} trials, {idea.successes} successes"
    if kind == MessageKind.CONSTRAINT:
        hits = _constraint_hits(ledger, text)
        return f"a static check on every later candidate; {hits} candidate(s) broke it"
    if kind == MessageKind.PRIORITY:
        parts = [f"idea {k} q={v}" for k, v in payload.get("ideas", {}).items()]
        parts += [f"config {k} weight {v}" for k, v in payload.get("configs", {}).items()]
        return "re-weighted " + ", ".join(parts)
    if kind == MessageKind.LITERATURE:
        seen = state.research_seen_seq >= seq
        return "read by the researcher" if seen else "not read by the researcher yet"
    if kind == MessageKind.REDIRECT:
        if payload.get("reset"):
            return "ended the REDIRECT in force"
        what = []
        if payload.get("configs"):
            what.append("screens on " + ",".join(payload["configs"]))
        if payload.get("parent"):
            what.append(f"expands {str(payload['parent'])[:10]}")
        return f"{' and '.join(what)} for {payload.get('steps')} step(s)"
    if kind == MessageKind.RETRACT:
        return f"withdrew message #{payload.get('seq')}"
    return ""


def queue(ledger: Ledger, data: RunData) -> QueueView:
    """Every injected message, whether the search has read it, and its effect so far."""
    starts = [e.seq for e in ledger.events(kind=EventKind.STEP_STARTED.value)]
    messages = []
    for stored in ledger.messages():
        rec = stored.record
        retracted_by = data.state.retracted.get(stored.seq)
        effect = _effect(ledger, data, rec.kind, stored.seq, rec.text, rec.payload)
        if retracted_by is not None:
            effect = f"retracted by #{retracted_by}" + (f" (was: {effect})" if effect else "")
        messages.append(
            QueueMessage(
                seq=stored.seq,
                kind=rec.kind,
                text=rec.text,
                author=rec.author,
                created_at=stored.created_at,
                retracted_by=retracted_by,
                read=any(s > stored.seq for s in starts),
                effect=effect,
            )
        )
    kinds = [k.value for k in MessageKind]
    formats = {k: FORMATS[MessageKind(k)] for k in kinds}
    return QueueView(messages=messages, kinds=kinds, formats=formats)
