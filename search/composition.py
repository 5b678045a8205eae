"""Per-regime composition: a dispatch tree over input sizes built from the run's own results."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from search.scope import required_log_gain, scoped_floor, whole_objective_floor


class RegimeVariant(BaseModel):
    """One measured candidate as the composition step sees it."""

    model_config = ConfigDict(frozen=True)

    variant_id: str = Field(description="The candidate (commit sha).")
    scores: dict[str, float] = Field(
        description="Speedup over the baseline per config where it was measured correct."
    )
    lows: dict[str, float] = Field(
        default_factory=dict,
        description="Lower bound of each score's confidence interval (default: the score).",
    )

    def low(self, config: str) -> float:
        """The pessimistic score: what a challenger is credited with."""
        return self.lows.get(config, self.scores[config])


class DispatchLeaf(BaseModel):
    """A region of input sizes served by one variant."""

    model_config = ConfigDict(frozen=True)

    variant_id: str = Field(description="The variant that serves the region.")


class ThresholdSplit(BaseModel):
    """`feature < threshold` goes below, everything else above (ordered tests only: a split
    is a range of sizes, never an exact shape)."""

    model_config = ConfigDict(frozen=True)

    feature: str = Field(description="Input-size feature the predicate reads.")
    threshold: float = Field(description="Geometric midpoint between two measured values.")
    below: DispatchLeaf | ThresholdSplit = Field(description="Where feature < threshold goes.")
    above: DispatchLeaf | ThresholdSplit = Field(description="Where feature >= threshold goes.")


DispatchNode = DispatchLeaf | ThresholdSplit


class CompositionSettings(BaseModel):
    """How far the composition step may go."""

    model_config = ConfigDict(frozen=True)

    max_depth: int = Field(default=3, ge=1, description="Deepest split of the dispatch tree.")
    noise_floor: float = Field(
        ge=0.0, description="Each split, and the whole plan, must beat this relative gain."
    )
    weights: dict[str, float] = Field(
        default_factory=dict, description="Config weights of the objective (default 1)."
    )
    config_floors: dict[str, float] = Field(
        default_factory=dict,
        description="Per config, the A/A excursion its readings showed: a change of the "
        "variant serving it must clear this (never less than noise_floor; default it).",
    )

    def floor_of(self, config: str) -> float:
        """The floor a change on this config clears."""
        return scoped_floor(self.noise_floor, self.config_floors, [config])


class DispatchPlan(BaseModel):
    """A dispatching candidate to build: its tree and what the measurements predict for it."""

    model_config = ConfigDict(frozen=True)

    root: DispatchNode = Field(description="The dispatch tree.")
    variants: list[str] = Field(description="Variants the tree uses, the incumbent first.")
    assignment: dict[str, str] = Field(description="Config id -> the variant serving it.")
    predicted: dict[str, float] = Field(description="Predicted speedup per config.")
    pessimistic: dict[str, float] = Field(
        default_factory=dict,
        description="Per config, what the plan is credited with: the incumbent's median, or "
        "a challenger's lower bound (empty in plans made before it was recorded).",
    )
    predicted_objective: float = Field(description="Weighted geomean of the predictions.")
    pessimistic_objective: float = Field(
        description="The same with every challenger at its interval's lower bound."
    )
    incumbent_objective: float = Field(description="The incumbent's geomean on the same data.")

    @property
    def predicted_gain(self) -> float:
        """Predicted objective over the incumbent's."""
        return self.predicted_objective / self.incumbent_objective


def plan_dispatch(
    features: Mapping[str, Mapping[str, float]],
    variants: Sequence[RegimeVariant],
    incumbent: str,
    settings: CompositionSettings,
) -> DispatchPlan | None:
    """The dispatch tree that serves each region of sizes with its measured winner, or None
    when no split beats the incumbent (which must be measured on every config) by more than
    the noise floors of the configs it moves to another variant (a split that helps one
    config is not diluted by the configs that keep their code). Only configs in `features`
    count; a variant serves only configs where it was measured correct. A challenger is
    credited with its interval's lower bound and the incumbent with its median: picking the
    best of many noisy per-config readings would otherwise find regimes between variants
    that behave the same (the winner's curse)."""
    configs = sorted(features)
    by_id = {v.variant_id: v for v in variants}
    if not configs or incumbent not in by_id:
        return None
    if any(c not in by_id[incumbent].scores for c in configs):
        return None
    grower = _Grower(features, by_id, incumbent, settings)
    root = grower.grow(configs, depth=0)
    if isinstance(root, DispatchLeaf):
        return None
    assignment = {c: _leaf_for(root, features[c]).variant_id for c in configs}
    predicted = {c: by_id[assignment[c]].scores[c] for c in configs}
    pessimistic = {c: grower.credit(assignment[c], c) for c in configs}
    base = grower.geomean({c: by_id[incumbent].scores[c] for c in configs})
    # Scoped: the configs the plan moves off the incumbent must gain beyond their floors;
    # the others keep the incumbent's code and neither help nor dilute.
    moved = [c for c in configs if assignment[c] != incumbent]
    gain = sum(
        grower.weight(c) * math.log(pessimistic[c] / by_id[incumbent].scores[c]) for c in moved
    )
    if not moved or gain <= grower.required(moved):
        return None
    used = sorted(set(assignment.values()), key=lambda v: (v != incumbent, v))
    return DispatchPlan(
        root=root,
        variants=used,
        assignment=assignment,
        predicted=predicted,
        pessimistic=pessimistic,
        predicted_objective=grower.geomean(predicted),
        pessimistic_objective=grower.geomean(pessimistic),
        incumbent_objective=base,
    )


def _leaf_for(node: DispatchNode, point: Mapping[str, float]) -> DispatchLeaf:
    while isinstance(node, ThresholdSplit):
        node = node.below if point[node.feature] < node.threshold else node.above
    return node


def _midpoint(low: float, high: float) -> float:
    # Sizes grow geometrically (batch 1..10000): the geometric midpoint generalizes between
    # them; a value at or below zero falls back to the arithmetic one.
    return math.sqrt(low * high) if low > 0 else (low + high) / 2.0


class _Grower:
    """Greedy top-down tree growth on weighted log-speedups (one split looked at a time)."""

    def __init__(
        self,
        features: Mapping[str, Mapping[str, float]],
        variants: Mapping[str, RegimeVariant],
        incumbent: str,
        settings: CompositionSettings,
    ) -> None:
        self.features, self.variants, self.incumbent = features, variants, incumbent
        self.settings = settings
        self.floors = {c: settings.floor_of(c) for c in features}
        self.whole = whole_objective_floor(features, settings.weights, settings.noise_floor)
        self.names = sorted({name for point in features.values() for name in point})

    def weight(self, config: str) -> float:
        return self.settings.weights.get(config, 1.0)

    def required(self, configs: Sequence[str]) -> float:
        """The log-gain a change of variant on these configs must bring: their floors."""
        return required_log_gain(configs, self.settings.weights, self.floors, self.whole)

    def geomean(self, scores: Mapping[str, float]) -> float:
        total = sum(self.weight(c) for c in scores)
        return math.exp(sum(self.weight(c) * math.log(s) for c, s in scores.items()) / total)

    def best_leaf(self, configs: Sequence[str]) -> tuple[DispatchLeaf, float]:
        """The variant with the best weighted log-speedup over all of `configs`."""
        best_id, best_value = self.incumbent, self._value(self.incumbent, configs)
        for variant_id in sorted(self.variants):
            value = self._value(variant_id, configs)
            if value > best_value + 1e-12:
                best_id, best_value = variant_id, value
        return DispatchLeaf(variant_id=best_id), best_value

    def credit(self, variant_id: str, config: str) -> float:
        """The incumbent's median, or a challenger's lower bound."""
        variant = self.variants[variant_id]
        return variant.scores[config] if variant_id == self.incumbent else variant.low(config)

    def _value(self, variant_id: str, configs: Sequence[str]) -> float:
        scores = self.variants[variant_id].scores
        if any(c not in scores or self.credit(variant_id, c) <= 0 for c in configs):
            return -math.inf
        return sum(self.weight(c) * math.log(self.credit(variant_id, c)) for c in configs)

    def grow(self, configs: Sequence[str], depth: int) -> DispatchNode:
        leaf, value = self.best_leaf(configs)
        if depth >= self.settings.max_depth or len(configs) < 2:
            return leaf
        split = self._best_split(configs, value)
        if split is None:
            return leaf
        feature, threshold, below, above = split
        node = ThresholdSplit(
            feature=feature,
            threshold=threshold,
            below=self.grow(below, depth + 1),
            above=self.grow(above, depth + 1),
        )
        return _collapsed(node)

    def _best_split(
        self, configs: Sequence[str], unsplit: float
    ) -> tuple[str, float, list[str], list[str]] | None:
        # A split must gain more than the floors of the configs whose variant it changes
        # (the rest keep the unsplit leaf's code); of those that do, the largest net gain wins.
        kept = self.best_leaf(configs)[0].variant_id
        best: tuple[str, float, list[str], list[str]] | None = None
        best_net = 0.0
        for name in self.names:
            values = sorted({self.features[c][name] for c in configs})
            for low, high in itertools.pairwise(values):
                threshold = _midpoint(low, high)
                below = [c for c in configs if self.features[c][name] < threshold]
                above = [c for c in configs if self.features[c][name] >= threshold]
                (below_leaf, below_value), (above_leaf, above_value) = (
                    self.best_leaf(below),
                    self.best_leaf(above),
                )
                moved = [c for c in below if below_leaf.variant_id != kept] + [
                    c for c in above if above_leaf.variant_id != kept
                ]
                net = below_value + above_value - unsplit - self.required(moved)
                if moved and net > best_net + 1e-12:
                    best, best_net = (name, threshold, below, above), net
        return best


def _collapsed(node: ThresholdSplit) -> DispatchNode:
    """A split whose two sides are the same variant is that variant."""
    if (
        isinstance(node.below, DispatchLeaf)
        and isinstance(node.above, DispatchLeaf)
        and node.below.variant_id == node.above.variant_id
    ):
        return node.below
    return node


def dispatch_leaves(node: DispatchNode) -> list[DispatchLeaf]:
    """Every leaf of a tree, below before above."""
    if isinstance(node, DispatchLeaf):
        return [node]
    return dispatch_leaves(node.below) + dispatch_leaves(node.above)
