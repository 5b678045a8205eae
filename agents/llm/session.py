"""An LLM session: every call priced, budgeted, timed and (optionally) recorded for replay."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agents.llm.conversation import (
    AssistantTurn,
    BackendKind,
    Conversation,
    LLMBackend,
    LLMError,
    ToolSpec,
    Usage,
)

# USD per million tokens (input, output), by model-name prefix: the last list prices we knew of,
# used only to enforce the money budget. Set llm_price_in / llm_price_out for exact figures; a
# model matching no prefix needs them, so a money budget is never silently unenforced.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "claude-opus": (15.0, 75.0),
    "claude-sonnet": (3.0, 15.0),
    "claude-haiku": (1.0, 5.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5": (1.25, 10.0),
    "replay": (0.0, 0.0),
}


class BudgetExhaustedError(RuntimeError):
    """The run's LLM money or token budget is spent: stop cleanly."""


# Prompt-cache prices relative to the input price (Anthropic's published multipliers: writes
# 1.25x, reads 0.1x; OpenAI bills cached input at a discount and never charges writes).
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1


class Pricing(BaseModel):
    """What tokens cost."""

    model_config = ConfigDict(frozen=True)

    usd_per_mtok_in: float = Field(ge=0, description="USD per million input tokens.")
    usd_per_mtok_out: float = Field(ge=0, description="USD per million output tokens.")

    def cost(self, input_tokens: int, output_tokens: int, usage: Usage | None = None) -> float:
        """USD of one call (prompt-cache reads and writes at their factors of the input price)."""
        cached = 0.0
        if usage is not None:
            cached = (
                usage.cache_write_tokens * CACHE_WRITE_FACTOR
                + usage.cache_read_tokens * CACHE_READ_FACTOR
            )
        billed_in = (input_tokens + cached) * self.usd_per_mtok_in
        return (billed_in + output_tokens * self.usd_per_mtok_out) / 1e6


def pricing_for(model: str, override: tuple[float, float] | None = None) -> Pricing:
    """Prices of a model (longest matching known prefix), or the override."""
    if override is not None:
        return Pricing(usd_per_mtok_in=override[0], usd_per_mtok_out=override[1])
    matches = [prefix for prefix in DEFAULT_PRICES if model.startswith(prefix)]
    if not matches:
        known = ", ".join(sorted(DEFAULT_PRICES))
        raise ValueError(
            f"no price known for model {model!r} (known prefixes: {known}); set "
            "llm_price_in and llm_price_out (USD per million tokens) in the settings"
        )
    price_in, price_out = DEFAULT_PRICES[max(matches, key=len)]
    return Pricing(usd_per_mtok_in=price_in, usd_per_mtok_out=price_out)


class Budget(BaseModel):
    """Limits of a run and what earlier calls (read from the ledger) already spent."""

    usd_limit: float | None = Field(default=None, ge=0, description="Money cap, USD.")
    token_limit: int | None = Field(default=None, ge=0, description="Token cap (in + out).")
    usd_spent: float = Field(default=0.0, ge=0, description="Spent so far, USD.")
    tokens_spent: int = Field(default=0, ge=0, description="Tokens so far.")

    def exhausted(self) -> str | None:
        """Why no further call may be made, if so."""
        if self.usd_limit is not None and self.usd_spent >= self.usd_limit:
            return f"LLM money budget of ${self.usd_limit:.2f} spent (${self.usd_spent:.2f})"
        if self.token_limit is not None and self.tokens_spent >= self.token_limit:
            return f"LLM token budget of {self.token_limit} spent ({self.tokens_spent})"
        return None


class LLMCallRecord(BaseModel):
    """One provider call, as the ledger records it."""

    role: str = Field(description="expander, researcher, inspector...")
    backend: str = Field(description="anthropic, openai or replay.")
    model: str = Field(description="Model asked.")
    template_hash: str = Field(description="sha256 of the prompt template behind the request.")
    input_tokens: int = Field(description="Prompt tokens billed (prompt cache excluded).")
    output_tokens: int = Field(description="Completion tokens billed.")
    cache_read_tokens: int = Field(default=0, description="Prompt tokens read from the cache.")
    cache_write_tokens: int = Field(default=0, description="Prompt tokens written to the cache.")
    usd: float = Field(description="Cost of the call.")
    wall_s: float = Field(description="Wall time of the call.")
    outcome: str = Field(description="'ok' or 'error'.")
    error: str | None = Field(default=None, description="Provider error after retries.")


class TranscriptEntry(BaseModel):
    """One recorded call, enough to replay the answer."""

    role: str = Field(description="Who asked.")
    template_hash: str = Field(description="Template behind the request.")
    request_items: int = Field(description="History length when asked (replay check).")
    turn: AssistantTurn | None = Field(default=None, description="The answer.")
    error: str | None = Field(default=None, description="The provider error instead.")


class LLMSession:
    """Calls a backend for the agents; the orchestrator drains `calls` into the ledger."""

    def __init__(
        self,
        backend: LLMBackend,
        pricing: Pricing,
        budget: Budget,
        transcript: Path | None = None,
    ) -> None:
        self.backend = backend
        self.pricing = pricing
        self.budget = budget
        self.transcript = transcript
        self.calls: list[LLMCallRecord] = []

    def ask(
        self,
        request: tuple[str, str],
        conversation: Conversation,
        tools: list[ToolSpec],
        max_output_tokens: int,
    ) -> AssistantTurn:
        """One call for (role, template hash); raises LLMError or BudgetExhaustedError."""
        reason = self.budget.exhausted()
        if reason is not None:
            raise BudgetExhaustedError(reason)
        started = time.monotonic()
        try:
            turn = self.backend.respond(conversation, tools, max_output_tokens)
        except LLMError as exc:
            self._record(
                request, None, time.monotonic() - started, str(exc), len(conversation.items)
            )
            raise
        self._record(request, turn, time.monotonic() - started, None, len(conversation.items))
        return turn

    def _record(
        self,
        request: tuple[str, str],
        turn: AssistantTurn | None,
        wall_s: float,
        error: str | None,
        items: int,
    ) -> None:
        role, template_hash = request
        usage = turn.usage if turn else Usage()
        tokens_in, tokens_out = usage.input_tokens, usage.output_tokens
        replayed = self.backend.kind is BackendKind.REPLAY  # nothing was spent on a replay
        usd = 0.0 if replayed else self.pricing.cost(tokens_in, tokens_out, usage)
        every_token = tokens_in + tokens_out + usage.cache_read_tokens + usage.cache_write_tokens
        self.budget = self.budget.model_copy(
            update={
                "usd_spent": self.budget.usd_spent + usd,
                "tokens_spent": self.budget.tokens_spent + every_token,
            }
        )
        self.calls.append(
            LLMCallRecord(
                role=role,
                backend=self.backend.kind.value,
                model=self.backend.model,
                template_hash=template_hash,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                usd=usd,
                wall_s=round(wall_s, 3),
                outcome="ok" if turn else "error",
                error=error,
            )
        )
        if self.transcript is not None and self.backend.kind is not BackendKind.REPLAY:
            entry = TranscriptEntry(
                role=role, template_hash=template_hash, request_items=items, turn=turn, error=error
            )
            with self.transcript.open("a", encoding="utf-8") as fh:
                fh.write(entry.model_dump_json() + "\n")

    def drain(self) -> list[LLMCallRecord]:
        """The calls made since the last drain."""
        calls, self.calls = self.calls, []
        return calls


class ReplayBackend:
    """Answers from a recorded transcript, in order; a different conversation is an error."""

    kind = BackendKind.REPLAY

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise ValueError(f"replay transcript {path} does not exist; record one with an LLM run")
        self.entries = [
            TranscriptEntry.model_validate(json.loads(line))
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        self.position = 0
        self.model = (
            self.entries[0].turn.model if self.entries and self.entries[0].turn else "replay"
        )

    def respond(
        self, conversation: Conversation, tools: list[ToolSpec], max_output_tokens: int
    ) -> AssistantTurn:
        if self.position >= len(self.entries):
            raise LLMError(f"replay transcript exhausted after {self.position} calls")
        entry = self.entries[self.position]
        self.position += 1
        if entry.request_items != len(conversation.items):
            raise LLMError(
                f"replay diverged at call {self.position}: the recorded request had "
                f"{entry.request_items} history items, this one has {len(conversation.items)}"
            )
        if entry.turn is None:
            raise LLMError(f"replayed provider error: {entry.error}")
        return entry.turn
