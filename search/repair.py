"""Which candidate that missed the tolerance narrowly a repair step should start from."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field


class RepairSettings(BaseModel):
    """What counts as a narrow miss (a rubric, set before any measurement)."""

    model_config = ConfigDict(frozen=True)

    margin: float = Field(
        default=2.0,
        gt=1,
        description="A failing config counts as missed narrowly when its worst element used "
        "at most this many times its tolerance: a rounding's tail, not a wrong result (a wrong "
        "result misses by orders of magnitude).",
    )


class MissedCandidate(BaseModel):
    """A candidate that failed the correctness gate, as the repair rule sees it."""

    model_config = ConfigDict(frozen=True)

    sha: str = Field(description="The candidate's commit.")
    step: int = Field(description="The step that made it (the most recent miss goes first).")
    failed_shares: Mapping[str, float | None] = Field(
        description="Per failing config, the largest share of its tolerance an element used "
        "(None: not reported, which never counts as narrow)."
    )


def missed_narrowly(shares: Mapping[str, float | None], settings: RepairSettings) -> bool:
    """Every failing config missed within the margin (and at least one config failed)."""
    return bool(shares) and all(
        share is not None and math.isfinite(share) and share <= settings.margin
        for share in shares.values()
    )


def choose_repair(
    missed: Sequence[MissedCandidate], repaired: frozenset[str], settings: RepairSettings
) -> MissedCandidate | None:
    """The most recent narrow miss not repaired yet (None: nothing to repair)."""
    open_misses = [
        m for m in missed if m.sha not in repaired and missed_narrowly(m.failed_shares, settings)
    ]
    return max(open_misses, key=lambda m: m.step, default=None)
