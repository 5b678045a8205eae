"""A frontier demoted by the closing checks after the budget: one composition step over the
frontier that stands again, never when nothing was demoted (real matchain run, real judge)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from agents.dispatch import Regime, write_dispatch
from agents.tunables import read_tunables
from ledger import Ledger, Record
from orchestrator import service
from orchestrator.composition import COMPOSE_IDEA
from orchestrator.events import EventKind, Stage
from orchestrator.state import derive_state
from search import DispatchPlan, Verdict
from tests.orchestrator.conftest import (
    ListReporter,
    config_digest,
    evaluation_summary,
    failed_correctness,
    fast_settings,
    planted_child,
    step_started,
)
from tests.orchestrator.test_inherited_run import FAILED_INPUTS, TREE, _commit, _promoted

pytestmark = pytest.mark.slow

# Wrong wherever the output is short (m=8): the planted frontier fails its child's inputs there.
WRONG_WHEN_SHORT = (
    "        if a.shape[0] < 64:  # planted: this frontier is wrong on short inputs\n"
    "            return (a @ b) @ c + 1.0\n"
)


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ListReporter]:
    """The seed and one rejected step: the budget ends with a composition due (the step wins
    'tall', the seed the rest) and nothing demoted."""
    root = tmp_path_factory.mktemp("closing") / "run"
    reporter = ListReporter()
    settings = fast_settings(
        root, workload="matchain", max_candidates=1, verify_frontier=False, check_feasibility=False
    )
    service.run_search(settings, reporter)
    return root, reporter


def _plant_demotion(run: Path) -> tuple[str, str]:
    """A promoted frontier P on the seed, wrong on short inputs, and its child that changed
    only the regime serving 'tall' and 'square' and failed 'short' on FAILED_INPUTS: (the
    seed, P)."""
    repo = git.Repo(run / "repo")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        seed = str(state.frontier_sha)
        source = repo.git.show(f"{seed}:candidate.py")
        defaults = read_tunables(source)
        regime = Regime(name="r1", tunables={**defaults}, source_sha=seed)
        parent_source = write_dispatch(source, [regime], TREE)
        anchor = '        if chosen["middle_layout"] == "contiguous":\n'
        parent_source = parent_source.replace(anchor, WRONG_WHEN_SHORT + anchor, 1)
        parent, parent_tree = _commit(repo, seed, parent_source, "planted/parent")
        child_source = parent_source.replace(
            '"middle_layout": "as_given"', '"middle_layout": "contiguous"', 1
        )
        child, child_tree = _commit(repo, parent, child_source, "planted/child")
        step = max(state.steps) + 1
        idea = next(iter(state.ideas))
        records: list[Record] = _promoted((parent, parent_tree), seed, step)
        records += [
            step_started(step + 1, parent, idea).to_event(EventKind.STEP_STARTED),
            planted_child(child, child_tree, parent, step + 1, idea),
            evaluation_summary(
                step + 1,
                child,
                Stage.SCREEN,
                [config_digest("short", False, failed_trial=FAILED_INPUTS), config_digest("tall")],
            ).to_event(EventKind.EVALUATION),
            failed_correctness(child, Stage.SCREEN),
        ]
        for record in records:
            ledger.append(record)
    return seed, parent


def test_a_budget_that_ends_with_nothing_demoted_composes_nothing(
    searched: tuple[Path, ListReporter],
) -> None:
    # The guard's other side: a composition was due when the budget ended, and none ran.
    run, reporter = searched
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    assert [c.agent for c in state.candidates.values()] == ["seed", "offline"]
    assert not any("past the budget" in line for line in reporter.lines)
    # Due indeed (else this would hold whatever the loop did): the loop's own planner says so.
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "composition_replay.py"
    replay = subprocess.run(
        [sys.executable, str(script), str(run)], capture_output=True, text=True, check=True
    )
    assert "no composition due" not in replay.stdout, replay.stdout


def test_a_frontier_demoted_after_the_budget_is_followed_by_one_composition(
    searched: tuple[Path, ListReporter], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(searched[0], run)
    seed, planted = _plant_demotion(run)
    reporter = ListReporter()
    settings = fast_settings(
        run, workload="matchain", max_candidates=1, verify_frontier=False, check_feasibility=False
    )
    summary = service.run_search(settings, reporter)
    assert summary.reason == "reached 1 candidates", summary.reason
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    assert planted in state.demoted
    # The planted frontier is a composer's too.
    composed = [c for c in state.candidates.values() if c.agent == "composer" and c.sha != planted]
    assert len(composed) == 1, reporter.lines
    assert [line for line in reporter.lines if "past the budget" in line]
    frontier = state.candidates[str(state.frontier_sha)]
    assert frontier.sha == composed[0].sha and frontier.verdict is Verdict.PROMOTED
    assert frontier.idea_id == COMPOSE_IDEA and frontier.parent_sha == seed
    plan = DispatchPlan.model_validate(state.steps[frontier.step].started.composition)
    # 'short', where the inputs demoted the planted frontier, goes to the seed: the only
    # variant judged correct on them (its recheck); the step that wins 'tall' takes 'tall'.
    assert plan.assignment["short"] == seed
    assert plan.assignment["tall"] != seed
