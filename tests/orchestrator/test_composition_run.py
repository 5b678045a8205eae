"""A real CPU search composes the regime winners it measured and promotes the composition."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from agents.dispatch import read_regimes
from agents.regimes import changed_configs
from kernels.matchain.workload import SWEPT, matchain_workload
from ledger import Ledger
from orchestrator import service
from orchestrator.composition import COMPOSE_IDEA
from orchestrator.events import EventKind
from orchestrator.export import ExportError
from orchestrator.provenance import GainOrigin, frontier_gains
from orchestrator.regime_scores import measured_scores
from orchestrator.state import derive_state
from search import DispatchPlan, Verdict
from tests.orchestrator.conftest import ListReporter, fast_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("matchain-run") / "run"
    settings = fast_settings(root, workload="matchain", max_candidates=3, verify_frontier=False)
    summary = service.run_search(settings, ListReporter())
    assert summary.reason == "reached 3 candidates"
    return root


def test_the_composition_beats_each_of_its_parts_and_is_promoted(run_dir: Path) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        scores = measured_scores(ledger, anchor=str(state.frontier_sha))
    composed = [c for c in state.candidates.values() if c.agent == "composer"]
    assert len(composed) == 1, [c.agent for c in state.candidates.values()]
    frontier = state.candidates[str(state.frontier_sha)]
    assert frontier.sha == composed[0].sha and frontier.verdict is Verdict.PROMOTED
    assert frontier.idea_id == COMPOSE_IDEA
    plan = DispatchPlan.model_validate(state.steps[frontier.step].started.composition)
    # Each part wins one regime: left-to-right where the output is wide, right-to-left where
    # it is tall; the composition is faster than either over the whole set.
    assert plan.assignment["tall"] != plan.assignment["short"]
    assert frontier.objective is not None
    for part in plan.variants:
        part_geomean = math.exp(sum(math.log(s.median) for s in scores[part].values()) / 3)
        assert frontier.objective > 1.2 * part_geomean, (part[:10], part_geomean)


def test_the_composed_source_dispatches_on_sizes_and_says_where_it_came_from(
    run_dir: Path,
) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    frontier = state.candidates[str(state.frontier_sha)]
    source = git.Repo(run_dir / "repo").git.show(f"{frontier.sha}:candidate.py")
    regimes = read_regimes(source)
    assert len(regimes) == 1 and {r["association"] for r in regimes.values()} <= {"left", "right"}
    predicate = source.split("def choose_regime(sizes):")[1].split("# --- end ratchet:dispatch")[0]
    assert "if sizes." in predicate and " < " in predicate and "==" not in predicate
    gains = frontier_gains(state)
    assert gains[-1].origin is GainOrigin.SEARCH_COMPOSITION
    assert "compose: 2 regimes" in frontier.message


def test_the_frontier_passed_feasibility_and_only_a_checked_candidate_exports(
    run_dir: Path, tmp_path: Path
) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    frontier = str(state.frontier_sha)
    # The run judged its final frontier on the set's untimed config before it stopped.
    assert state.feasibility == {frontier: True}
    manifest = service.export(run_dir, None, tmp_path / "frontier")
    assert (manifest.feasibility, manifest.feasibility_configs) == ("passed", ["long"])
    # How close each pass came to failing travels with it: the check's worst element, and
    # each timed config's, every one a share below 1 of what the tolerance allows.
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        checks = [
            e.payload["payload"]
            for e in ledger.entries()
            if e.payload.get("kind") == EventKind.FEASIBILITY
        ]
    assert [c["sha"] for c in checks] == [frontier]
    assert 0 <= checks[0]["tolerance_used"] < 1
    shares = [row.tolerance_used for row in manifest.per_config.values()]
    assert shares and all(share is not None and 0 <= share < 1 for share in shares), shares
    # Any other candidate was never checked: not exported unless asked, and then marked.
    other = next(c.sha for c in state.candidates.values() if c.sha != frontier and c.expandable)
    with pytest.raises(ExportError, match=r"unchecked on the feasibility configs \['long'\]"):
        service.export(run_dir, other, tmp_path / "other")
    assert not (tmp_path / "other").exists()
    marked = service.export(run_dir, other, tmp_path / "other", unchecked=True)
    assert marked.feasibility == "unchecked"


def test_children_of_the_composition_are_screened_where_their_change_reaches(
    run_dir: Path, tmp_path: Path
) -> None:
    # Go on from the composed frontier: three more steps that must expand it. Each child
    # changes one of its regimes, and its screen measures the configs that regime serves.
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        composed = str(derive_state(ledger).frontier_sha)
    service.inject_message(run, "REDIRECT", f"parent={composed} steps=3")
    settings = fast_settings(run, workload="matchain", max_candidates=6, verify_frontier=False)
    service.run_search(settings, ListReporter())
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    repo = git.Repo(run / "repo")
    parent = repo.git.show(f"{composed}:candidate.py")
    sizes = {c: matchain_workload().dispatch_features(c) for c in SWEPT}
    children = [c for c in state.candidates.values() if c.parent_sha == composed]
    assert len(children) >= 3, [(c.step, c.idea_id) for c in children]
    narrowed = 0
    for child in children:
        changed = changed_configs(parent, repo.git.show(f"{child.sha}:candidate.py"), sizes)
        assert changed, child.message  # one regime of a tree the operator can read
        request = json.loads((run / f"evals/step-{child.step:05d}-screen/request.json").read_text())
        assert set(request["config_ids"]) == changed, (child.message, changed)
        narrowed += len(changed) < len(SWEPT)
    assert narrowed, "every child changed a regime that serves every config"


def test_the_composition_replay_reads_a_finished_run(run_dir: Path, tmp_path: Path) -> None:
    # benchmarks/composition_replay.py plans over the run's final state as the loop would:
    # the promoted composition serves each regime with its winner, so no split is left.
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "composition_replay.py"
    done = subprocess.run(
        [sys.executable, str(script), str(run_dir)], capture_output=True, text=True, check=True
    )
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        frontier = str(derive_state(ledger).frontier_sha)
    assert done.stdout.startswith(f"frontier {frontier[:10]}, noise floor ")
    assert "no composition due" in done.stdout
    missing = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "none")], capture_output=True, text=True
    )
    assert missing.returncode != 0 and "not a run directory" in missing.stderr
