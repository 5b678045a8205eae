"""Thompson sampling of the next parent by clade metaproductivity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from search.lineage import LineageNode, count_clades


class ParentChoice(BaseModel):
    """The node chosen to be expanded next, with the draw that chose it."""

    model_config = ConfigDict(frozen=True)

    node_id: str = Field(description="Id of the chosen parent.")
    theta: float = Field(description="Its draw from Beta(1 + successes, 1 + failures).")
    successes: int = Field(ge=0, description="SUCCESS outcomes in its clade.")
    failures: int = Field(ge=0, description="FAILURE outcomes in its clade.")
    eligible_count: int = Field(ge=1, description="Number of expandable nodes that competed.")


def choose_parent(nodes: Sequence[LineageNode], rng: np.random.Generator) -> ParentChoice:
    """Draw theta ~ Beta(1 + s, 1 + f) per expandable node over its clade and take the argmax."""
    counts = count_clades(nodes)
    # Sorted so the draws do not depend on the order the caller listed the nodes in
    # (e.g. database row order): the same generator state always gives the same parent.
    eligible = sorted(node.node_id for node in nodes if node.expandable)
    if not eligible:
        raise ValueError(
            f"no expandable node among {len(nodes)} lineage nodes; at least the seed must be "
            "marked expandable (correct and fully measured) before a parent can be chosen"
        )
    alpha = np.array([1 + counts[node_id].successes for node_id in eligible], dtype=float)
    beta = np.array([1 + counts[node_id].failures for node_id in eligible], dtype=float)
    thetas = rng.beta(alpha, beta)
    best = int(np.argmax(thetas))
    chosen = eligible[best]
    return ParentChoice(
        node_id=chosen,
        theta=float(thetas[best]),
        successes=counts[chosen].successes,
        failures=counts[chosen].failures,
        eligible_count=len(eligible),
    )
