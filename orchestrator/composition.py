"""The composition step: one dispatching candidate from the regimes the run's results show."""

from __future__ import annotations

import math

import git

from agents.composer import AGENT_NAME, CompositionRequest, commit_composition
from agents.dispatch import (
    Regime,
    RegimeBranch,
    code_outside_blocks,
    has_dispatch_block,
    read_regimes,
)
from agents.tunables import TunablesError, read_tunables
from orchestrator.events import StepStarted
from orchestrator.regime_scores import measured_scores
from orchestrator.stages import LoopContext, record_expansion, recover_commit
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

COMPOSE_IDEA = "compose-regimes"


def _plain_variant(ctx: LoopContext, sha: str) -> tuple[str, dict[str, str]] | None:
    """The candidate's code outside its blocks and its tunables (None: it dispatches, or the
    composer cannot read it), read once per commit."""
    cache = ctx.caches.plain_variants
    if sha in cache:
        return cache[sha]
    try:
        source = read_file(ctx.repo, sha, ctx.workload.candidate_file)
    except git.GitCommandError:
        return None  # not remembered: the next step reads it again
    try:
        plain = not read_regimes(source)
        cache[sha] = (code_outside_blocks(source), read_tunables(source)) if plain else None
    except (TunablesError, SyntaxError, ValueError):
        cache[sha] = None  # code the composer cannot read takes no part
    return cache[sha]


def _plain_variants(ctx: LoopContext, state: SearchState, shared: str) -> dict[str, dict[str, str]]:
    """Tunables of every candidate that runs the frontier's code and dispatches nowhere."""
    variants = {}
    for sha in state.candidates:
        read = _plain_variant(ctx, sha)
        if read is not None and read[0] == shared:
            variants[sha] = dict(read[1])
    return variants


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
    timed = [c for c in ctx.config_set.config_ids if c not in ctx.workload.oracle_only_ids()]
    features = {c: ctx.workload.dispatch_features(c) for c in timed}
    scores = measured_scores(ctx.ledger, anchor=frontier)
    plain = _plain_variants(ctx, state, code_outside_blocks(source))
    variants = [
        RegimeVariant(
            variant_id=sha,
            scores={c: v.median for c, v in scores[sha].items() if c in features},
            lows={c: v.low for c, v in scores[sha].items() if c in features},
        )
        for sha in plain
        if sha in scores
    ]
    incumbent = _incumbent(variants, set(features))
    if incumbent is None:
        return None
    settings = CompositionSettings(noise_floor=ctx.noise_floor, weights=state.config_weights)
    plan = plan_dispatch(features, variants, incumbent, settings)
    if plan is None or tuple(sorted(plan.assignment.items())) in tried:
        return None
    frontier_scores = {c: v.median for c, v in scores.get(frontier, {}).items()}
    if all(c in frontier_scores for c in features):
        keys = sorted(features)
        ahead = plan.pessimistic_objective / _geomean(frontier_scores, settings, keys)
        if ahead <= 1.0 + ctx.noise_floor:
            return None  # the frontier (itself a composition, perhaps) is already as good
    return plan


def _incumbent(variants: list[RegimeVariant], configs: set[str]) -> str | None:
    """The plain variant measured on every config with the best geomean."""
    full = [v for v in variants if configs <= set(v.scores)]
    if not full:
        return None
    return max(full, key=lambda v: sum(math.log(v.scores[c]) for c in configs)).variant_id


def _geomean(scores: dict[str, float], settings: CompositionSettings, keys: list[str]) -> float:
    total = sum(settings.weights.get(c, 1.0) for c in keys)
    logs = sum(settings.weights.get(c, 1.0) * math.log(scores[c]) for c in keys)
    return math.exp(logs / total)


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
    sources = {sha: read_file(ctx.repo, sha, ctx.workload.candidate_file) for sha in plan.variants}
    regimes = [
        Regime(name=name, tunables=read_tunables(sources[sha]), source_sha=sha)
        for sha, name in names.items()
    ]
    request = CompositionRequest(
        repo_path=ctx.paths.repo,
        worktree_root=ctx.paths.worktrees,
        base_sha=started.parent_sha,
        branch=step_branch(started.step),
        candidate_file=ctx.workload.candidate_file,
        default_tunables=read_tunables(sources[default]),
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
        f"- {label[sha]} ({sha[:10]}): configs {', '.join(configs)}"
        for sha, configs in served.items()
    )
    predicted = "\n".join(f"- {c}: {s:.3f}x" for c, s in sorted(plan.predicted.items()))
    title = ", ".join(f"{label[sha]}={sha[:10]}" for sha in plan.variants)
    return {
        "title": f"{len(plan.variants)} regimes ({title})",
        "regimes": regimes,
        "predicted": predicted,
        "predicted_objective": f"{plan.predicted_objective:.3f}x",
        "best_single_objective": f"{plan.incumbent_objective:.3f}x",
        "parent_sha": parent,
    }
