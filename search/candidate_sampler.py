"""Thompson sampling of the next parent by clade metaproductivity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from search.lineage import LineageNode, lineage_arrays


class ParentChoice(BaseModel):
    """The node chosen to be expanded next, with the draw that chose it."""

    model_config = ConfigDict(frozen=True)

    node_id: str = Field(description="Id of the chosen parent.")
    theta: float = Field(description="Its draw from Beta(1 + successes, 1 + failures).")
    successes: int = Field(ge=0, description="SUCCESS outcomes in its clade.")
    failures: int = Field(ge=0, description="FAILURE outcomes in its clade.")
    eligible_count: int = Field(ge=1, description="Number of expandable nodes that competed.")
    slower_excluded: int = Field(
        default=0,
        ge=0,
        description="Expandable nodes left out as clearly slower than the frontier.",
    )


class SpeedBand(BaseModel):
    """Which nodes are fast enough to be parents: none measured clearly slower than the
    frontier (beyond the noise floor) competes with it, so a slow node is never expanded over
    the frontier by the chance of a lucky draw."""

    model_config = ConfigDict(frozen=True)

    frontier_objective: float = Field(gt=0, description="The frontier's objective.")
    noise_floor: float = Field(ge=0, description="Relative noise floor of the device, e.g. 0.02.")

    def admits(self, node: LineageNode) -> bool:
        """Not measured clearly slower than the frontier (unmeasured nodes are admitted)."""
        if node.objective is None:
            return True
        return node.objective * (1 + self.noise_floor) >= self.frontier_objective


def choose_parent(
    nodes: Sequence[LineageNode], rng: np.random.Generator, band: SpeedBand | None = None
) -> ParentChoice:
    """Draw theta ~ Beta(1 + s, 1 + f) per expandable node over its clade and take the argmax,
    among the nodes the speed band admits (all expandable ones when it admits none)."""
    arrays = lineage_arrays(nodes)
    successes, failures = arrays.successes, arrays.failures
    # In node_id order, so the draws do not depend on the order the caller listed the nodes
    # in (e.g. database row order): the same generator state always gives the same parent.
    expandable = arrays.by_id[arrays.expandable[arrays.by_id]]
    fast = expandable if band is None else expandable[_admitted(arrays.objective[expandable], band)]
    eligible = fast if fast.size else expandable
    if eligible.size == 0:
        raise ValueError(
            f"no expandable node among {len(nodes)} lineage nodes; at least the seed must be "
            "marked expandable (correct and fully measured) before a parent can be chosen"
        )
    thetas = rng.beta(1.0 + successes[eligible], 1.0 + failures[eligible])
    best = int(np.argmax(thetas))
    chosen = int(eligible[best])
    return ParentChoice(
        node_id=nodes[chosen].node_id,
        theta=float(thetas[best]),
        successes=int(successes[chosen]),
        failures=int(failures[chosen]),
        eligible_count=int(eligible.size),
        slower_excluded=int(expandable.size - eligible.size),
    )


def _admitted(objective: np.ndarray, band: SpeedBand) -> np.ndarray:
    """SpeedBand.admits over many nodes' objectives at once (NaN: unmeasured, admitted)."""
    with np.errstate(invalid="ignore"):
        fast = objective * (1 + band.noise_floor) >= band.frontier_objective
    return np.isnan(objective) | fast
