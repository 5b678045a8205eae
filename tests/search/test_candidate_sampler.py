"""Parent choice by Thompson sampling over clade metaproductivity."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from search.candidate_sampler import SpeedBand, choose_parent
from search.lineage import LineageNode, NodeOutcome
from tests.search.beta_math import binomial_band, probability_greater

S, F, U = NodeOutcome.SUCCESS, NodeOutcome.FAILURE, NodeOutcome.UNTRIED
DRAWS = 2000


def node(
    node_id: str, parent_id: str | None, outcome: NodeOutcome, expandable: bool = True
) -> LineageNode:
    """A lineage node."""
    return LineageNode(node_id=node_id, parent_id=parent_id, expandable=expandable, outcome=outcome)


def children(parent_id: str, prefix: str, outcome: NodeOutcome, count: int) -> list[LineageNode]:
    """Non-expandable children of one outcome (e.g. failed expansion attempts)."""
    return [node(f"{prefix}{i}", parent_id, outcome, expandable=False) for i in range(count)]


def choice_counts(nodes: list[LineageNode], seed: int, draws: int = DRAWS) -> Counter[str]:
    """How often each node is chosen over repeated draws from one seeded generator."""
    rng = np.random.default_rng(seed)
    return Counter(choose_parent(nodes, rng).node_id for _ in range(draws))


def test_mediocre_node_with_productive_clade_beats_barren_leaf() -> None:
    # Both nodes failed themselves; only the clade tells them apart (5/1 against 0/3).
    nodes = [
        node("root", None, U, expandable=False),
        node("mediocre", "root", F),
        *children("mediocre", "win", S, 5),
        node("leaf", "root", F),
        *children("leaf", "miss", F, 2),
    ]
    counts = choice_counts(nodes, seed=11)
    assert set(counts) == {"mediocre", "leaf"}
    exact = probability_greater((6.0, 2.0), (1.0, 4.0))
    frequency = counts["mediocre"] / DRAWS
    # An own-outcome sampler would see Beta(1, 2) twice and pick each about half the time.
    assert abs(frequency - exact) < binomial_band(exact, DRAWS)
    assert frequency > 0.5 + binomial_band(0.5, DRAWS)


def test_frequencies_match_exact_beta_comparison() -> None:
    nodes = [
        node("root", None, U, expandable=False),
        node("a", "root", S),  # clade 3 successes / 1 failure -> Beta(4, 2)
        *children("a", "a_s", S, 2),
        *children("a", "a_f", F, 1),
        node("b", "root", F),  # clade 1 success / 2 failures -> Beta(2, 3)
        *children("b", "b_s", S, 1),
        *children("b", "b_f", F, 1),
    ]
    exact = probability_greater((4.0, 2.0), (2.0, 3.0))
    band = binomial_band(exact, DRAWS)
    # The band must exclude the alternatives: uniform choice (0.5) and greedy posterior mean (1.0).
    assert abs(exact - 0.5) > 2 * band
    assert abs(exact - 1.0) > 2 * band
    frequency = choice_counts(nodes, seed=2024)["a"] / DRAWS
    assert abs(frequency - exact) < band


def test_choice_reports_clade_counts_and_draw() -> None:
    nodes = [node("root", None, U), node("c", "root", S), *children("c", "x", F, 2)]
    choice = choose_parent(nodes, np.random.default_rng(0))
    expected = {"root": (1, 2), "c": (1, 2)}[choice.node_id]
    assert (choice.successes, choice.failures) == expected
    assert 0.0 < choice.theta < 1.0
    assert choice.eligible_count == 2


def test_same_seed_gives_same_sequence_regardless_of_node_order() -> None:
    nodes = [
        node("root", None, U),
        node("a", "root", S),
        node("b", "root", F),
        node("c", "a", S),
        node("d", "a", F),
    ]
    rng_first, rng_second = np.random.default_rng(7), np.random.default_rng(7)
    shuffled = [nodes[i] for i in (3, 0, 4, 2, 1)]
    first = [choose_parent(nodes, rng_first).node_id for _ in range(200)]
    second = [choose_parent(shuffled, rng_second).node_id for _ in range(200)]
    assert first == second
    assert len(set(first)) > 1  # the sequence is not trivially constant


def test_different_seeds_give_different_sequences() -> None:
    nodes = [node("root", None, U), node("a", "root", U), node("b", "root", U)]
    rng_one, rng_two = np.random.default_rng(1), np.random.default_rng(2)
    one = [choose_parent(nodes, rng_one).node_id for _ in range(100)]
    two = [choose_parent(nodes, rng_two).node_id for _ in range(100)]
    assert one != two


def test_non_expandable_nodes_are_never_chosen() -> None:
    nodes = [
        node("root", None, U, expandable=False),
        node("hot", "root", S, expandable=False),  # huge clade, but not a valid parent
        *children("hot", "h", S, 50),
        node("cold", "root", F),
        *children("cold", "c", F, 5),
        node("fresh", "root", U),
    ]
    counts = choice_counts(nodes, seed=3, draws=500)
    assert set(counts) <= {"cold", "fresh"}
    assert counts["fresh"] > counts["cold"]


def test_no_expandable_node_is_an_error() -> None:
    nodes = [node("root", None, U, expandable=False), node("x", "root", F, expandable=False)]
    with pytest.raises(ValueError, match="no expandable node among 2 lineage nodes"):
        choose_parent(nodes, np.random.default_rng(0))


def test_lineage_errors_propagate() -> None:
    with pytest.raises(ValueError, match="unknown parent"):
        choose_parent([node("x", "nowhere", S)], np.random.default_rng(0))


def timed(
    node_id: str, parent_id: str | None, outcome: NodeOutcome, objective: float
) -> LineageNode:
    """An expandable node with a measured objective."""
    return LineageNode(
        node_id=node_id, parent_id=parent_id, expandable=True, outcome=outcome, objective=objective
    )


def test_a_node_clearly_slower_than_the_frontier_is_never_expanded_over_it() -> None:
    # Run 4's case: a 2.7x node with a lucky clade against a 14x frontier with none.
    nodes = [
        timed("seed", None, U, 1.0),
        timed("slow", "seed", S, 2.7),
        *children("slow", "s", S, 3),
        timed("frontier", "seed", S, 14.0),
        timed("close", "frontier", F, 13.9),  # within the 2% floor: competes
    ]
    band = SpeedBand(frontier_objective=14.0, noise_floor=0.02)
    rng = np.random.default_rng(4)
    picks = Counter(choose_parent(nodes, rng, band).node_id for _ in range(DRAWS))
    assert set(picks) == {"frontier", "close"}
    assert choose_parent(nodes, rng, band).slower_excluded == 2
    # Without the band the slow clade wins most draws: the guard is what stops it.
    assert choice_counts(nodes, 4)["slow"] > DRAWS // 4


def test_the_band_admits_unmeasured_nodes_and_falls_back_when_it_admits_none() -> None:
    band = SpeedBand(frontier_objective=10.0, noise_floor=0.01)
    assert band.admits(node("unmeasured", None, U))
    assert band.admits(timed("equal", None, U, 10.0 / 1.01))
    assert not band.admits(timed("slower", None, U, 9.8))
    # The frontier itself exhausted, only slower nodes left: they compete rather than none.
    nodes = [timed("a", None, U, 2.0), timed("b", "a", S, 3.0)]
    choice = choose_parent(nodes, np.random.default_rng(0), band)
    assert choice.node_id in {"a", "b"} and choice.slower_excluded == 0
