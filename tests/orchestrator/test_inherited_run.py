"""A child's failure where it runs its parent's code: the parent is judged on the same inputs,
and a frontier that fails them is demoted (real matchain run, real judge, real git)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import git
import pytest

from agents.dispatch import Regime, RegimeBranch, write_dispatch
from agents.tunables import read_tunables
from kernels.workload import TrialSpec
from ledger import CandidateRecord, Ledger, Record, VerdictRecord
from orchestrator import service
from orchestrator.events import EventKind, InheritedCheck, Stage
from orchestrator.export import ExportError
from orchestrator.loop import current_state
from orchestrator.measured import SweepJob, plan_sweep, run_plan
from orchestrator.regime_scores import inherited_failures
from orchestrator.state import CHECK_ATTEMPTS, derive_state
from tests.orchestrator.conftest import (
    ListReporter,
    config_digest,
    evaluation_summary,
    failed_correctness,
    fast_settings,
    planted_child,
    step_started,
)

pytestmark = pytest.mark.slow

# Short outputs (m=8) go to r1; tall and square keep TUNABLES.
TREE = RegimeBranch(feature="m", threshold=64.0, below="r1", above=None)
WRONG_WHEN_TALL = (
    "        if a.shape[0] > 512:  # planted: this parent is wrong on tall inputs\n"
    "            return (a @ b) @ c + 1.0\n"
)
FAILED_INPUTS = TrialSpec(seed=4321, padding_ratio=0.0, input_scale=1.0)
# Wrong on FAILED_INPUTS' tall factors only (their first element), right on any other draw.
WRONG_ON_FAILED_INPUTS = (
    "        if a.shape[0] > 512 and bool((a[0, 0] + 0.0147374849).abs() < 1e-8):  # planted\n"
    "            return (a @ b) @ c + 1.0\n"
)
# Never returns on tall inputs: a judge of it there ends at its time limit (TIMEOUT).
HANGS_WHEN_TALL = (
    "        while a.shape[0] > 512:  # planted: this candidate never ends on tall inputs\n"
    "            a = a + 0.0\n"
)
# Raises on tall inputs: its own code fails there (RUNTIME_ERROR), no answer of the judge's.
RAISES_WHEN_TALL = (
    "        if a.shape[0] > 512:  # planted: this candidate raises on tall inputs\n"
    "            raise RuntimeError('planted: no tall inputs here')\n"
)


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inherited") / "run"
    settings = fast_settings(
        root, workload="matchain", max_candidates=1, verify_frontier=False, check_feasibility=False
    )
    service.run_search(settings, ListReporter())
    return root


def _commit(repo: git.Repo, parent: str, source: str, branch: str) -> tuple[str, str]:
    """A commit of candidate.py holding `source` on `parent`: (commit sha, tree sha)."""
    root = str(repo.working_dir)
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        input=source,
        capture_output=True,
        text=True,
        cwd=root,
        check=True,
    ).stdout.strip()
    listing = f"100644 blob {blob}\tcandidate.py\n"
    tree = subprocess.run(
        ["git", "mktree"], input=listing, capture_output=True, text=True, cwd=root, check=True
    ).stdout.strip()
    sha = repo.git.commit_tree(tree, "-p", parent, "-m", branch)
    repo.git.branch(branch, sha)
    return sha, tree


def _plant(run: Path, parent_wrong: bool, child_regime: str) -> tuple[str, str, str]:
    """A dispatching frontier P (wrong on tall inputs when asked) and its child C that changed
    one regime and failed config 'tall' on FAILED_INPUTS: (frontier before P, P, C)."""
    repo = git.Repo(run / "repo")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        before = str(state.frontier_sha)
        source = repo.git.show(f"{before}:candidate.py")
        defaults = read_tunables(source)
        regime = Regime(name="r1", tunables={**defaults}, source_sha=before)
        parent_source = write_dispatch(source, [regime], TREE)
        if parent_wrong:
            anchor = '        if chosen["middle_layout"] == "contiguous":\n'
            parent_source = parent_source.replace(anchor, WRONG_WHEN_TALL + anchor, 1)
        parent, parent_tree = _commit(repo, before, parent_source, "planted/parent")
        moved = {**defaults, "middle_layout": "contiguous"}
        if child_regime == "r1":
            regimes = [Regime(name="r1", tunables=moved, source_sha=before)]
            child_source = write_dispatch(parent_source, regimes, TREE)
        else:  # TUNABLES, which serves tall: the change reaches the failed config
            child_source = parent_source.replace(
                '"middle_layout": "as_given"', '"middle_layout": "contiguous"', 1
            )
        child, child_tree = _commit(repo, parent, child_source, "planted/child")
        step = max(state.steps) + 1
        idea = next(iter(state.ideas))
        records = _promoted((parent, parent_tree), before, step)
        records += _failed_on_tall((child, child_tree), parent, step + 1, idea)
        for record in records:
            ledger.append(record)
    return before, parent, child


def _promoted(commit: tuple[str, str], parent: str, step: int) -> list[Record]:
    """A composer's candidate (commit sha, tree sha) on `parent`, promoted: the frontier."""
    sha, tree = commit
    return [
        CandidateRecord(
            sha=sha,
            tree_sha=tree,
            parent_sha=parent,
            step=step,
            idea_id=None,
            agent="composer",
            message="planted frontier",
            prompt_hash=None,
            cost={},
        ),
        VerdictRecord(
            candidate_sha=sha,
            verdict="promoted",
            stage="sweep",
            reason="planted",
            objective=100.0 + step,
            details={"success": True},
        ),
    ]


def _failed_on_tall(commit: tuple[str, str], parent: str, step: int, idea: str) -> list[Record]:
    """Step `step`: the child (commit sha, tree sha) of `parent` failing 'tall' on
    FAILED_INPUTS in its screen."""
    sha, tree = commit
    return [
        step_started(step, parent, idea).to_event(EventKind.STEP_STARTED),
        planted_child(sha, tree, parent, step, idea),
        evaluation_summary(
            step,
            sha,
            Stage.SCREEN,
            [config_digest("tall", False, failed_trial=FAILED_INPUTS), config_digest("short")],
        ).to_event(EventKind.EVALUATION),
        failed_correctness(sha, Stage.SCREEN),
    ]


def _go_on(run: Path, **overrides: Any) -> tuple[ListReporter, list[InheritedCheck]]:
    """The same run again, allowed no new candidate: only what is due between steps runs."""
    reporter = ListReporter()
    settings = fast_settings(
        run,
        workload="matchain",
        max_candidates=3,
        verify_frontier=False,
        check_feasibility=False,
        **overrides,
    )
    service.run_search(settings, reporter)
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        events = ledger.events(EventKind.INHERITED_CHECK.value)
    return reporter, [InheritedCheck.model_validate(e.record.payload) for e in events]


def test_a_frontier_that_fails_its_childs_inputs_is_demoted(searched: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(searched, run)
    before, parent, child = _plant(run, parent_wrong=True, child_regime="r1")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        planted = derive_state(ledger)
    charged = planted.candidates[child].idea_id
    assert planted.frontier_sha == parent and charged is not None
    charged_before = planted.ideas[charged].failures  # the child's failure among them
    reporter, checks = _go_on(run)
    # The frontier that stands again is judged on the same inputs (and passes them).
    assert [(c.parent_sha, c.configs, c.parent_failed) for c in checks] == [
        (parent, ["tall"], True),
        (before, ["tall"], False),
    ]
    assert checks[0].trials == [FAILED_INPUTS]
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        assert inherited_failures(ledger) == {parent: {"tall"}}  # never composed in there
    assert state.frontier_sha == before and parent in state.demoted
    assert child in state.inherited_failures
    # What a repair of the demoted frontier reads: the child's miss where it ran its code.
    assert state.inherited_misses[parent][1].keys() == {"tall"}
    assert state.ideas[charged].failures == charged_before - 1  # the parent's, not the idea's
    assert any("demoted" in line for line in reporter.lines)
    _, again = _go_on(run)  # checked once, never again
    assert len(again) == 2


def test_a_parent_that_passes_those_inputs_stands_and_the_child_keeps_its_failure(
    searched: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(searched, run)
    _, parent, child = _plant(run, parent_wrong=False, child_regime="r1")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        planted = derive_state(ledger)
    _, checks = _go_on(run)
    assert [(c.configs, c.parent_failed, c.outcome) for c in checks] == [
        (["tall"], False, "passed")
    ]
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    assert state.frontier_sha == parent and not state.demoted
    idea = state.candidates[child].idea_id
    assert idea is not None and state.ideas[idea].failures == planted.ideas[idea].failures
    assert child not in state.inherited_failures


def test_a_change_that_reaches_the_failed_config_is_not_checked(
    searched: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(searched, run)
    _, parent, _ = _plant(run, parent_wrong=True, child_regime="TUNABLES")
    _, checks = _go_on(run)
    assert checks == []
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        assert derive_state(ledger).frontier_sha == parent


def _plant_chain(run: Path, wrong_in: str) -> tuple[str, str, str, str]:
    """Frontiers B (on the run's frontier) and P (B with a dispatch block), both promoted,
    and P's child C that changed r1 only and failed 'tall' on FAILED_INPUTS. ``wrong_in``
    'grand': B is wrong on tall and P runs B's code there; 'parent': only P is wrong there;
    'parent, grand hangs' ('raises'): so is P, and B never ends (raises) there (frontier
    before B, B, P, C)."""
    repo = git.Repo(run / "repo")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        before = str(state.frontier_sha)
        source = repo.git.show(f"{before}:candidate.py")
        anchor = '        if chosen["middle_layout"] == "contiguous":\n'
        wrong = source.replace(anchor, WRONG_WHEN_TALL + anchor, 1)
        grand_source = wrong if wrong_in == "grand" else source
        if wrong_in == "parent, grand hangs":
            grand_source = source.replace(anchor, HANGS_WHEN_TALL + anchor, 1)
        if wrong_in == "parent, grand raises":
            grand_source = source.replace(anchor, RAISES_WHEN_TALL + anchor, 1)
        grand, grand_tree = _commit(repo, before, grand_source, "planted/grand")
        defaults = read_tunables(grand_source)
        parent_source = write_dispatch(
            wrong if wrong_in.startswith("parent") else grand_source,
            [Regime(name="r1", tunables={**defaults}, source_sha=grand)],
            TREE,
        )
        parent, parent_tree = _commit(repo, grand, parent_source, "planted/parent")
        moved = {**defaults, "middle_layout": "contiguous"}
        child_source = write_dispatch(
            parent_source, [Regime(name="r1", tunables=moved, source_sha=grand)], TREE
        )
        child, child_tree = _commit(repo, parent, child_source, "planted/child")
        step = max(state.steps) + 1
        idea = next(iter(state.ideas))
        records = _promoted((grand, grand_tree), before, step)
        records += _promoted((parent, parent_tree), grand, step + 1)
        records += _failed_on_tall((child, child_tree), parent, step + 2, idea)
        for record in records:
            ledger.append(record)
    return before, grand, parent, child


def _chain_run(
    searched: Path, tmp_path: Path, wrong_in: str
) -> tuple[Path, tuple[str, str, str, str]]:
    """A copy of the searched run with _plant_chain's four commits planted (``wrong_in`` as
    there), and their shas."""
    run = tmp_path / "run"
    shutil.copytree(searched, run)
    return run, _plant_chain(run, wrong_in)


def test_a_frontier_that_stands_again_is_judged_on_the_inputs_that_demoted_its_successor(
    searched: Path, tmp_path: Path
) -> None:
    # P demoted for failing its child's inputs restores B, which runs the same failing code
    # on tall: B is judged on those inputs and demoted too; the frontier before B passes them.
    run, (before, grand, parent, _) = _chain_run(searched, tmp_path, "grand")
    reporter, checks = _go_on(run)
    assert [(c.parent_sha, c.configs, c.parent_failed, bool(c.recheck_of)) for c in checks] == [
        (parent, ["tall"], True, False),
        (grand, ["tall"], True, True),
        (before, ["tall"], False, True),
    ]
    assert checks[1].trials == [FAILED_INPUTS] and checks[1].child_sha == parent
    assert checks[2].outcome == "passed"
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        assert inherited_failures(ledger) == {parent: {"tall"}, grand: {"tall"}}
    assert state.frontier_sha == before and {parent, grand} <= state.demoted
    assert before not in state.demoted
    # Their children would run the failing code on tall: neither is a parent any more.
    expandable = {node.node_id for node in state.lineage() if node.expandable}
    assert before in expandable and not {parent, grand} & expandable
    # A repair of the demoted B reads the miss of the child whose inputs demoted P.
    assert state.inherited_misses[grand][1].keys() == {"tall"}
    assert any("frontier recheck" in line and "demoted" in line for line in reporter.lines)
    _, again = _go_on(run)  # each frontier judged once on those inputs, never again
    assert len(again) == 3
    # (unchecked: these runs skip the feasibility check, which export asks for too)
    exported = service.export(run, None, tmp_path / "out", unchecked=True)
    assert exported.regression_inputs == "passed"
    with pytest.raises(ExportError, match="failed the inputs that demoted earlier frontiers"):
        service.export(run, grand, tmp_path / "demoted")
    marked = service.export(run, grand, tmp_path / "marked", unchecked=True)
    assert marked.regression_inputs == "failed"


def test_a_restored_frontier_that_passes_the_inputs_stands(searched: Path, tmp_path: Path) -> None:
    run, (_, grand, parent, _) = _chain_run(searched, tmp_path, "parent")
    reporter, checks = _go_on(run)
    assert [(c.parent_sha, c.parent_failed, c.recheck_of != []) for c in checks] == [
        (parent, True, False),
        (grand, False, True),
    ]
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    assert state.frontier_sha == grand and state.demoted == {parent}
    assert state.rechecked == {grand: {checks[0].step}}
    assert any("frontier recheck" in line and "it stands" in line for line in reporter.lines)


def test_a_recheck_the_judge_does_not_answer_runs_again_and_is_never_held_against_it(
    searched: Path, tmp_path: Path
) -> None:
    # P fails its child's inputs and is demoted; the restored B never ends on them: each
    # recheck is cut by its time limit, which says nothing of B. It runs CHECK_ATTEMPTS times,
    # then counts as done; B stands.
    run, (_, grand, parent, _) = _chain_run(searched, tmp_path, "parent, grand hangs")
    reporter, checks = _go_on(run, eval_timeout_s=25.0)
    assert [(c.parent_sha, c.outcome, c.parent_failed, c.infrastructure) for c in checks] == [
        (parent, "incorrect", True, False),
        *[(grand, "timeout", False, True)] * CHECK_ATTEMPTS,
    ]
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    assert state.frontier_sha == grand and state.demoted == {parent}
    assert state.rechecked == {grand: {checks[0].step}}
    assert sum("says nothing of it" in line for line in reporter.lines) == CHECK_ATTEMPTS
    exported = service.export(run, None, tmp_path / "out", unchecked=True)
    assert exported.regression_inputs == "unanswered"


def test_a_restored_frontier_whose_code_raises_on_the_inputs_is_demoted_too(
    searched: Path, tmp_path: Path
) -> None:
    # P is demoted for failing its child's inputs; the restored B raises on them: its own
    # code's failure there, not the judge's silence, so B goes too and the frontier before B,
    # which passes them, stands.
    run, (before, grand, parent, _) = _chain_run(searched, tmp_path, "parent, grand raises")
    reporter, checks = _go_on(run)
    assert [(c.parent_sha, c.outcome, c.parent_failed, c.infrastructure) for c in checks] == [
        (parent, "incorrect", True, False),
        (grand, "runtime_error", True, False),
        (before, "passed", False, False),
    ]
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    assert state.frontier_sha == before and {parent, grand} <= state.demoted
    assert any("fails them too (runtime_error): demoted" in line for line in reporter.lines)
    marked = service.export(run, grand, tmp_path / "marked", unchecked=True)
    assert marked.regression_inputs == "failed"


def test_inputs_that_demoted_a_frontier_judge_every_later_sweep(
    searched: Path, tmp_path: Path
) -> None:
    # After B and P are demoted on FAILED_INPUTS, a candidate wrong on exactly those inputs
    # (and right on every fresh one) fails its sweep there.
    run, (before, *_) = _chain_run(searched, tmp_path, "grand")
    _go_on(run)
    repo = git.Repo(run / "repo")
    source = repo.git.show(f"{before}:candidate.py")
    anchor = '        if chosen["middle_layout"] == "contiguous":\n'
    picky, _ = _commit(repo, before, source.replace(anchor, WRONG_ON_FAILED_INPUTS + anchor), "p")
    settings = fast_settings(
        run, workload="matchain", verify_frontier=False, check_feasibility=False
    )
    ctx = service.prepare_run(settings, ListReporter()).ctx
    state = current_state(ctx)
    assert state.regression_trials() == (FAILED_INPUTS,)
    plan = plan_sweep(ctx, state, SweepJob(state.next_step, picky, before))
    assert plan.request.trials[-1] == FAILED_INPUTS
    assert plan.request.trials.count(FAILED_INPUTS) == 1
    tall = run_plan(ctx, plan).config("tall")
    assert tall is not None and not tall.correct
    assert [t.trial for t in tall.trials if not t.passed] == [FAILED_INPUTS]
    ctx.ledger.close()
