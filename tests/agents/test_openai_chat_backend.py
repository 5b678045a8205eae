"""Parsing what OpenAI-compatible chat servers send: odd shapes are outcomes, never crashes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agents.llm.conversation import (
    AssistantItem,
    AssistantTurn,
    Conversation,
    LLMError,
    ToolCall,
    ToolOutcome,
    ToolResults,
    UserText,
)
from agents.llm.openai_chat_backend import parse_completion, to_messages


def completion(message: object, usage: object = None, finish: str = "stop") -> object:
    choice = SimpleNamespace(message=message, finish_reason=finish)
    return SimpleNamespace(choices=[choice], usage=usage, model="m")


def message(content: str | None = None, tool_calls: object = None, refusal: str | None = None):
    return SimpleNamespace(content=content, tool_calls=tool_calls, refusal=refusal)


def call(name: str, arguments: object, call_id: str | None = "c1") -> object:
    return SimpleNamespace(id=call_id, function=SimpleNamespace(name=name, arguments=arguments))


def test_a_refusal_is_text_the_loop_can_answer() -> None:
    turn = parse_completion(completion(message(refusal="I cannot help with that")), 0)
    assert turn.text == "I cannot help with that" and turn.tool_calls == []


def test_tool_calls_in_odd_shapes_become_calls_or_marked_malformed() -> None:
    calls = [
        call("read_file", '{"path": "candidate.py"}'),
        call("grep", {"pattern": "x"}, call_id=None),  # an object, and no id
        call("commit", "[1, 2]"),
        call("", "{}"),
    ]
    turn = parse_completion(completion(message(tool_calls=calls), finish="tool_calls"), 3)
    first, second, third, fourth = turn.tool_calls
    assert first.arguments == {"path": "candidate.py"} and first.error is None
    assert second.arguments == {"pattern": "x"} and second.call_id == "call_3_1"
    assert third.error == "arguments must be a JSON object"
    assert fourth.error == "the tool call names no function"
    assert turn.usage.input_tokens == 0, "servers may omit usage"


def test_no_choices_is_a_provider_error() -> None:
    with pytest.raises(LLMError, match="no choices"):
        parse_completion(SimpleNamespace(choices=[], usage=None, model="m"), 0)


def test_history_becomes_chat_messages_with_paired_tool_results() -> None:
    turn = AssistantTurn(
        text="", tool_calls=[ToolCall(call_id="a", name="grep", arguments={"pattern": "x"})]
    )
    history = Conversation(
        system="sys",
        items=[
            UserText(text="task"),
            AssistantItem(turn=turn),
            ToolResults(outcomes=[ToolOutcome(call_id="a", name="grep", output="hit")]),
        ],
    )
    messages = to_messages(history)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[2]["content"] == ""  # a string: llama.cpp's server refuses null here
    assert messages[2]["tool_calls"][0]["function"] == {
        "name": "grep",
        "arguments": '{"pattern": "x"}',
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "a", "content": "hit"}


def test_a_forced_tool_travels_as_the_servers_tool_choice() -> None:
    import json

    import httpx2

    from agents.llm.conversation import ClientOptions
    from agents.llm.openai_chat_backend import OpenAIChatBackend
    from agents.tools import TOOL_SPECS

    bodies: list[dict[str, object]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}}
        return httpx2.Response(
            200,
            json={"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                  "choices": [{**choice, "finish_reason": "stop"}]},
        )  # fmt: skip

    options = ClientOptions(
        model="m",
        api_key="k",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
        base_url="http://127.0.0.1:9/v1",
    )
    history = Conversation(system="s", items=[UserText(text="t")])
    for forced, expected in (
        (None, None),
        ("auto", "auto"),
        ("list_files", {"type": "function", "function": {"name": "list_files"}}),
    ):
        OpenAIChatBackend(options, tool_choice=forced).respond(history, TOOL_SPECS, 64)
        assert bodies[-1].get("tool_choice") == expected
