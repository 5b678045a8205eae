"""The composition step: one dispatching candidate from the regimes the run's results show."""

from __future__ import annotations

import math
from collections.abc import Mapping

import git

from agents.composer import AGENT_NAME, CompositionRequest, commit_composition
from agents.dispatch import (
    Regime,
    RegimeBranch,
    code_outside_blocks,
    has_dispatch_block,
)
from agents.regimes import DEFAULT_REGIME, read_dispatch_tree, regime_for, regime_settings
from agents.tunables import TunablesError, read_tunables
from orchestrator.change_scope import config_floors
from orchestrator.events import StepStarted
from orchestrator.regime_scores import measured_scores
from orchestrator.stages import LoopContext, record_expansion, recover_commit, timed_sizes
from orchestrator.state import SearchState, StepView
from orchestrator.workspace import read_file, step_branch
from search import (
    CompositionSettings,
    DispatchLeaf,
    DispatchNode,
    DispatchPlan,
    RegimeVariant,
    plan_dispatch,
)
from search.scope import required_log_gain, whole_objective_floor

COMPOSE_IDEA = "compose-regimes"
# A variant id names a plain candidate by its sha, or one regime of a dispatching one as
# SHA#REGIME (what that candidate ran on the configs its dispatch sends there).
REGIME_MARK = "#"
# (variant id, its settings, the configs it serves: None for a plain candidate's all)
ComposablePart = tuple[str, dict[str, str], set[str] | None]
Composable = tuple[str, list[ComposablePart]]


def composable_parts(source: str, sha: str, sizes: Mapping[str, Mapping[str, float]]) -> Composable:
    """The candidate's code outside its blocks and the settings it runs each config with:
    a plain candidate's one set everywhere, or each regime of a dispatching one with the
    configs its dispatch sends there (a regime that serves none is left out). A dispatch the
    composer cannot read raises TunablesError."""
    regimes = regime_settings(source)
    if len(regimes) == 1:
        return code_outside_blocks(source), [(sha, regimes[DEFAULT_REGIME], None)]
    tree = read_dispatch_tree(source)
    served: dict[str, set[str]] = {}
    for config, point in sizes.items():
        served.setdefault(regime_for(tree, point) or DEFAULT_REGIME, set()).add(config)
    parts: list[ComposablePart] = [
        (f"{sha}{REGIME_MARK}{name}", settings, served[name])
        for name, settings in regimes.items()
        if served.get(name)
    ]
    return code_outside_blocks(source), parts


def _composable(ctx: LoopContext, sha: str) -> Composable | None:
    """composable_parts of a commit, read once (None: the composer cannot read it)."""
    cache = ctx.caches.composable
    if sha in cache:
        return cache[sha]
    try:
        source = read_file(ctx.repo, sha, ctx.workload.candidate_file)
    except git.GitCommandError:
        return None  # not remembered: the next step reads it again
    try:
        cache[sha] = composable_parts(source, sha, timed_sizes(ctx))
    except (TunablesError, SyntaxError, ValueError):
        cache[sha] = None  # code the composer cannot read takes no part
    return cache[sha]


def _variants(
    ctx: LoopContext, state: SearchState, shared: str
) -> dict[str, tuple[dict[str, str], set[str] | None]]:
    """Every set of settings the run measured on the frontier's code: plain candidates, and
    the regimes of dispatching ones (a regime was measured on the configs it serves), by
    variant id (the sha, or SHA#REGIME)."""
    variants = {}
    for sha in state.candidates:
        read = _composable(ctx, sha)
        if read is not None and read[0] == shared:
            for variant_id, settings, served in read[1]:
                variants[variant_id] = (dict(settings), served)
    return variants


def variant_settings(source: str, variant_id: str) -> dict[str, str]:
    """The settings a variant id names in its candidate's source: the TUNABLES, or one
    regime's."""
    regime = variant_id.partition(REGIME_MARK)[2]
    return regime_settings(source)[regime] if regime else read_tunables(source)


def short_id(variant_id: str) -> str:
    """A variant id as a message shows it: a short sha, and the regime if it names one."""
    sha, mark, regime = variant_id.partition(REGIME_MARK)
    return f"{sha[:10]}{mark}{regime}"


def _tried(state: SearchState) -> tuple[set[tuple[tuple[str, str], ...]], bool]:
    """Assignments already composed, and whether the last step was a composition."""
    plans = [
        DispatchPlan.model_validate(s.started.composition)
        for s in state.steps.values()
        if s.started.composition is not None
    ]
    last = state.steps[max(state.steps)] if state.steps else None
    return {tuple(sorted(p.assignment.items())) for p in plans}, bool(
        last and last.started.composition is not None
    )


def composition_plan(ctx: LoopContext, state: SearchState) -> DispatchPlan | None:
    """A dispatch plan worth judging now, or None: composition is on, the frontier can
    dispatch, the run's results predict a gain over it beyond the noise floor, and neither
    the plan nor (in the step just before) any composition was tried."""
    frontier = state.frontier_sha
    if not ctx.settings.compose_regimes or frontier is None:
        return None
    tried, just_composed = _tried(state)
    if just_composed:
        return None  # a new measurement must come between two compositions
    try:
        source = read_file(ctx.repo, frontier, ctx.workload.candidate_file)
    except git.GitCommandError:
        return None
    if not has_dispatch_block(source):
        return None
    features = timed_sizes(ctx)
    scores = measured_scores(ctx.ledger, anchor=frontier)
    variants = []
    measured_variants = _variants(ctx, state, code_outside_blocks(source))
    settings_by_variant = {v: settings for v, (settings, _) in measured_variants.items()}
    for variant_id, (_, served) in measured_variants.items():
        measured = scores.get(variant_id.partition(REGIME_MARK)[0], {})
        kept = {
            c: v for c, v in measured.items() if c in features and (served is None or c in served)
        }
        if kept:
            variants.append(
                RegimeVariant(
                    variant_id=variant_id,
                    scores={c: v.median for c, v in kept.items()},
                    lows={c: v.low for c, v in kept.items()},
                )
            )
    incumbent = _incumbent(variants, set(features))
    if incumbent is None:
        return None
    settings = CompositionSettings(
        noise_floor=ctx.noise_floor,
        weights=state.config_weights,
        config_floors=config_floors(state),
    )
    plan = plan_dispatch(features, variants, incumbent, settings)
    if plan is None or tuple(sorted(plan.assignment.items())) in tried:
        return None
    frontier_scores = {c: v.median for c, v in scores.get(frontier, {}).items()}
    if all(c in frontier_scores for c in features):
        own = _composable(ctx, frontier)
        moved = _moved_configs(plan, settings_by_variant, own[1] if own else [])
        if not _ahead(plan, frontier_scores, moved, settings):
            return None  # the frontier (itself a composition, perhaps) is already as good
    return plan


def _ahead(
    plan: DispatchPlan,
    frontier_scores: Mapping[str, float],
    moved: list[str],
    settings: CompositionSettings,
) -> bool:
    """The plan, credited pessimistically, gains on the configs it moves off the frontier's
    settings more than their floors (the others run the frontier's code: no gain, no cost)."""
    gain = sum(
        settings.weights.get(c, 1.0) * math.log(plan.pessimistic[c] / frontier_scores[c])
        for c in moved
    )
    floors = {c: settings.floor_of(c) for c in moved}
    whole = whole_objective_floor(plan.assignment, settings.weights, settings.noise_floor)
    return bool(moved) and gain > required_log_gain(moved, settings.weights, floors, whole)


def _moved_configs(
    plan: DispatchPlan,
    settings_by_variant: Mapping[str, dict[str, str]],
    frontier_parts: list[ComposablePart],
) -> list[str]:
    """The configs where the plan runs other settings than the frontier (the code outside
    the blocks is shared): the only ones where it can be faster or slower than the frontier."""
    frontier_runs: dict[str, dict[str, str]] = {}
    for _, settings, served in frontier_parts:
        for config in plan.assignment:
            if served is None or config in served:
                frontier_runs[config] = settings
    return sorted(
        c
        for c, variant in plan.assignment.items()
        if settings_by_variant.get(variant) != frontier_runs.get(c)
    )


def _incumbent(variants: list[RegimeVariant], configs: set[str]) -> str | None:
    """The plain variant measured on every config with the best geomean."""
    full = [v for v in variants if configs <= set(v.scores)]
    if not full:
        return None
    return max(full, key=lambda v: sum(math.log(v.scores[c]) for c in configs)).variant_id


def composition_step(state: SearchState, plan: DispatchPlan) -> StepStarted:
    """The step that builds the plan's candidate on the frontier."""
    assert state.frontier_sha is not None
    return StepStarted(
        step=state.next_step,
        parent_sha=state.frontier_sha,
        idea_id=COMPOSE_IDEA,
        parent_theta=None,
        idea_theta=0.0,
        idea_forced=False,
        parent_forced=False,
        composition=plan.model_dump(mode="json"),
    )


def compose_step(ctx: LoopContext, state: SearchState, step: StepView) -> None:
    """Commit the composition a step planned (or recover it after a crash) and record it."""
    started = step.started
    assert started.composition is not None
    if recover_commit(ctx, started, AGENT_NAME):
        return
    plan = DispatchPlan.model_validate(started.composition)
    default = plan.variants[0]
    names = {sha: f"r{i}" for i, sha in enumerate(plan.variants[1:], start=1)}
    sources = {
        variant: read_file(ctx.repo, variant.partition(REGIME_MARK)[0], ctx.workload.candidate_file)
        for variant in plan.variants
    }
    settings = {variant: variant_settings(sources[variant], variant) for variant in plan.variants}
    regimes = [
        Regime(name=name, tunables=settings[variant], source_sha=variant)
        for variant, name in names.items()
    ]
    request = CompositionRequest(
        repo_path=ctx.paths.repo,
        worktree_root=ctx.paths.worktrees,
        base_sha=started.parent_sha,
        branch=step_branch(started.step),
        candidate_file=ctx.workload.candidate_file,
        default_tunables=settings[default],
        regimes=regimes,
        tree=_branch(plan.root, default, names),
        sources=sources,
        known_trees=[c.tree_sha for c in state.candidates.values()],
        message_variables=_message(plan, names, started.parent_sha),
    )
    record_expansion(ctx, step, commit_composition(request))


def _branch(node: DispatchNode, default: str, names: dict[str, str]) -> RegimeBranch | str | None:
    if isinstance(node, DispatchLeaf):
        return None if node.variant_id == default else names[node.variant_id]
    return RegimeBranch(
        feature=node.feature,
        threshold=node.threshold,
        below=_branch(node.below, default, names),
        above=_branch(node.above, default, names),
    )


def _message(plan: DispatchPlan, names: dict[str, str], parent: str) -> dict[str, str]:
    label = {plan.variants[0]: "TUNABLES", **names}
    served: dict[str, list[str]] = {}
    for config, sha in sorted(plan.assignment.items()):
        served.setdefault(sha, []).append(config)
    regimes = "\n".join(
        f"- {label[sha]} ({short_id(sha)}): configs {', '.join(configs)}"
        for sha, configs in served.items()
    )
    predicted = "\n".join(f"- {c}: {s:.3f}x" for c, s in sorted(plan.predicted.items()))
    title = ", ".join(f"{label[sha]}={short_id(sha)}" for sha in plan.variants)
    return {
        "title": f"{len(plan.variants)} regimes ({title})",
        "regimes": regimes,
        "predicted": predicted,
        "predicted_objective": f"{plan.predicted_objective:.3f}x",
        "best_single_objective": f"{plan.incumbent_objective:.3f}x",
        "parent_sha": parent,
    }
