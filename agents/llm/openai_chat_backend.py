"""OpenAI-compatible Chat Completions backend with tool calls, for local model servers (vLLM,
SGLang, llama.cpp, ollama) and any endpoint speaking that wire format, on the official SDK."""

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


def to_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The history as chat messages: system, user, assistant (with tool_calls), tool."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": conversation.system}]
    for item in conversation.items:
        if isinstance(item, UserText):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, AssistantItem):
            # Text may be empty, never null: llama.cpp's server refuses an assistant message whose
            # content is null and that has no tool calls (500, seen with a real server).
            message: dict[str, Any] = {"role": "assistant", "content": item.turn.text}
            if item.turn.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": call.raw_arguments or json.dumps(call.arguments),
                        },
                    }
                    for call in item.turn.tool_calls
                ]
            messages.append(message)
        elif isinstance(item, ToolResults):
            messages.extend(
                {"role": "tool", "tool_call_id": o.call_id, "content": o.output}
                for o in item.outcomes
            )
    return messages


def _arguments(raw: object) -> tuple[dict[str, Any], str, str | None]:
    """Parsed arguments, their raw text, and why they are malformed (if they are)."""
    if isinstance(raw, dict):  # some servers send an object instead of a JSON string
        return raw, json.dumps(raw), None
    text = raw if isinstance(raw, str) else ""
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        return {}, text, f"arguments are not valid JSON ({exc.msg} at {exc.pos})"
    if not isinstance(value, dict):
        return {}, text, "arguments must be a JSON object"
    return value, text, None


def parse_completion(completion: Any, turn_index: int) -> AssistantTurn:
    """A chat completion as a provider-neutral turn; refusals and tool calls a server wrote in
    odd shapes become text or malformed calls the loop answers, never an exception."""
    if not getattr(completion, "choices", None):
        raise LLMError("openai-chat: the server answered with no choices")
    choice = completion.choices[0]
    message = choice.message
    text = [part for part in (message.content, getattr(message, "refusal", None)) if part]
    calls = []
    for i, call in enumerate(message.tool_calls or []):
        function = getattr(call, "function", None)
        name = str(getattr(function, "name", "") or "")
        arguments, raw, error = _arguments(getattr(function, "arguments", ""))
        calls.append(
            ToolCall(
                call_id=str(getattr(call, "id", "") or f"call_{turn_index}_{i}"),
                name=name,
                arguments=arguments,
                raw_arguments=raw,
                error=error if name else "the tool call names no function",
            )
        )
    usage = completion.usage
    return AssistantTurn(
        text="\n".join(str(t) for t in text),
        tool_calls=calls,
        stop_reason=str(choice.finish_reason or ""),
        usage=Usage(
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0,
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0,
        ),
        model=str(completion.model or ""),
    )


class OpenAIChatBackend:
    """Any OpenAI-compatible chat-completions server with tool calls (the SDK retries 429/5xx)."""

    kind = BackendKind.OPENAI_CHAT

    def __init__(self, options: ClientOptions, tool_choice: str | None = None) -> None:
        self.model = options.model
        self.temperature = options.temperature
        # None: the server's default; 'auto', 'none', 'required', or one tool's name (forced).
        self.tool_choice = tool_choice
        self._client = openai.OpenAI(**options.sdk_kwargs())

    def _tool_choice(self) -> object | None:
        if self.tool_choice in (None, "auto", "none", "required"):
            return self.tool_choice
        return {"type": "function", "function": {"name": self.tool_choice}}

    def respond(
        self, conversation: Conversation, tools: list[ToolSpec], max_output_tokens: int
    ) -> AssistantTurn:
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.tool_choice is not None:
            options["tool_choice"] = self._tool_choice()
        try:
            completion = self._client.chat.completions.create(
                model=self.model,
                messages=to_messages(conversation),  # type: ignore[arg-type]
                tools=[
                    {
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        },
                    }
                    for t in tools
                ],
                max_tokens=max_output_tokens,
                **options,
            )
        except openai.APIError as exc:
            raise LLMError(f"openai-chat: {type(exc).__name__}: {exc}") from exc
        return parse_completion(completion, len(conversation.items))
