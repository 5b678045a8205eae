"""Each gain on the frontier's lineage says whether the search found it or a person did."""

from __future__ import annotations

from orchestrator.events import StepStarted
from orchestrator.provenance import GainOrigin, format_gains, frontier_gains
from orchestrator.state import CandidateView, IdeaView, SearchState, StepView


def _candidate(
    sha: str, parent: str | None, step: int, agent: str, objective: float
) -> CandidateView:
    return CandidateView(
        sha=sha * 8,
        tree_sha="t" + sha,
        parent_sha=parent * 8 if parent else None,
        step=step,
        idea_id=f"idea-{sha}",
        agent=agent,
        message="",
        objective=objective,
    )


def _idea(idea_id: str, source: str) -> IdeaView:
    return IdeaView(
        idea_id=idea_id,
        text=idea_id,
        source=source,
        quality=0.5,
        uncertainty=0.5,
        targets={},
        devices=[],
        order=0,
        author="ada" if source == "human" else "library",
    )


def _step(number: int, parent: str, forced: bool = False) -> StepView:
    started = StepStarted(
        step=number,
        parent_sha=parent * 8,
        idea_id=f"idea-{number}",
        parent_theta=None,
        idea_theta=0.5,
        idea_forced=False,
        parent_forced=forced,
    )
    return StepView(started=started)


def test_gains_along_the_frontier_lineage_name_their_origin() -> None:
    state = SearchState()
    cands = [
        _candidate("s", None, 0, "seed", 1.0),
        _candidate("a", "s", 1, "offline", 2.0),  # a switch over the seed's code
        _candidate("b", "a", 2, "anthropic:claude", 3.0),  # code the agent wrote
        _candidate("c", "b", 3, "offline", 6.0),  # a human's idea
        _candidate("x", "s", 4, "anthropic:claude", 9.0),  # not on the frontier's lineage
    ]
    state.candidates = {c.sha: c for c in cands}
    state.ideas = {"idea-c": _idea("idea-c", "human"), "idea-a": _idea("idea-a", "library")}
    state.steps = {1: _step(1, "s"), 2: _step(2, "a"), 3: _step(3, "b")}
    state.frontier_sha = "c" * 8
    gains = frontier_gains(state)
    assert [(g.step, g.origin) for g in gains] == [
        (1, GainOrigin.SEARCH_SWITCH),
        (2, GainOrigin.SEARCH_CODE),
        (3, GainOrigin.HAND),
    ]
    assert [g.gain for g in gains] == [2.0, 1.5, 2.0]
    assert "written by hand" in gains[0].note and "ada" in gains[2].note
    state.steps[2] = _step(2, "a", forced=True)  # a REDIRECT chose that parent
    assert frontier_gains(state)[1].origin is GainOrigin.HAND
    assert any("hand" in line for line in format_gains(gains))


def test_a_seed_frontier_has_no_gains() -> None:
    state = SearchState()
    seed = _candidate("s", None, 0, "seed", 1.0)
    state.candidates, state.frontier_sha = {seed.sha: seed}, seed.sha
    assert frontier_gains(state) == []
    assert format_gains([]) == ["gains: none yet (the frontier is the seed)"]


def test_a_gain_is_the_sweeps_paired_ratio_and_a_composition_is_named() -> None:
    state = SearchState()
    seed = _candidate("s", None, 0, "seed", 3.67)
    # Objectives from two sweeps (each with its own baseline timing) read 0.94x; the sweep's
    # paired ratio to the parent said 1.04x, which is the gain (the H200 run printed 0.942x).
    child = _candidate("p", "s", 1, "composer", 3.46)
    child.details = {"vs_parent": {"median": 1.04, "ci_low": 1.03, "ci_high": 1.05}}
    state.candidates = {c.sha: c for c in (seed, child)}
    state.frontier_sha = child.sha
    (gain,) = frontier_gains(state)
    assert gain.gain == 1.04 and gain.origin is GainOrigin.SEARCH_COMPOSITION


def test_a_scoped_gain_names_the_configs_it_was_read_on() -> None:
    state = SearchState()
    seed = _candidate("s", None, 0, "seed", 20.0)
    child = _candidate("w", "s", 1, "offline", 20.24)
    child.details = {
        "vs_parent": {"median": 1.012, "ci_low": 1.008, "ci_high": 1.016},
        "scope": ["8"],
        "scope_vs_parent": {"median": 1.17, "ci_low": 1.15, "ci_high": 1.19},
    }
    state.candidates = {c.sha: c for c in (seed, child)}
    state.frontier_sha = child.sha
    (gain,) = frontier_gains(state)
    assert (gain.gain, gain.scope, gain.scoped_gain) == (1.012, ["8"], 1.17)
    line = format_gains([gain])[1]
    assert "1.012x" in line and "1.170x on configs 8 (all it changed)" in line
    seed_only = _candidate("v", "s", 1, "offline", 21.0)  # unscoped: no such words
    state.candidates[seed_only.sha], state.frontier_sha = seed_only, seed_only.sha
    assert "on configs" not in format_gains(frontier_gains(state))[1]
