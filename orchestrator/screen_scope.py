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

from agents.regimes import changed_settings
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


def _changed(ctx: LoopContext, state: SearchState, step: StepView) -> set[str] | None:
    assert step.sha is not None
    try:
        parent = read_file(ctx.repo, step.started.parent_sha, ctx.workload.candidate_file)
        child = read_file(ctx.repo, step.sha, ctx.workload.candidate_file)
    except git.GitCommandError:
        return None
    changed = changed_settings(parent, child, timed_sizes(ctx))
    if changed is None:
        return None
    return reached_configs(changed, state.settings_read.get(step.started.parent_sha, {}))


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
