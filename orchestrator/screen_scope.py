"""Which configurations a screen measures: the workload's screening set, narrowed to what changed.

A child of a dispatching candidate changes one regime, and only the configurations that regime
serves run different code. Screened on configurations it did not change, such a child reads as
its parent and the gate drops it unseen (on the H200 a change to the wide models' regime was
screened on four narrow configurations only). So the screen measures the screening
configurations it changed, or, when it changed none of them, the cheapest ones it did change.
A configuration where the parent's code read none of the tunables the child changed (its own
recorder's report, from the parent's sweep) runs the parent's code exactly: it is not reached.
"""

from __future__ import annotations

from collections.abc import Callable

import git

from agents.dispatch import code_outside_blocks
from agents.expander import ExpansionOutcome, ExpansionResult
from agents.regimes import changed_settings
from agents.tunables import TunablesError
from orchestrator.stages import LoopContext, timed_sizes
from orchestrator.state import SearchState, StepView
from orchestrator.workspace import read_file

# A regime no screening configuration reaches is screened on this many of its own, cheapest
# first (by the workload's count of operations): enough to see a change, no more.
REGIME_SCREEN_CONFIGS = 2


def screen_configs(ctx: LoopContext, state: SearchState, step: StepView) -> list[str]:
    """The configurations the step's screen measures (a REDIRECT's subset comes first)."""
    number = step.started.step
    redirect = state.redirect if state.redirect and number <= state.redirect.until_step else None
    if redirect and redirect.configs:
        return list(redirect.configs)
    runtime = ctx.workload.load_runtime()
    return pick_screen(
        list(ctx.config_set.screening_ids),
        _changed(ctx, state, step),
        lambda c: runtime.cost(ctx.workload.configs[c])[0],
    )


def pick_screen(
    screening: list[str], changed: set[str] | None, cost: Callable[[str], float]
) -> list[str]:
    """The screening configs the change reaches; when it reaches none of them, the cheapest
    ones it does reach; all of them when what it reaches is unknown or nothing."""
    if not changed:
        return screening
    reached = [c for c in screening if c in changed]
    if reached:
        return reached
    return sorted(changed, key=lambda c: (cost(c), c))[:REGIME_SCREEN_CONFIGS]


def same_code_sources(ctx: LoopContext, parent: str, child: str) -> tuple[str, str] | None:
    """The two entry modules, when the commits differ at most in its TUNABLES and dispatch
    blocks (None otherwise: an edit of the code, or a commit that cannot be read)."""
    entry = ctx.workload.candidate_file
    try:
        paths = ctx.repo.git.diff("--name-only", parent, child).split()
        if any(path != entry for path in paths):
            return None
        before, after = (read_file(ctx.repo, sha, entry) for sha in (parent, child))
    except git.GitCommandError:
        return None
    return (before, after) if code_outside_blocks(before) == code_outside_blocks(after) else None


def _changed(ctx: LoopContext, state: SearchState, step: StepView) -> set[str] | None:
    assert step.sha is not None
    return reached_by_change(ctx, state, step.started.parent_sha, step.sha)


def reached_by_change(
    ctx: LoopContext, state: SearchState, parent: str, child: str
) -> set[str] | None:
    """The configurations a settings-only change reaches (None: a code edit, or unknown)."""
    sources = same_code_sources(ctx, parent, child)
    if sources is None:
        return None
    try:
        changed = changed_settings(*sources, timed_sizes(ctx))
    except (TunablesError, SyntaxError):
        return None
    if changed is None or not any(changed.values()):
        return None  # no setting moved (the judge decides what else did)
    return reached_configs(changed, state.settings_read.get(parent, {}))


def unreached_result(
    ctx: LoopContext, state: SearchState, step: StepView, result: ExpansionResult
) -> ExpansionResult:
    """A commit that changes only settings the parent's code never read where they act runs
    the parent's code on every configuration: nothing new to judge, and nothing learnt about
    the idea (run 11 screened two such children as their parent and charged their ideas)."""
    if result.sha is None:
        return result
    if reached_by_change(ctx, state, step.started.parent_sha, result.sha) != set():
        return result
    message = (
        f"commit {result.sha[:10]} changes only tunables that {step.started.parent_sha[:10]}'s "
        "code never read on the configurations they act on (its sweep's settings_read): it "
        "would run the parent's code everywhere"
    )
    return result.model_copy(
        update={"outcome": ExpansionOutcome.NO_CHANGE, "sha": None, "message": message}
    )


def reached_configs(changed: dict[str, set[str]], parent_read: dict[str, set[str]]) -> set[str]:
    """The configurations where a change can alter what runs: some tunable it changes there
    was read by the parent's code there, or the parent's reads there are not known. A tunable
    a configuration never read cannot change its execution (the torch path's precision where
    the fused kernels serve): such a change, screened there, reads as its parent."""
    return {
        config
        for config, names in changed.items()
        if names and (config not in parent_read or names & parent_read[config])
    }
