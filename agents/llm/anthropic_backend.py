"""Anthropic Messages API backend (tool_use / tool_result), on the official SDK."""

from __future__ import annotations

import json
from typing import Any

import anthropic

from agents.llm.conversation import (
    AssistantItem,
    AssistantTurn,
    BackendKind,
    ClientOptions,
    Conversation,
    LLMError,
    ToolCall,
    ToolResults,
    ToolSpec,
    Usage,
    UserText,
)


def _assistant_content(turn: AssistantTurn) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        content.append(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
        )
    return content


def to_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The history in Messages API form."""
    messages: list[dict[str, Any]] = []
    for item in conversation.items:
        if isinstance(item, UserText):
            messages.append({"role": "user", "content": [{"type": "text", "text": item.text}]})
        elif isinstance(item, AssistantItem):
            messages.append({"role": "assistant", "content": _assistant_content(item.turn)})
        elif isinstance(item, ToolResults):
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": o.call_id,
                    "content": o.output,
                    "is_error": o.is_error,
                }
                for o in item.outcomes
            ]
            messages.append({"role": "user", "content": results})
    return messages


CACHE = {"type": "ephemeral"}


def cached_request(
    conversation: Conversation, tools: list[ToolSpec]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """System, tools and messages with prompt-cache breakpoints: after the tools, after the
    system prompt (the same for every expansion of a run) and after the newest message (the
    next turn of this expansion re-reads the whole history from the cache)."""
    specs: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]
    if specs:
        specs[-1] = {**specs[-1], "cache_control": CACHE}
    system = [{"type": "text", "text": conversation.system, "cache_control": CACHE}]
    messages = to_messages(conversation)
    if messages and messages[-1]["content"]:
        last = messages[-1]["content"]
        messages[-1] = {
            **messages[-1],
            "content": [*last[:-1], {**last[-1], "cache_control": CACHE}],
        }
    return system, specs, messages


def parse_message(message: Any) -> AssistantTurn:
    """A Messages API response as a provider-neutral turn."""
    text, calls = [], []
    for block in message.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {}
            error = None if isinstance(block.input, dict) else "tool input is not a JSON object"
            calls.append(
                ToolCall(
                    call_id=block.id,
                    name=block.name,
                    arguments=arguments,
                    raw_arguments=json.dumps(block.input, default=str),
                    error=error,
                )
            )
    raw = message.usage
    usage = Usage(
        input_tokens=raw.input_tokens or 0,
        output_tokens=raw.output_tokens or 0,
        cache_read_tokens=getattr(raw, "cache_read_input_tokens", 0) or 0,
        cache_write_tokens=getattr(raw, "cache_creation_input_tokens", 0) or 0,
    )
    return AssistantTurn(
        text="\n".join(text),
        tool_calls=calls,
        stop_reason=str(message.stop_reason or ""),
        usage=usage,
        model=str(message.model),
    )


class AnthropicBackend:
    """Claude through the official `anthropic` SDK (which retries 429/5xx with backoff)."""

    kind = BackendKind.ANTHROPIC

    def __init__(self, options: ClientOptions) -> None:
        self.model = options.model
        self.temperature = options.temperature
        self._client = anthropic.Anthropic(**options.sdk_kwargs())

    def respond(
        self, conversation: Conversation, tools: list[ToolSpec], max_output_tokens: int
    ) -> AssistantTurn:
        extra = {} if self.temperature is None else {"temperature": self.temperature}
        system, specs, messages = cached_request(conversation, tools)
        try:
            message = self._client.messages.create(
                model=self.model,
                max_tokens=max_output_tokens,
                system=system,  # type: ignore[arg-type]
                messages=messages,  # type: ignore[arg-type]
                tools=specs,  # type: ignore[arg-type]
                extra_body=extra or None,
            )
        except anthropic.APIError as exc:
            raise LLMError(f"anthropic: {type(exc).__name__}: {exc}") from exc
        return parse_message(message)
