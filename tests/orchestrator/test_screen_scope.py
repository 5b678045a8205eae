"""Which configs a screen measures, given what the child's change reaches, and commits that
reach none."""

from __future__ import annotations

import tempfile
from pathlib import Path

import git

from agents.expander import ExpansionOutcome, ExpansionResult
from agents.tunables import read_tunables, write_tunables
from orchestrator import service
from orchestrator.events import StepStarted
from orchestrator.loop import current_state
from orchestrator.screen_scope import (
    REGIME_SCREEN_CONFIGS,
    pick_screen,
    reached_configs,
    unreached_result,
)
from orchestrator.stages import LoopContext
from orchestrator.state import StepView
from orchestrator.workspace import read_file
from tests.orchestrator.conftest import ListReporter, fast_settings

SCREENING = ["2", "1", "7", "13"]
FLOPS = {"1": 5.0, "2": 1.0, "6": 900.0, "7": 2.0, "8": 300.0, "13": 40.0, "9": 4.0}


def test_a_change_that_reaches_every_config_is_screened_as_the_workload_says() -> None:
    assert pick_screen(SCREENING, set(FLOPS), FLOPS.__getitem__) == SCREENING
    assert pick_screen(SCREENING, None, FLOPS.__getitem__) == SCREENING  # cannot tell
    assert pick_screen(SCREENING, set(), FLOPS.__getitem__) == SCREENING  # reaches nothing


def test_the_screening_configs_a_regime_serves_and_only_those() -> None:
    assert pick_screen(SCREENING, {"1", "13", "9", "6"}, FLOPS.__getitem__) == ["1", "13"]


def test_a_regime_no_screening_config_reaches_is_screened_on_its_cheapest() -> None:
    got = pick_screen(SCREENING, {"6", "8", "9"}, FLOPS.__getitem__)
    assert got == ["9", "8"] and len(got) == REGIME_SCREEN_CONFIGS
    assert pick_screen(SCREENING, {"6"}, FLOPS.__getitem__) == ["6"]


def test_a_change_reaches_only_where_the_parent_read_what_it_changed() -> None:
    # r1 serves 1, 8 and 13; the child set fp16 torch-path islands in it. The parent's code
    # read matmul_precision only on 8 (the fused kernels serve 1 and 13), and 9's reads are
    # not known: 8 and 9 are reached, 1 and 13 run exactly the parent's code.
    changed = {c: {"matmul_precision"} for c in ("1", "8", "9", "13")} | {"2": set()}
    read = {
        "1": {"fused_kernel", "fused_rows"},
        "8": {"fused_kernel", "matmul_precision"},
        "13": {"fused_kernel", "fused_rows"},
        "2": {"matmul_precision"},
    }
    assert reached_configs(changed, read) == {"8", "9"}
    assert reached_configs(changed, {}) == {"1", "8", "9", "13"}  # nothing known: as before
    assert pick_screen(SCREENING, reached_configs(changed, read), FLOPS.__getitem__) == ["9", "8"]


def _child(ctx: LoopContext, parent: str, source: str, branch: str) -> str:
    """A commit of the entry module holding `source` on `parent` (a real git commit)."""
    repo, entry = ctx.repo, ctx.workload.candidate_file
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        repo.git.worktree("add", "-b", branch, str(tree), parent)
        (tree / entry).write_text(source)
        git.Repo(tree).git.commit("-am", branch)
        sha = git.Repo(tree).head.commit.hexsha
        repo.git.worktree("remove", "--force", str(tree))
    return sha


def test_a_commit_that_changes_only_unread_settings_makes_no_change(tmp_path: Path) -> None:
    """A real matchain run dir: the seed's code read `association` and never `middle_layout`
    on any config; a child changing only middle_layout is nothing new, one changing the
    association (or any code) is judged."""
    ctx = service.prepare_run(
        fast_settings(tmp_path / "run", workload="matchain"), ListReporter()
    ).ctx
    state = current_state(ctx)
    seed = str(state.seed_sha)
    source = read_file(ctx.repo, seed, ctx.workload.candidate_file)
    tunables = read_tunables(source)
    layout = _child(
        ctx, seed, write_tunables(source, {**tunables, "middle_layout": "contiguous"}), "c/layout"
    )
    order = _child(
        ctx, seed, write_tunables(source, {**tunables, "association": "right"}), "c/assoc"
    )
    edited = _child(
        ctx,
        seed,
        write_tunables(source, {**tunables, "middle_layout": "contiguous"}) + "\n# edited\n",
        "c/code",
    )
    step = StepView(
        started=StepStarted(
            step=1,
            parent_sha=seed,
            idea_id="i",
            parent_theta=None,
            idea_theta=0.5,
            idea_forced=False,
            parent_forced=False,
        )
    )

    def outcome(sha: str) -> ExpansionOutcome:
        done = ExpansionResult(outcome=ExpansionOutcome.COMMITTED, agent="offline", sha=sha)
        return unreached_result(ctx, state, step, done).outcome

    configs = ctx.config_set.config_ids
    state.settings_read[seed] = {c: {"association"} for c in configs}
    assert outcome(layout) is ExpansionOutcome.NO_CHANGE
    assert outcome(order) is ExpansionOutcome.COMMITTED
    assert outcome(edited) is ExpansionOutcome.COMMITTED
    # One config unreported: the change may act there, and is judged.
    del state.settings_read[seed][configs[0]]
    assert outcome(layout) is ExpansionOutcome.COMMITTED
    ctx.ledger.close()
