"""A scripted model that works like an engineer drives a real CPU run in both vendor wire
formats: its candidate is judged and promoted, and the next expansion sees its lesson and its
attempt in the prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
import httpx2
import pytest

from ledger import Ledger
from orchestrator import service
from tests.agents.fake_llm import Script, anthropic_handler, openai_chat_handler, openai_handler
from tests.agents.scripted_agent import MESSAGE, EngineerScript
from tests.orchestrator.conftest import ListReporter, fast_settings
from tests.orchestrator.fake_server import serve

pytestmark = pytest.mark.slow

Handler = Callable[[Script], Callable[[httpx2.Request], httpx2.Response]]
VENDORS: dict[str, tuple[Handler, str]] = {
    "anthropic": (anthropic_handler, "ANTHROPIC_API_KEY"),
    "openai": (openai_handler, "OPENAI_API_KEY"),
    "openai-chat": (openai_chat_handler, "OPENAI_API_KEY"),  # a local server needs no key
}


def first_requests(requests: list[dict[str, Any]]) -> list[str]:
    """The opening request of every expansion (no assistant turn yet), as JSON text."""
    opening = []
    for body in requests:
        history = body.get("messages") or body.get("input") or []
        if len([m for m in history if m.get("role") != "system"]) == 1:
            opening.append(json.dumps(body))
    return opening


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_an_engineering_agent_is_judged_promoted_and_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vendor: str
) -> None:
    handler, key = VENDORS[vendor]
    if vendor == "openai-chat":
        monkeypatch.delenv(key, raising=False)
    else:
        monkeypatch.setenv(key, "sk-fake")
    engineer = EngineerScript()
    script = Script(turn=engineer)
    run_dir = tmp_path / "run"
    with serve(handler(script)) as url:
        settings = fast_settings(
            run_dir,
            expander=vendor,
            llm_base_url=url,
            llm_price_in=1.0,
            llm_price_out=1.0,
            max_candidates=2,
            llm_max_turns=16,
            inspect_workload=False,
        )
        service.run_search(settings, ListReporter())
    assert engineer.expansions == 2
    assert len(engineer.tables) == 2 and all("| config |" in t for t in engineer.tables)
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        first = next(c.record for c in ledger.candidates() if c.record.step == 1)
        verdicts = {v.record.candidate_sha: v.record.verdict for v in ledger.verdicts()}
        lessons = [e.record.payload for e in ledger.events("lesson")]
    assert first.message == MESSAGE and verdicts[first.sha] == "promoted"
    tree = git.Repo(run_dir / "repo").commit(first.sha).tree
    assert "torch.softmax(x, dim=-1)" in tree["rowops.py"].data_stream.read().decode()
    assert "from .rowops import softmax_rows" in tree["candidate.py"].data_stream.read().decode()
    assert first.cost["bench_device_s"] > 0 and first.cost["tool_benchmark_s"] > 0
    assert [lesson["step"] for lesson in lessons] == [1]
    lesson = lessons[0]["text"]
    assert lesson.startswith("torch.softmax in rowops") and "? x parent" not in lesson
    opening = first_requests(script.requests)
    assert len(opening) == 2
    assert lesson not in opening[0], "no lesson exists before the first expansion"
    assert lesson in opening[1], "the second expansion reads the lessons log"
    assert "step 1:" in opening[1] and "Row softmax in its own module, fused" in opening[1]
    assert "rowops.py" in opening[1] or "candidate.py" in opening[1]  # a file map is shown


def test_a_provider_outage_is_retried_then_the_step_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    engineer = EngineerScript()
    # The SDK tries 4 times (llm_max_retries 3): the first expansion ends in a provider error.
    script = Script(turn=engineer, failures=[503] * 4)
    run_dir = tmp_path / "run"
    with serve(openai_chat_handler(script)) as url:
        settings = fast_settings(
            run_dir,
            expander="openai-chat",
            llm_base_url=url,
            max_candidates=1,
            llm_max_turns=16,
            inspect_workload=False,
            verify_frontier=False,
        )
        service.run_search(settings, ListReporter())
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        failures = [e.record.payload for e in ledger.events("expansion_failed")]
        steps = [c.record.step for c in ledger.candidates() if c.record.step]
    assert [(f["step"], f["outcome"], f["retries_left"]) for f in failures] == [
        (1, "provider_error", 1)
    ]
    assert steps == [1], "the retry of step 1 committed its candidate"
