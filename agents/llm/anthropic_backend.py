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
    usage = Usage(
        input_tokens=message.usage.input_tokens or 0, output_tokens=message.usage.output_tokens or 0
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
        try:
            message = self._client.messages.create(
                model=self.model,
                max_tokens=max_output_tokens,
                system=conversation.system,
                messages=to_messages(conversation),  # type: ignore[arg-type]
                tools=[
                    {"name": t.name, "description": t.description, "input_schema": t.parameters}
                    for t in tools
                ],
                extra_body=extra or None,
            )
        except anthropic.APIError as exc:
            raise LLMError(f"anthropic: {type(exc).__name__}: {exc}") from exc
        return parse_message(message)
