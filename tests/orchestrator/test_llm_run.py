"""`ratchet run --expander anthropic` end to end against a local fake Claude: the inspector, the
expander, the researcher and the verifier all run for real; replay re-runs it without a key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import git
import httpx2
import pytest

from ledger import Ledger
from orchestrator import cli, service
from tests.agents.fake_llm import anthropic_history
from tests.orchestrator.conftest import ListReporter, fast_settings
from tests.orchestrator.fake_server import anthropic_reply, proposals_json, serve

pytestmark = pytest.mark.slow


class FakeClaude:
    """Answers as the inspector, the researcher or the expander, by the system prompt."""

    def __init__(self) -> None:
        self.roles: list[str] = []
        self.variant = 0
        self.research_prompts: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        blocks = body.get("system", [])  # text blocks, the last one marked for the cache
        system = "".join(b["text"] for b in blocks) if isinstance(blocks, list) else blocks
        if "workload inspector" in system:
            self.roles.append("inspector")
            text = proposals_json(["Rows are independent: normalize with the fused softmax"])
            return anthropic_reply(0, [{"type": "text", "text": text}], "end_turn")
        if "You are the researcher" in system:
            self.roles.append("researcher")
            self.research_prompts.append(system)
            text = proposals_json(["Exponentiate once and reuse it for the sum (from the paper)"])
            return anthropic_reply(0, [{"type": "text", "text": text}], "end_turn")
        self.roles.append("expander")
        return self._expander(body)

    def _expander(self, body: dict[str, Any]) -> httpx2.Response:
        turn, results = anthropic_history(body)
        if turn == 0:
            name, args = "read_file", {"path": "candidate.py"}
        elif turn == 1:  # a multi-file edit: the code and a notes file, in one turn
            notes = f"Tried edit {self.variant} on this lineage; keep the fp32 softmax."
            edits = [
                self._edit(results[-1]),
                ("write_file", {"path": "NOTES.md", "content": notes}),
            ]
            blocks = [
                {"type": "tool_use", "id": f"toolu_1_{i}", "name": tool, "input": args}
                for i, (tool, args) in enumerate(edits)
            ]
            return anthropic_reply(turn, blocks, "tool_use")
        elif turn == 2:
            name, args = "run_checks", {}
        else:
            message = "Edit\n\nIdea: as asked\nHypothesis: less work\nPredicted effect: faster"
            name, args = "commit", {"message": message}
        block = {"type": "tool_use", "id": f"toolu_{turn}", "name": name, "input": args}
        return anthropic_reply(turn, [block], "tool_use")

    def _edit(self, numbered: str) -> tuple[str, dict[str, str]]:
        """An exact edit of what read_file showed, or (nothing left to switch) a new module."""
        for old, new in (
            ('"normalize": "divide"', '"normalize": "fused_softmax"'),
            ('"exp_passes": "twice"', '"exp_passes": "once"'),
        ):
            if old in numbered:
                return "str_replace", {"path": "candidate.py", "old_text": old, "new_text": new}
        self.variant += 1
        return "write_file", {"path": "variant.py", "content": f"# variant {self.variant}\n"}


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        return [e.record.payload for e in ledger.events(kind)]


def test_an_llm_run_uses_every_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake")
    fake = FakeClaude()
    run_dir = tmp_path / "run"
    with serve(fake) as url:
        first = fast_settings(run_dir, expander="anthropic", llm_base_url=url, max_candidates=1)
        service.run_search(first, ListReporter())
        service.inject_message(run_dir, "LITERATURE", "Milakov & Gimelshein 2018: online softmax")
        second = first.model_copy(update={"max_candidates": 2})
        service.run_search(second, ListReporter())
    assert fake.roles[0] == "inspector" and "researcher" in fake.roles
    assert "keep the fp32 softmax" in fake.research_prompts[0], "repo notes reach the researcher"
    assert fake.roles.count("inspector") == 1, "the inspector runs once per run dir"
    report = service.run_status(run_dir)
    sources = {i.source for i in report.ideas}
    assert {"library", "inspector", "researcher"} <= sources
    assert report.candidates == 3 and report.llm_calls == len(fake.roles)
    assert report.llm_usd == pytest.approx(len(fake.roles) * (2000 * 3 + 400 * 15) / 1e6)
    calls = events(run_dir, "llm_call")
    assert {c["role"] for c in calls} == {"inspector", "expander", "researcher"}
    assert all(len(c["template_hash"]) == 64 and c["model"] == "claude-sonnet-5-5" for c in calls)
    repo = git.Repo(run_dir / "repo")
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        agents = {c.record.agent for c in ledger.candidates() if c.record.parent_sha}
        for stored in ledger.candidates():
            if stored.record.parent_sha:
                parents = [p.hexsha for p in repo.commit(stored.record.sha).parents]
                assert parents == [stored.record.parent_sha]
    assert agents == {"anthropic:claude-sonnet-5-5"}
    verified = events(run_dir, "verification")
    assert verified and all(v["verdict"] in ("confirmed", "inconclusive") for v in verified)
    assert service.verify_ledger(run_dir).ok
    assert (run_dir / "llm-transcript.jsonl").read_text().count("\n") == len(fake.roles)


def test_a_recorded_run_replays_without_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake")
    live = tmp_path / "live"
    with serve(FakeClaude()) as url:
        settings = fast_settings(live, expander="anthropic", llm_base_url=url, max_candidates=1)
        service.run_search(settings.model_copy(update={"verify_frontier": False}), ListReporter())
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    replay = tmp_path / "replay"
    transcript = live / "llm-transcript.jsonl"
    settings = fast_settings(replay, expander=f"replay:{transcript}", max_candidates=1)
    service.run_search(settings.model_copy(update={"verify_frontier": False}), ListReporter())

    def step_one_tree(run_dir: Path) -> str:
        with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
            return next(c.record.tree_sha for c in ledger.candidates() if c.record.step == 1)

    assert step_one_tree(replay) == step_one_tree(live)
    assert all(c["usd"] == 0 and c["backend"] == "replay" for c in events(replay, "llm_call"))


def test_a_spent_budget_stops_the_run_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake")
    run_dir = tmp_path / "run"
    with serve(FakeClaude()) as url:
        settings = fast_settings(
            run_dir, expander="anthropic", llm_base_url=url, llm_budget_usd=0.01, max_candidates=3
        )
        summary = service.run_search(settings, ListReporter())
    assert "money budget" in summary.reason
    assert service.run_status(run_dir).candidates == 1  # the seed only: no step started
    assert service.verify_ledger(run_dir).ok


def test_without_a_key_the_run_fails_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    run_dir = tmp_path / "never"
    assert cli.main(["run", "--expander", "anthropic", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "ANTHROPIC_API_KEY" in err and "--expander offline" in err
    assert not run_dir.exists()
    assert cli.main(["run", "--expander", "replay:/nope.jsonl", "--run-dir", str(run_dir)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["run", "--expander", "gemini", "--run-dir", str(run_dir)]) == 2
    assert "unknown expander" in capsys.readouterr().err
