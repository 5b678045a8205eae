"""The verifier replicates a new frontier in a fresh judge process: a lucky claim is refuted
and demoted, a real improvement is confirmed (both with the A/A and planted controls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import CandidateRecord, VerdictRecord
from orchestrator import service
from orchestrator.loop import current_state, ensure_seed
from orchestrator.stages import LoopContext
from orchestrator.verification import verify_frontier
from orchestrator.workspace import ACTOR
from search import VerificationVerdict
from tests.orchestrator.conftest import ListReporter, fast_settings

pytestmark = pytest.mark.slow


def promote_by_hand(ctx: LoopContext, edit: tuple[str, str], step: int) -> tuple[str, str]:
    """Commit an edit of the frontier and record it as promoted (as a lucky sweep would)."""
    state = current_state(ctx)
    before = state.frontier_sha
    assert before is not None
    source = (ctx.paths.repo / "candidate.py").read_text()
    ctx.repo.git.checkout(before)
    (ctx.paths.repo / "candidate.py").write_text(source.replace(*edit))
    ctx.repo.index.add(["candidate.py"])
    commit = ctx.repo.index.commit(f"step {step}", author=ACTOR, committer=ACTOR)
    details = {"step": step, "success": True, "frontier_before": before}
    ctx.ledger.append_many(
        [
            CandidateRecord(
                sha=commit.hexsha,
                tree_sha=commit.tree.hexsha,
                parent_sha=before,
                step=step,
                idea_id=None,
                agent="test",
                message="claimed",
                prompt_hash=None,
                cost={},
            ),
            VerdictRecord(
                candidate_sha=commit.hexsha,
                verdict="promoted",
                reason="a lucky sweep",
                stage="sweep",
                objective=2.0,
                details=details,
            ),
        ]
    )
    return commit.hexsha, before


def test_a_lucky_claim_is_refuted_and_a_real_one_confirmed(tmp_path: Path) -> None:
    prepared = service.prepare_run(fast_settings(tmp_path / "run"), ListReporter())
    ctx = prepared.ctx
    seed = ensure_seed(ctx, current_state(ctx)).frontier_sha
    lucky, before = promote_by_hand(ctx, ("# --- end ratchet", "# a comment\n# --- end ratchet"), 1)
    assert current_state(ctx).pending_verification() == (lucky, seed)
    assert verify_frontier(ctx, lucky, before, 2) is VerificationVerdict.REFUTED
    state = current_state(ctx)
    assert state.frontier_sha == seed and lucky in state.demoted
    assert state.pending_verification() is None
    assert not state.candidates[lucky].success
    # Its speed did not replicate; it is still correct, and may still be a parent.
    assert lucky in {node.node_id for node in state.lineage() if node.expandable}

    real, before = promote_by_hand(
        ctx, ('"normalize": "divide"', '"normalize": "fused_softmax"'), 2
    )
    assert verify_frontier(ctx, real, before, 3) is VerificationVerdict.CONFIRMED
    state = current_state(ctx)
    assert state.frontier_sha == real and state.verifications[real] == "confirmed"
    report = service.run_status(tmp_path / "run")
    assert report.demoted == [lucky] and report.verifications[real] == "confirmed"
    ctx.ledger.close()
