"""Arms and donors of a step: the screen sees the frontier, recombination any measured pair."""

from __future__ import annotations

from orchestrator.arms import MAX_DONORS, recombination_donors, screen_arms
from orchestrator.state import CandidateView, SearchState
from search import Verdict


def _measured(sha: str, objective: float, verdict: Verdict = Verdict.REJECTED) -> CandidateView:
    return CandidateView(
        sha=sha,
        tree_sha="t" + sha,
        parent_sha="seed",
        step=int(objective * 10),
        idea_id=None,
        agent="offline",
        message="",
        verdict=verdict,
        verdict_stage="sweep",
        objective=objective,
    )


def test_the_screen_times_the_frontier_when_it_is_not_the_parent() -> None:
    assert screen_arms("c", "p", "f") == {"candidate": "c", "parent": "p", "frontier": "f"}
    assert screen_arms("c", "p", "p") == {"candidate": "c", "parent": "p"}
    assert screen_arms("c", "p", None) == {"candidate": "c", "parent": "p"}


def test_any_measured_candidate_but_the_parent_may_donate() -> None:
    state = SearchState()
    cands = [_measured("a", 1.5), _measured("b", 3.0, Verdict.PROMOTED), _measured("c", 2.0)]
    screened_out = _measured("d", 9.0)
    screened_out.verdict_stage = "screen"  # never fully measured: no donor
    state.candidates = {c.sha: c for c in [*cands, screened_out]}
    assert recombination_donors(state, "c") == ["b", "a"]  # fastest first, not only the frontier
    many = {f"x{i}": _measured(f"x{i}", 1 + i / 100) for i in range(2 * MAX_DONORS)}
    state.candidates = many
    assert len(recombination_donors(state, "x0")) == MAX_DONORS


def test_the_parents_ancestors_never_donate() -> None:
    # seed -> a -> b (the parent); c is a sibling of a: only c crosses with b.
    seed = _measured("seed", 1.0, Verdict.PROMOTED)
    seed.parent_sha = None
    a, b, c = _measured("a", 2.0, Verdict.PROMOTED), _measured("b", 3.0), _measured("c", 1.5)
    b.parent_sha = "a"
    state = SearchState()
    state.candidates = {x.sha: x for x in (seed, a, b, c)}
    assert recombination_donors(state, "b") == ["c"]
    # The check can fail: from a's sibling's point of view, a and b are other lineages.
    assert recombination_donors(state, "c") == ["b", "a"]


def test_ancestry_stops_at_unknown_parents_and_never_loops() -> None:
    a, b = _measured("a", 1.0), _measured("b", 2.0)
    a.parent_sha, b.parent_sha = "b", "a"  # a corrupt, cyclic parent graph
    state = SearchState()
    state.candidates = {"a": a, "b": b}
    assert state.ancestry("a") == ["a", "b"]
    b.parent_sha = "gone"  # a parent the run does not know
    assert state.ancestry("a") == ["a", "b"]
    assert state.ancestry(None) == [] and state.ancestry("nope") == []
