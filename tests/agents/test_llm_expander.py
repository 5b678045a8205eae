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
from tests.agents.fake_llm import Script, anthropic_handler, client, openai_handler, softmax_script

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


def openai_backend(script: Script) -> OpenAIBackend:
    options = _options("gpt-5-fake", openai_handler(script), "http://fake.openai/v1")
    return OpenAIBackend(options)


def expand(
    tmp_path: Path, backend: LLMBackend, transcript: Path | None = None, max_turns: int = 6
) -> tuple[ExpansionResult, LLMSession, git.Repo, str]:
    repo, parent = make_repo(tmp_path / "repo", WORKLOAD.seed_bundle())
    runner = RunnerSettings(python=sys.executable, lock_dir=tmp_path / "locks", code_root=CODE_ROOT)
    checker = HarnessChecker(WORKLOAD, [], runner, tmp_path / "checks", ["s1"])
    session = LLMSession(
        backend, pricing_for(backend.model.replace("-fake", "")), Budget(), transcript
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
