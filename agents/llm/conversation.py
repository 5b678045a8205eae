"""Provider-neutral conversation, tool and usage types shared by every backend."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field


class ToolSpec(BaseModel):
    """A tool the model may call."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Tool name.")
    description: str = Field(description="What the tool does and when to use it.")
    parameters: dict[str, Any] = Field(description="JSON schema of the arguments object.")


class ToolCall(BaseModel):
    """A call the model asked for; `error` is set when its arguments could not be parsed."""

    model_config = ConfigDict(frozen=True)

    call_id: str = Field(description="Provider id used to pair the result with the call.")
    name: str = Field(description="Tool name as the model wrote it.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Parsed arguments.")
    raw_arguments: str = Field(default="", description="Arguments exactly as received.")
    error: str | None = Field(default=None, description="Why the arguments are malformed.")


class Usage(BaseModel):
    """Tokens of one call."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(
        default=0, ge=0, description="Prompt tokens billed at the full rate (cache excluded)."
    )
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens billed.")
    cache_read_tokens: int = Field(
        default=0, ge=0, description="Prompt tokens served from the provider's prompt cache."
    )
    cache_write_tokens: int = Field(
        default=0, ge=0, description="Prompt tokens written to the provider's prompt cache."
    )


class AssistantTurn(BaseModel):
    """The model's answer to one request."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(default="", description="Free text the model wrote.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tools it called.")
    stop_reason: str = Field(default="", description="Provider stop reason.")
    usage: Usage = Field(default_factory=Usage, description="Tokens billed.")
    model: str = Field(default="", description="Model that answered.")


class ToolOutcome(BaseModel):
    """What a tool returned, sent back to the model."""

    model_config = ConfigDict(frozen=True)

    call_id: str = Field(description="The call it answers.")
    name: str = Field(description="Tool name.")
    output: str = Field(description="Text shown to the model.")
    is_error: bool = Field(default=False, description="The call failed.")


class UserText(BaseModel):
    """A user message."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["user"] = Field(default="user", description="Discriminator.")
    text: str = Field(description="The message.")


class AssistantItem(BaseModel):
    """An assistant turn kept in the history."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["assistant"] = Field(default="assistant", description="Discriminator.")
    turn: AssistantTurn = Field(description="The turn.")


class ToolResults(BaseModel):
    """Results of the tool calls of the previous assistant turn."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["tools"] = Field(default="tools", description="Discriminator.")
    outcomes: list[ToolOutcome] = Field(description="One per call, in order.")


class Conversation(BaseModel):
    """System prompt and history, in the order the provider must see them."""

    system: str = Field(description="System prompt.")
    items: list[UserText | AssistantItem | ToolResults] = Field(
        default_factory=list, description="History."
    )


class BackendKind(enum.StrEnum):
    """Which provider answers."""

    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    OPENAI_CHAT = "openai-chat"
    REPLAY = "replay"


@dataclass(frozen=True)
class ClientOptions:
    """How a backend reaches its vendor: the official SDK client's settings."""

    model: str
    api_key: str
    temperature: float | None = None
    # An httpx2.Client (tests pass one over a MockTransport); None lets the SDK build its own.
    http_client: Any = None
    base_url: str | None = None
    max_retries: int = 3
    timeout_s: float = 120.0

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of anthropic.Anthropic(...) and openai.OpenAI(...) alike."""
        return {
            "api_key": self.api_key,
            "base_url": self.base_url,
            "http_client": self.http_client,
            "max_retries": self.max_retries,
            "timeout": self.timeout_s,
        }


class LLMError(RuntimeError):
    """A provider call failed after the SDK's own retries (rate limit, 5xx, timeout...)."""


class LLMBackend(Protocol):
    """One request in, one assistant turn out."""

    kind: BackendKind
    model: str

    def respond(
        self, conversation: Conversation, tools: list[ToolSpec], max_output_tokens: int
    ) -> AssistantTurn:
        """Ask the model; raises LLMError when the provider cannot answer."""
