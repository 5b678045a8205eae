"""Who takes part in a step: the arms its screen and sweep time, the donors it may cross with."""

from __future__ import annotations

from orchestrator.evaluation import BASELINE_ARM, REFERENCE_SHA
from orchestrator.state import SearchState

MAX_DONORS = 32


def recombination_donors(state: SearchState, parent_sha: str) -> list[str]:
    """Every correct, fully measured candidate but the parent and its ancestors (the fastest
    first, at most MAX_DONORS): recombination may cross any two measured candidates, not only
    the frontier. An ancestor differs from the parent only by the lineage's own changes, so
    crossing with it could only undo them (the seed as donor switched a parent's CUDA graph
    off on the H200)."""
    excluded = {parent_sha, *state.ancestry(parent_sha)}
    measured = [c for c in state.candidates.values() if c.expandable and c.sha not in excluded]
    measured.sort(key=lambda c: (-(c.objective or 0.0), c.step))
    return [c.sha for c in measured[:MAX_DONORS]]


def screen_arms(sha: str, parent: str, frontier: str | None) -> dict[str, str]:
    """Candidate and parent and (when it is neither) the frontier: the screen shows where a
    candidate stands against what it must beat, not only against where it came from."""
    arms = {"candidate": sha, "parent": parent}
    if frontier is not None and frontier not in (parent, sha):
        arms["frontier"] = frontier
    return arms


def sweep_arms(sha: str, parent: str | None, frontier: str | None) -> dict[str, str]:
    """Candidate, parent, baseline and (when it is not the parent) the frontier."""
    arms = {"candidate": sha}
    if parent is not None:
        arms["parent"] = parent
    arms[BASELINE_ARM] = REFERENCE_SHA
    if frontier is not None and frontier != parent and frontier != sha:
        arms["frontier"] = frontier
    return arms
