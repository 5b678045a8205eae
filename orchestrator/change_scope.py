"""The configurations where two candidates run different code, and the comparison read there.

A settings-only change reaches the configurations where the code it starts from read a
setting it changes (the recorder's report, orchestrator/screen_scope.py); everywhere else
both run the same code, so their ratio there is 1 plus noise. A verdict, a replication and a
composition read the reached configurations, each against the A/A floors of those
configurations (search/scope.py says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.models import EvaluationResult
from orchestrator.calibration import excursion
from orchestrator.screen_scope import reached_by_change
from orchestrator.stages import LoopContext, estimate
from orchestrator.state import SearchState
from search import RatioEstimate, VerdictEvidence
from search.scope import scoped_estimate, scoped_floor


@dataclass(frozen=True)
class ComparisonScope:
    """Which configs a comparison reads, the floor it clears, and the objective's weights."""

    configs: list[str] | None  # None: every config (the plain aggregate)
    floor: float
    weights: dict[str, float] = field(default_factory=dict)
    run_floor: float | None = None  # the whole objective's floor (None: `floor`)

    def whole(self) -> ComparisonScope:
        """The same comparison over every config, against the run's floor."""
        floor = self.floor if self.run_floor is None else self.run_floor
        return ComparisonScope(configs=None, floor=floor, weights=self.weights)

    def estimate(self, result: EvaluationResult, arm: str) -> RatioEstimate | None:
        """The candidate against `arm` over the scope (the judge's aggregate when unscoped,
        or when a config of the scope has no ratio against that arm)."""
        whole = estimate(result.aggregate(arm))
        if self.configs is None:
            return whole
        return scoped_estimate(per_config_estimates(result, arm), self.configs, self.weights) or (
            whole
        )

    def describe(self) -> str:
        """How a verdict's reason names the scope ('' when unscoped)."""
        if self.configs is None:
            return ""
        return (
            f" (on configs {', '.join(self.configs)}: the only ones where its code differs; "
            f"the others run the same code; floor {self.floor * 100:.3g}%)"
        )


def per_config_estimates(result: EvaluationResult, arm: str) -> dict[str, RatioEstimate]:
    """Per config, the candidate's paired ratio against `arm` where the judge reported one."""
    found = {}
    for config in result.configs:
        ratio = next((r for r in config.ratios if r.arm == "candidate" and r.other == arm), None)
        converted = estimate(ratio)
        if converted is not None:
            found[config.config_id] = converted
    return found


def config_floors(state: SearchState) -> dict[str, float]:
    """Per config, the largest A/A excursion any of the run's calibrations showed there."""
    floors: dict[str, float] = {}
    for entry in state.noise_floors.values():
        for config, ratio in dict(entry.get("per_config") or {}).items():
            floors[config] = max(floors.get(config, 0.0), excursion(ratio))
    return floors


def change_scope(
    ctx: LoopContext, state: SearchState, pair: tuple[str | None, str], configs: Sequence[str]
) -> ComparisonScope:
    """How `pair[1]` is compared with `pair[0]` on `configs`: on the ones the change between
    them reaches when that is a proper subset, else on all (a code edit, reads not known, a
    change that reaches everything, or the same commit)."""
    before, after = pair
    whole = ComparisonScope(configs=None, floor=ctx.noise_floor, weights=state.config_weights)
    if before is None or before == after:
        return whole
    reached = reached_by_change(ctx, state, before, after)
    scope = sorted(c for c in configs if reached and c in reached)
    if not scope or len(scope) == len(configs):
        return whole
    floor = scoped_floor(ctx.noise_floor, config_floors(state), scope)
    return ComparisonScope(
        configs=scope, floor=floor, weights=state.config_weights, run_floor=ctx.noise_floor
    )


def scoped_evidence(
    ctx: LoopContext,
    state: SearchState,
    commits: tuple[str | None, str],
    result: EvaluationResult,
) -> tuple[VerdictEvidence, ComparisonScope]:
    """A sweep's evidence on (parent, candidate), each comparison read on the configs where
    the candidate's code differs from that arm's, and the frontier comparison's scope (the
    parent's, when the parent is the frontier and the sweep has no frontier arm)."""
    configs = [c.config_id for c in result.configs if c.ratios]
    parent = change_scope(ctx, state, commits, configs)
    has_frontier = result.aggregate("frontier") is not None
    frontier = parent
    if has_frontier:
        frontier = change_scope(ctx, state, (state.frontier_sha, commits[1]), configs)
    evidence = VerdictEvidence(
        correct=True,
        vs_parent=parent.estimate(result, "parent"),
        vs_frontier=frontier.estimate(result, "frontier") if has_frontier else None,
        tainted=result.tainted,
        parent_floor=parent.floor,
        frontier_floor=frontier.floor,
    )
    return evidence, frontier


def whole_evidence(result: EvaluationResult) -> VerdictEvidence:
    """A sweep's evidence over every config (the judge's aggregates)."""
    return VerdictEvidence(
        correct=True,
        vs_parent=estimate(result.aggregate("parent")),
        vs_frontier=estimate(result.aggregate("frontier")),
        tainted=result.tainted,
    )
