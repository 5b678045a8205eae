"""Fake Anthropic, OpenAI Responses and OpenAI-compatible chat servers speaking the real wire
formats, driven by a scripted model.

The script sees the provider-neutral history the server reconstructs from the request body
(so the tests prove our tool results really travel in each provider's format) and answers
with tool calls in that provider's format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2

Action = tuple[str, dict[str, Any]] | str  # (tool, arguments) or a raw malformed-arguments marker


@dataclass
class Script:
    """A model that reads its previous tool results and decides the next call."""

    turn: Callable[[int, list[str]], tuple[str, dict[str, Any]] | None]
    requests: list[dict[str, Any]] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)  # HTTP statuses to answer first
    malformed_turns: set[int] = field(default_factory=set)


def softmax_script(turn: int, results: list[str]) -> tuple[str, dict[str, Any]] | None:
    """Read the candidate, reuse the exponentials, check, commit."""
    if turn == 0:
        return "read_file", {"path": "candidate.py"}
    if turn == 1:
        old = '"exp_passes": "twice"'
        assert old in results[-1], results[-1][:500]
        new = '"exp_passes": "once"'
        return "str_replace", {"path": "candidate.py", "old_text": old, "new_text": new}
    if turn == 2:
        return "run_checks", {}
    message = (
        "Reuse the exponentials\n\nIdea: exponentiate once\n"
        "Hypothesis: one exp pass instead of two halves the transcendental work\n"
        "Predicted effect: about 1.3x on every config, no accuracy change"
    )
    return "commit", {"message": message}


def anthropic_history(body: dict[str, Any]) -> tuple[int, list[str]]:
    """Assistant turns so far and the tool results sent back, from a Messages request body."""
    turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
    results = [
        block["content"]
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    return turns, results


def _openai_history(body: dict[str, Any]) -> tuple[int, list[str]]:
    items = body["input"]
    turns = sum(1 for i in items if i.get("type") == "function_call")
    results = [i["output"] for i in items if i.get("type") == "function_call_output"]
    return turns, results


def _usage_anthropic() -> dict[str, int]:
    return {
        "input_tokens": 1200,
        "output_tokens": 300,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 800,
    }


def anthropic_handler(script: Script) -> Callable[[httpx2.Request], httpx2.Response]:
    """A fake https://api.anthropic.com/v1/messages."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        script.requests.append(body)
        if script.failures:
            status = script.failures.pop(0)
            error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
            return httpx2.Response(status, json=error, headers={"retry-after": "0"})
        turn, results = anthropic_history(body)
        action = script.turn(turn, results)
        content: list[dict[str, Any]]
        if action is None:
            content = [{"type": "text", "text": "I think I am done."}]
        else:
            name, args = action
            tool_input: Any = "not an object" if turn in script.malformed_turns else args
            content = [
                {"type": "text", "text": f"calling {name}"},
                {"type": "tool_use", "id": f"toolu_{turn}", "name": name, "input": tool_input},
            ]
        message = {
            "id": f"msg_{turn}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-fake",
            "content": content,
            "stop_reason": "tool_use" if action else "end_turn",
            "stop_sequence": None,
            "usage": _usage_anthropic(),
        }
        return httpx2.Response(200, json=message)

    return handle


def openai_handler(script: Script) -> Callable[[httpx2.Request], httpx2.Response]:
    """A fake https://api.openai.com/v1/responses."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        script.requests.append(body)
        if script.failures:
            status = script.failures.pop(0)
            error = {"error": {"message": "overloaded", "type": "server_error", "code": None}}
            return httpx2.Response(status, json=error, headers={"retry-after": "0"})
        turn, results = _openai_history(body)
        action = script.turn(turn, results)
        output: list[dict[str, Any]] = []
        if action is not None:
            name, args = action
            arguments = "{not json" if turn in script.malformed_turns else json.dumps(args)
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{turn}",
                    "call_id": f"call_{turn}",
                    "name": name,
                    "arguments": arguments,
                    "status": "completed",
                }
            )
        else:
            output.append(
                {
                    "type": "message",
                    "id": "msg",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}],
                }
            )
        response = {
            "id": f"resp_{turn}",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5-fake",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 1000,
                "output_tokens": 250,
                "total_tokens": 1250,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        return httpx2.Response(200, json=response)

    return handle


def chat_history(body: dict[str, Any]) -> tuple[int, list[str]]:
    """Assistant turns so far and the tool results sent back, from a chat-completions body."""
    messages = body["messages"]
    turns = sum(1 for m in messages if m["role"] == "assistant")
    return turns, [m["content"] for m in messages if m["role"] == "tool"]


def openai_chat_handler(script: Script) -> Callable[[httpx2.Request], httpx2.Response]:
    """A fake OpenAI-compatible /v1/chat/completions (what llama.cpp, vLLM, ollama serve)."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        script.requests.append(body)
        if script.failures:
            status = script.failures.pop(0)
            return httpx2.Response(status, json={"error": {"message": "busy"}})
        turn, results = chat_history(body)
        action = script.turn(turn, results)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if action is None:
            message["content"] = "done"
        else:
            name, args = action
            arguments = "{not json" if turn in script.malformed_turns else json.dumps(args)
            message["tool_calls"] = [
                {
                    "id": f"call_{turn}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ]
        completion = {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": "local-fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if action else "stop",
                }
            ],
            "usage": {"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1000},
        }
        return httpx2.Response(200, json=completion)

    return handle


def client(handler: Callable[[httpx2.Request], httpx2.Response]) -> httpx2.Client:
    """An httpx2 client whose transport is the fake server."""
    return httpx2.Client(transport=httpx2.MockTransport(handler))
