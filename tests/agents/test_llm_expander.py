"""The LLM expander against fake Anthropic and OpenAI servers (real SDKs, real wire formats),
with real git worktrees and the real quick check; failures are outcomes, never crashes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
import httpx2
import pytest

from agents.expander import ExpansionOutcome, ExpansionRequest, ExpansionResult, IdeaBrief
from agents.llm.anthropic_backend import AnthropicBackend
from agents.llm.conversation import ClientOptions, LLMBackend
from agents.llm.openai_backend import OpenAIBackend
from agents.llm.openai_chat_backend import OpenAIChatBackend
from agents.llm.session import (
    Budget,
    BudgetExhaustedError,
    LLMSession,
    ReplayBackend,
    pricing_for,
)
from agents.llm_expander import LLMExpander, LLMExpanderSettings
from harness.runner import RunnerSettings
from kernels.softmax.workload import softmax_workload
from orchestrator.checker import HarnessChecker
from tests.agents.conftest import make_repo
from tests.agents.fake_llm import (
    Script,
    anthropic_handler,
    client,
    openai_chat_handler,
    openai_handler,
    softmax_script,
)

pytestmark = pytest.mark.slow
CODE_ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = softmax_workload()
Handler = Callable[[httpx2.Request], httpx2.Response]


def _options(model: str, handler: Handler, base_url: str) -> ClientOptions:
    """A vendor client pointed at an in-process fake of that vendor's server."""
    return ClientOptions(
        model=model,
        api_key="sk-test",
        http_client=client(handler),
        base_url=base_url,
        max_retries=2,
    )


def anthropic(script: Script) -> AnthropicBackend:
    options = _options("claude-sonnet-fake", anthropic_handler(script), "http://fake.anthropic")
    return AnthropicBackend(options)


def openai_chat(script: Script) -> OpenAIChatBackend:
    options = _options("local-fake", openai_chat_handler(script), "http://127.0.0.1:9/v1")
    return OpenAIChatBackend(options)


def openai_backend(script: Script) -> OpenAIBackend:
    options = _options("gpt-5-fake", openai_handler(script), "http://fake.openai/v1")
    return OpenAIBackend(options)


def expand(
    tmp_path: Path, backend: LLMBackend, transcript: Path | None = None, max_turns: int = 6
) -> tuple[ExpansionResult, LLMSession, git.Repo, str]:
    repo, parent = make_repo(tmp_path / "repo", WORKLOAD.seed_bundle())
    runner = RunnerSettings(python=sys.executable, lock_dir=tmp_path / "locks", code_root=CODE_ROOT)
    checker = HarnessChecker(WORKLOAD, [], runner, tmp_path / "checks", ["s1"])
    prices = (0.0, 0.0) if backend.model == "local-fake" else None
    session = LLMSession(
        backend, pricing_for(backend.model.replace("-fake", ""), prices), Budget(), transcript
    )
    settings = LLMExpanderSettings(max_turns=max_turns)
    expander = LLMExpander(session, lambda constraints: checker, WORKLOAD, settings)
    request = ExpansionRequest(
        repo_path=tmp_path / "repo",
        worktree_root=tmp_path / "worktrees",
        parent_sha=parent,
        branch="ratchet/step-00001",
        candidate_file="candidate.py",
        idea=IdeaBrief(idea_id="reuse-exp", text="Exponentiate once", source="library"),
        seed=1,
    )
    return expander.expand(request), session, repo, parent


def assert_committed(result: ExpansionResult, repo: git.Repo, parent: str) -> None:
    assert result.outcome is ExpansionOutcome.COMMITTED, result.message
    commit = repo.commit(result.sha)
    assert [p.hexsha for p in commit.parents] == [parent]
    assert repo.heads["ratchet/step-00001"].commit.hexsha == result.sha
    source = commit.tree["candidate.py"].data_stream.read().decode()
    assert '"exp_passes": "once"' in source
    assert "Hypothesis:" in result.message and "Predicted effect:" in result.message
    assert str(repo.git.worktree("list")).count("\n") == 0, "the worktree was not removed"


def test_anthropic_tool_loop_commits_a_checked_change(tmp_path: Path) -> None:
    script = Script(turn=softmax_script)
    result, session, repo, parent = expand(tmp_path, anthropic(script))
    assert_committed(result, repo, parent)
    # The file content travelled back as a tool_result block of a user message.
    second = script.requests[1]["messages"]
    assert second[-1]["content"][0]["type"] == "tool_result"
    assert "TUNABLES" in second[-1]["content"][0]["content"]
    assert "run_checks" in {t["name"] for t in script.requests[0]["tools"]}
    calls = session.drain()
    assert len(calls) == 4 and all(c.outcome == "ok" and c.usd > 0 for c in calls)
    assert all(c.template_hash == result.prompt_hash for c in calls)


def test_openai_tool_loop_commits_a_checked_change(tmp_path: Path) -> None:
    script = Script(turn=softmax_script)
    result, session, repo, parent = expand(tmp_path, openai_backend(script))
    assert_committed(result, repo, parent)
    outputs = [i for i in script.requests[1]["input"] if i.get("type") == "function_call_output"]
    assert outputs and "TUNABLES" in outputs[0]["output"]
    assert script.requests[0]["instructions"].startswith("You are an expander")
    assert len(session.drain()) == 4


def test_a_rate_limit_is_retried_with_backoff(tmp_path: Path) -> None:
    script = Script(turn=softmax_script, failures=[429])
    result, _, repo, parent = expand(tmp_path, anthropic(script))
    assert_committed(result, repo, parent)
    assert len(script.requests) == 5  # one 429, then the four real turns


def test_persistent_server_errors_are_a_failed_expansion(tmp_path: Path) -> None:
    script = Script(turn=softmax_script, failures=[500] * 10)
    result, session, _, _ = expand(tmp_path, openai_backend(script))
    assert result.outcome is ExpansionOutcome.PROVIDER_ERROR and result.outcome.infrastructure
    assert "could not be reached" in result.message
    calls = session.drain()
    assert (
        len(calls) == 1
        and calls[0].outcome == "error"
        and "InternalServerError" in (calls[0].error or "")
    )


def test_malformed_tool_arguments_are_answered_and_recovered(tmp_path: Path) -> None:
    def script_with_retry(turn: int, results: list[str]) -> tuple[str, dict[str, Any]] | None:
        # Turn 0 is malformed; the model then starts over from turn 1 as a normal turn 0.
        return softmax_script(max(0, turn - 1), results)

    script = Script(turn=script_with_retry, malformed_turns={0})
    result, _, repo, parent = expand(tmp_path, openai_backend(script))
    assert_committed(result, repo, parent)
    first_output = next(
        i for i in script.requests[1]["input"] if i.get("type") == "function_call_output"
    )
    assert "not valid JSON" in first_output["output"] and "expected" in first_output["output"]


def test_a_model_that_never_commits_fails_after_its_turns(tmp_path: Path) -> None:
    script = Script(turn=lambda turn, results: ("list_files", {}))
    result, session, _, _ = expand(tmp_path, anthropic(script), max_turns=3)
    assert result.outcome is ExpansionOutcome.FAILED and not result.outcome.infrastructure
    assert "no commit after 3 turns" in result.message
    assert len(session.drain()) == 3


def test_a_model_whose_calls_never_work_is_an_infrastructure_outcome(tmp_path: Path) -> None:
    script = Script(turn=lambda turn, results: ("list_files", {}), malformed_turns={0, 1, 2})
    result, _, _, _ = expand(tmp_path, anthropic(script), max_turns=3)
    assert result.outcome is ExpansionOutcome.MALFORMED_REPLIES, result.message


def test_a_recorded_transcript_replays_to_the_same_tree(tmp_path: Path) -> None:
    transcript = tmp_path / "transcript.jsonl"
    recorded, _, repo, _ = expand(
        tmp_path / "live", anthropic(Script(turn=softmax_script)), transcript
    )
    assert recorded.outcome is ExpansionOutcome.COMMITTED
    replayed, session, repo2, _ = expand(tmp_path / "replay", ReplayBackend(transcript))
    assert replayed.outcome is ExpansionOutcome.COMMITTED
    assert repo2.commit(replayed.sha).tree.hexsha == repo.commit(recorded.sha).tree.hexsha
    assert all(c.backend == "replay" and c.usd == 0 for c in session.drain())


def test_the_budget_stops_further_calls(tmp_path: Path) -> None:
    backend = anthropic(Script(turn=softmax_script))
    session = LLMSession(backend, pricing_for("claude-sonnet"), Budget(usd_limit=0.005))
    from agents.llm.conversation import Conversation, UserText

    conversation = Conversation(system="s", items=[UserText(text="go")])
    session.ask(("expander", "h"), conversation, [], 100)  # $0.0081: over the limit now
    with pytest.raises(BudgetExhaustedError, match="money budget"):
        session.ask(("expander", "h"), conversation, [], 100)


def test_openai_chat_tool_loop_commits_a_checked_change(tmp_path: Path) -> None:
    script = Script(turn=softmax_script)
    result, session, repo, parent = expand(tmp_path, openai_chat(script))
    assert_committed(result, repo, parent)
    # Chat wire format: tools as functions, results as role=tool messages paired by id.
    assert {t["type"] for t in script.requests[0]["tools"]} == {"function"}
    assert "str_replace" in {t["function"]["name"] for t in script.requests[0]["tools"]}
    second = script.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["id"] == second[3]["tool_call_id"] == "call_0"
    assert "TUNABLES" in second[3]["content"]
    calls = session.drain()
    assert len(calls) == 4 and all(c.input_tokens == 900 and c.usd == 0 for c in calls)


def test_openai_chat_malformed_arguments_are_answered(tmp_path: Path) -> None:
    def script_with_retry(turn: int, results: list[str]) -> tuple[str, dict[str, Any]] | None:
        return softmax_script(max(0, turn - 1), results)

    script = Script(turn=script_with_retry, malformed_turns={0})
    result, _, repo, parent = expand(tmp_path, openai_chat(script))
    assert_committed(result, repo, parent)
    answer = script.requests[1]["messages"][-1]
    assert answer["role"] == "tool" and "not valid JSON" in answer["content"]


def test_openai_chat_server_errors_are_a_provider_error(tmp_path: Path) -> None:
    script = Script(turn=softmax_script, failures=[503] * 10)
    result, _, _, _ = expand(tmp_path, openai_chat(script))
    assert result.outcome is ExpansionOutcome.PROVIDER_ERROR and "openai-chat" in result.message


def test_anthropic_requests_mark_prompt_cache_breakpoints_and_cached_tokens_are_priced(
    tmp_path: Path,
) -> None:
    script = Script(turn=softmax_script)
    result, session, _, _ = expand(tmp_path, anthropic(script))
    assert result.outcome is ExpansionOutcome.COMMITTED
    calls = session.drain()
    assert all(c.cache_read_tokens == 800 and c.cache_write_tokens == 100 for c in calls)
    body = script.requests[2]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["tools"][0]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in m["content"][-1] for m in body["messages"][:-1])


def test_cached_prompt_tokens_are_recorded_and_priced_at_their_rates() -> None:
    from agents.llm.conversation import Usage

    price = pricing_for("claude-sonnet")
    usage = Usage(
        input_tokens=100, output_tokens=10, cache_read_tokens=1000, cache_write_tokens=200
    )
    expected = (100 + 1000 * 0.1 + 200 * 1.25) * 3.0 / 1e6 + 10 * 15.0 / 1e6
    assert price.cost(100, 10, usage) == pytest.approx(expected)
    assert price.cost(100, 10) == pytest.approx((100 * 3.0 + 10 * 15.0) / 1e6)
