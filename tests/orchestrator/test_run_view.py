"""The run's read model (orchestrator.run_view) against a small real run: every view agrees
with the ledger, the repository and the state the loop derives."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from ledger import CandidateRecord, EventRecord, Ledger
from orchestrator import run_view
from orchestrator.events import EventKind, LLMCallEvent
from orchestrator.state import derive_state
from tests.orchestrator.dashboard.real_run import SCRIPT_IDEA, copy_run, pristine_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pristine_run(tmp_path_factory)


def _open(run_dir: Path) -> Ledger:
    return Ledger.open_path(run_dir / "ledger.sqlite", create=False)


def test_overview_names_the_frontier_baseline_table_budgets_and_devices(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        state = derive_state(ledger)
        view = run_view.overview(ledger, run_view.read_run(ledger, run_dir))
    assert state.run is not None
    assert view.frontier_sha == state.frontier_sha and view.baseline == state.run.baseline
    assert view.objective is not None and view.objective_ci is not None
    assert view.objective_kind == "geomean"
    table = view.frontier_table
    assert table is not None and table.stage == "sweep"
    assert [row.config_id for row in table.rows] == state.run.config_ids
    for row in table.rows:
        assert row.correct and row.ms and row.baseline_ms and row.x_baseline
        assert row.floor_ratio is not None and row.floor_ratio > 1  # never faster than the floor
        assert row.protocol.startswith("batched")
    budgets = view.budgets
    assert budgets.invocations == 2 and budgets.wall_s > 0 and budgets.device_s > 0
    assert budgets.llm_usd == 0 and budgets.llm_tokens_in == 0 and budgets.minutes_budget == 10
    assert len(view.devices) == 1
    device = view.devices[0]
    assert device.environment["device"] == "cpu" and "cpu" in device.noise_floors
    assert view.status.candidates == 4 and view.head_seq == ledger_head(run_dir)


def ledger_head(run_dir: Path) -> int:
    with _open(run_dir) as ledger:
        return ledger.head()[0]


def test_trajectory_has_every_verdict_and_the_frontier_over_time(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        data = run_view.read_run(ledger, run_dir)
        view = run_view.trajectory(ledger, data)
        verdicts = ledger.verdicts()
    assert [p.seq for p in view.points] == [v.seq for v in verdicts]
    assert view.config_ids == ["s1", "s2", "s3"]
    seed = view.points[0]
    assert seed.step == 0 and seed.verdict_class is run_view.VerdictClass.PROMOTED
    assert set(seed.per_config) == set(view.config_ids)
    for point in view.points:
        assert point.verdict_class in set(run_view.VerdictClass)
        assert point.elapsed_s >= 0 and point.title
    assert view.frontier[0].sha == seed.sha and view.frontier[0].cause == "promoted"
    assert view.frontier[-1].sha == data.state.frontier_sha
    times = [f.elapsed_s for f in view.frontier]
    assert times == sorted(times)


def test_lineage_marks_the_frontier_path_and_agrees_with_git(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        view = run_view.lineage(run_view.read_run(ledger, run_dir))
    assert len(view.nodes) == 4 and view.repository_problem is None
    seed = view.nodes[0]
    assert seed.depth == 0 and seed.parent_sha is None and seed.on_frontier_path
    frontier = next(n for n in view.nodes if n.is_frontier)
    assert frontier.on_frontier_path and frontier.sha == view.frontier_sha
    assert view.disagreements == 0
    for node in view.nodes[1:]:
        assert node.git_parents == [node.parent_sha] and node.depth >= 1


def test_lineage_shows_where_git_ancestry_disagrees_with_the_declared_parent(
    run_dir: Path, tmp_path: Path
) -> None:
    copy = copy_run(run_dir, tmp_path / "run")
    with _open(copy) as ledger:
        state = derive_state(ledger)
        assert state.frontier_sha is not None and state.seed_sha is not None
        other = next(s for s in state.candidates if s not in (state.seed_sha, state.frontier_sha))
        repo = git.Repo(copy / "repo")
        tree = repo.commit(other).tree.hexsha
        # A commit made on the frontier but declared as a child of another candidate.
        sha = str(repo.git.commit_tree(tree, "-p", state.frontier_sha, "-m", "mislabeled"))
        record = CandidateRecord(
            sha=sha,
            tree_sha=tree,
            parent_sha=other,
            step=99,
            idea_id=None,
            agent="hand",
            message="mislabeled",
            prompt_hash=None,
            cost={},
        )
        ledger.append(record)
        view = run_view.lineage(run_view.read_run(ledger, copy))
    assert view.disagreements == 1
    node = next(n for n in view.nodes if n.sha == sha)
    assert node.git_disagrees and node.git_parents == [state.frontier_sha]
    assert node.parent_sha == other and node.verdict is None and node.verdict_class is None


def test_candidate_detail_has_idea_diff_results_logs_and_commands(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        data = run_view.read_run(ledger, run_dir)
        idea_seq = next(m.seq for m in ledger.messages() if m.record.kind == "IDEA")
        human = next(c for c in data.state.candidates.values() if c.idea_id == f"human-{idea_seq}")
        view = run_view.candidate_detail(ledger, data, human.sha[:8])
    assert view.sha == human.sha and view.idea_text == SCRIPT_IDEA
    assert SCRIPT_IDEA in view.message and view.diff.startswith("diff --git")
    assert view.diff_problem is None and view.verdict is not None and view.reason
    assert view.evaluations[0].stage == "screen"
    assert all(log.text for log in view.judge_logs), view.judge_logs
    assert view.cost["wall_s"] >= 0 and view.llm_calls == [] and view.transcript_note is None
    assert view.checkout_command == f"ratchet checkout {human.sha} --run-dir {run_dir}"
    assert f"--sha {human.sha} --out " in view.export_command


def test_candidate_detail_of_the_seed_and_of_an_unknown_sha(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        data = run_view.read_run(ledger, run_dir)
        assert data.state.seed_sha is not None
        seed = run_view.candidate_detail(ledger, data, data.state.seed_sha)
        with pytest.raises(run_view.RunViewError, match="'ffff0000' matches no candidate"):
            run_view.candidate_detail(ledger, data, "ffff0000")
    assert seed.diff == "" and seed.diff_problem and "seed" in seed.diff_problem


def test_ideas_carry_prior_posterior_and_author(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        rows = run_view.ideas(run_view.read_run(ledger, run_dir))
    human = next(r for r in rows if r.source == "human")
    assert human.author == "tester" and human.text == SCRIPT_IDEA
    assert human.trials in (0, 1)  # its one candidate counts unless its sweep was tainted
    for row in rows:
        assert row.prior_mean == pytest.approx(row.quality)
        assert row.posterior_alpha - row.prior_alpha == pytest.approx(row.successes)
        assert row.posterior_beta - row.prior_beta == pytest.approx(row.trials - row.successes)


def test_queue_says_what_each_message_did(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        view = run_view.queue(ledger, run_view.read_run(ledger, run_dir))
    idea, redirect = view.messages
    assert idea.kind == "IDEA" and idea.read and f"idea arm human-{idea.seq}: " in idea.effect
    assert redirect.kind == "REDIRECT" and redirect.effect.startswith("expands ")
    assert "for 1 step(s)" in redirect.effect and redirect.retracted_by is None
    assert "CONSTRAINT" in view.kinds and "forbid TUNABLE=VALUE" in view.formats["CONSTRAINT"]


def test_ledger_view_head_counts_and_last_verification(run_dir: Path) -> None:
    with _open(run_dir) as ledger:
        head_seq, head_hash = ledger.head()
        view = run_view.ledger_view(ledger, recent=5)
    assert view.head == f"{head_seq}:{head_hash}" and sum(view.counts.values()) == head_seq
    assert [r.seq for r in view.recent] == list(range(head_seq, head_seq - 5, -1))
    assert view.verified_at is not None and view.verified_seq is not None  # the resume checked
    assert view.journal is not None and view.journal.endswith("ledger.sqlite.heads")


def test_views_of_a_run_that_has_not_started(tmp_path: Path) -> None:
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        data = run_view.read_run(ledger, tmp_path)
        over = run_view.overview(ledger, data)
        tree = run_view.lineage(data)
        path = run_view.trajectory(ledger, data)
        assert run_view.queue(ledger, data).messages == []
        assert run_view.ledger_view(ledger).head_seq == 0
    assert over.frontier_sha is None and over.frontier_table is None and over.devices == []
    assert over.budgets.invocations == 0 and over.budgets.wall_s == 0
    assert tree.nodes == [] and tree.repository_problem is not None
    assert path.points == [] and path.frontier == [] and path.started_at is None


def _call(step: int, role: str, usd: float) -> EventRecord:
    return LLMCallEvent(
        step=step,
        role=role,
        backend="anthropic",
        model="claude-test",
        template_hash="0" * 64,
        input_tokens=1200,
        output_tokens=300,
        usd=usd,
        wall_s=2.5,
        outcome="ok",
    ).to_event(EventKind.LLM_CALL)


def test_candidate_detail_shows_its_agent_calls_with_their_transcript_turns(
    run_dir: Path, tmp_path: Path
) -> None:
    copy = copy_run(run_dir, tmp_path / "run")
    with _open(copy) as ledger:
        data = run_view.read_run(ledger, copy)
        cand = next(c for c in data.state.candidates.values() if c.step == 1)
        ledger.append_many([_call(0, "inspector", 0.01), _call(1, "expander", 0.25)])
        turns = [{"text": "the inputs are tall"}, {"text": "<b>edited</b> the kernel"}]
        transcript = copy / "llm-transcript.jsonl"
        transcript.write_text("".join(json.dumps({"role": "x", "turn": t}) + "\n" for t in turns))
        view = run_view.candidate_detail(ledger, run_view.read_run(ledger, copy), cand.sha)
        assert [c.role for c in view.llm_calls] == ["expander"] and view.llm_usd == 0.25
        call = view.llm_calls[0]
        assert call.turn is not None and "<b>edited</b> the kernel" in call.turn
        assert view.transcript_note is None
        budgets = run_view.budget_use(ledger, run_view.read_run(ledger, copy))
        assert (budgets.llm_tokens_in, budgets.llm_tokens_out) == (2400, 600)
        assert budgets.llm_usd == pytest.approx(0.26)
        transcript.write_text(json.dumps({"role": "x", "turn": turns[0]}) + "\n")
        view = run_view.candidate_detail(ledger, run_view.read_run(ledger, copy), cand.sha)
    assert view.llm_calls[0].turn is None
    assert view.transcript_note is not None and "does not line up" in view.transcript_note
