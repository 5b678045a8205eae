"""The repair step on a real matchain run: a child that missed the tolerance narrowly is judged
once more with a headroom idea applied to its code, declared a child of its parent (real judge,
real git); a wide miss, or repairs switched off, leaves the ordinary search."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import git
import pytest

from agents.tunables import read_tunables, write_tunables
from ledger import Ledger, Record
from orchestrator import service
from orchestrator.events import EventKind, IdeaRegistered, Stage
from orchestrator.state import SearchState, derive_state
from tests.orchestrator.conftest import (
    ListReporter,
    config_digest,
    evaluation_summary,
    failed_correctness,
    planted_child,
    step_started,
)
from tests.orchestrator.conftest import fast_settings as base_settings
from tests.orchestrator.test_inherited_run import _commit

pytestmark = pytest.mark.slow

FLIP = {"left": "right", "right": "left", "as_given": "contiguous", "contiguous": "as_given"}
HEADROOM = "planted-headroom"


def fast_settings(run: Path, **overrides: Any) -> Any:
    return base_settings(
        run, workload="matchain", verify_frontier=False, check_feasibility=False, **overrides
    )


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repair") / "run"
    service.run_search(fast_settings(root, max_candidates=1), ListReporter())
    return root


def _plant(
    run: Path, share: float, reads: list[str] | None = None, faster: float | None = None
) -> tuple[str, str, dict[str, str]]:
    """A child C of the frontier P that moved middle_layout and failed config 'tall' using
    `share` of its tolerance (its code there read `reads`; None: not reported), and passed
    'short' (`faster` times P there, paired, when given; else without timings), and a
    headroom idea that flips association: (P, C, P's tunables)."""
    repo = git.Repo(run / "repo")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        parent = str(state.frontier_sha)
        source = repo.git.show(f"{parent}:candidate.py")
        tunables = read_tunables(source)
        moved = {**tunables, "middle_layout": FLIP[tunables["middle_layout"]]}
        child, child_tree = _commit(repo, parent, write_tunables(source, moved), "planted/child")
        step = state.next_step
        idea = next(i for i in state.ideas if i != HEADROOM)
        failed = config_digest("tall", False, reads, tolerance_used=share)
        passed = config_digest("short")
        sweep = evaluation_summary(step, child, Stage.SWEEP, [failed, passed])
        if faster is not None:
            paired = {"arm": "candidate", "other": "parent", "median": faster, "rounds": 10}
            paired |= {"ci_low": faster * 0.99, "ci_high": faster * 1.01}
            passed = passed.model_copy(update={"ratios": [paired]})
            arms = {"candidate": child, "parent": parent}
            sweep = sweep.model_copy(update={"configs": [failed, passed], "arms": arms})
        records: list[Record] = [
            IdeaRegistered(
                idea_id=HEADROOM,
                text="give up speed for headroom",
                source="library",
                quality=0.5,
                uncertainty=0.5,
                targets={"association": FLIP[tunables["association"]]},
                devices=["cpu", "cuda"],
                headroom=True,
            ).to_event(EventKind.IDEA_REGISTERED),
            step_started(step, parent, idea).to_event(EventKind.STEP_STARTED),
            planted_child(child, child_tree, parent, step, idea),
            sweep.to_event(EventKind.EVALUATION),
            failed_correctness(child, Stage.SWEEP),
        ]
        for record in records:
            ledger.append(record)
    return parent, child, tunables


def _go_on(run: Path, **overrides: Any) -> SearchState:
    """The run again, allowed one candidate more than it has."""
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        count = len(derive_state(ledger).candidates) - 1  # the seed is not counted
    service.run_search(fast_settings(run, max_candidates=count + 1, **overrides), ListReporter())
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        return derive_state(ledger)


def test_a_narrow_miss_is_repaired_from_its_own_code_as_its_parents_child(
    searched: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(searched, run)
    parent, child, tunables = _plant(run, 1.3, ["association", "middle_layout"])
    # Composition off: the run's regime winners would otherwise call for one first (below).
    state = _go_on(run, compose_regimes=False)
    step = state.steps[max(state.steps)]
    assert step.started.repair_of == child and step.started.parent_sha == parent
    assert step.started.idea_id == HEADROOM and step.sha is not None
    repaired = state.candidates[step.sha]
    assert repaired.parent_sha == parent and repaired.verdict is not None  # judged for real
    repo = git.Repo(run / "repo")
    assert [p.hexsha for p in repo.commit(step.sha).parents] == [parent]
    made = read_tunables(repo.git.show(f"{step.sha}:candidate.py"))
    # The child's own change is kept; the headroom idea's is added on top of it.
    assert made["middle_layout"] == FLIP[tunables["middle_layout"]]
    assert made["association"] == FLIP[tunables["association"]]
    assert f"repairing {child[:10]}" in repo.commit(step.sha).message
    again = _go_on(run, compose_regimes=False)  # repaired once, never again
    assert [s.started.repair_of for s in again.steps.values()].count(child) == 1


def test_a_composition_due_goes_before_the_repair(searched: Path, tmp_path: Path) -> None:
    # The miss was 3x its parent where it passed: a composition serving that config with it
    # is built from measurements already made and comes first; the repair follows.
    run = tmp_path / "run"
    shutil.copytree(searched, run)
    _, child, _ = _plant(run, 1.3, ["association", "middle_layout"], faster=3.0)
    first = _go_on(run)
    composed = first.steps[max(first.steps)].started
    assert composed.composition is not None and composed.repair_of is None
    assert child in composed.composition["variants"]
    second = _go_on(run)
    assert second.steps[max(second.steps)].started.repair_of == child


def test_a_wide_miss_a_miss_no_headroom_idea_reaches_or_repairs_off_are_not_repaired(
    searched: Path, tmp_path: Path
) -> None:
    cases: list[tuple[float, list[str] | None, dict[str, Any]]] = [
        (40.0, None, {}),
        # Its code read only middle_layout where it failed: flipping association acts elsewhere.
        (1.3, ["middle_layout"], {}),
        (1.3, None, {"repair_narrow_misses": False}),
    ]
    for number, (share, reads, overrides) in enumerate(cases):
        run = tmp_path / f"run-{number}"
        shutil.copytree(searched, run)
        _, child, _ = _plant(run, share, reads)
        state = _go_on(run, **overrides)
        assert all(s.started.repair_of is None for s in state.steps.values())
        assert max(state.steps) > state.candidates[child].step  # a step was drawn instead


def test_the_replay_script_names_the_open_headroom_ideas_of_each_miss(
    searched: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(searched, run)
    _, child, _ = _plant(run, 1.3, ["middle_layout"])
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "repair_replay.py"
    done = subprocess.run(
        [sys.executable, str(script), str(run)], capture_output=True, text=True, check=True
    )
    row = next(line for line in done.stdout.splitlines() if line.startswith(f"| {child[:10]}"))
    # Its code read only middle_layout on 'tall' (its own report): no headroom idea acts.
    assert "tall (1.300)" in row and "| own |" in row and row.endswith("| none |")
    missing = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "none")], capture_output=True, text=True
    )
    assert missing.returncode != 0 and "not a run directory" in missing.stderr
