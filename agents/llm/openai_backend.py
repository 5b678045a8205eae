"""OpenAI Responses API backend (function_call / function_call_output), on the official SDK."""

from __future__ import annotations

import json
from typing import Any

import openai

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


def to_input(conversation: Conversation) -> list[dict[str, Any]]:
    """The history in Responses API input form."""
    items: list[dict[str, Any]] = []
    for item in conversation.items:
        if isinstance(item, UserText):
            items.append({"role": "user", "content": item.text})
        elif isinstance(item, AssistantItem):
            if item.turn.text:
                items.append({"role": "assistant", "content": item.turn.text})
            for call in item.turn.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.call_id,
                        "name": call.name,
                        "arguments": call.raw_arguments or json.dumps(call.arguments),
                    }
                )
        elif isinstance(item, ToolResults):
            items.extend(
                {"type": "function_call_output", "call_id": o.call_id, "output": o.output}
                for o in item.outcomes
            )
    return items


def _parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at {exc.pos})"
    if not isinstance(value, dict):
        return {}, "arguments must be a JSON object"
    return value, None


def parse_response(response: Any) -> AssistantTurn:
    """A Responses API response as a provider-neutral turn."""
    text, calls = [], []
    for item in response.output:
        if item.type == "function_call":
            arguments, error = _parse_arguments(item.arguments)
            calls.append(
                ToolCall(
                    call_id=item.call_id,
                    name=item.name,
                    arguments=arguments,
                    raw_arguments=item.arguments,
                    error=error,
                )
            )
        elif item.type == "message":
            for part in item.content:
                if getattr(part, "type", "") == "output_text":
                    text.append(part.text)
    usage = response.usage
    details = getattr(usage, "input_tokens_details", None) if usage else None
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    return AssistantTurn(
        text="\n".join(text),
        tool_calls=calls,
        stop_reason=str(response.status or ""),
        usage=Usage(
            # OpenAI caches long prompts by itself and counts cached tokens inside input_tokens.
            input_tokens=max(0, usage.input_tokens - cached) if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            cache_read_tokens=cached,
        ),
        model=str(response.model),
    )


class OpenAIBackend:
    """GPT models through the official `openai` SDK (which retries 429/5xx with backoff)."""

    kind = BackendKind.OPENAI

    def __init__(self, options: ClientOptions) -> None:
        self.model = options.model
        self.temperature = options.temperature
        self._client = openai.OpenAI(**options.sdk_kwargs())

    def respond(
        self, conversation: Conversation, tools: list[ToolSpec], max_output_tokens: int
    ) -> AssistantTurn:
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        try:
            response = self._client.responses.create(
                model=self.model,
                instructions=conversation.system,
                input=to_input(conversation),  # type: ignore[arg-type]
                tools=[
                    {
                        "type": "function",
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                        "strict": False,
                    }
                    for t in tools
                ],
                max_output_tokens=max_output_tokens,
                **options,
            )
        except openai.APIError as exc:
            raise LLMError(f"openai: {type(exc).__name__}: {exc}") from exc
        return parse_response(response)
