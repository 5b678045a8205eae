"""Clade counts over the declared parent graph."""

from __future__ import annotations

import time

import numpy as np
import pytest

from search.lineage import CladeCount, LineageNode, NodeOutcome, count_clades

S, F, U = NodeOutcome.SUCCESS, NodeOutcome.FAILURE, NodeOutcome.UNTRIED


def node(
    node_id: str, parent_id: str | None, outcome: NodeOutcome, expandable: bool = True
) -> LineageNode:
    """A lineage node."""
    return LineageNode(node_id=node_id, parent_id=parent_id, expandable=expandable, outcome=outcome)


def hand_tree() -> list[LineageNode]:
    """root -> {a -> {a1 -> a1x (failed attempt), a2 -> a2a}, b -> bx (failed attempt)}."""
    return [
        node("root", None, U),
        node("a", "root", S),
        node("a1", "a", F),
        node("a1x", "a1", F, expandable=False),
        node("a2", "a", S),
        node("a2a", "a2", S),
        node("b", "root", F),
        node("bx", "b", F, expandable=False),
    ]


HAND_COUNTS = {
    "root": (3, 4),
    "a": (3, 2),
    "a1": (0, 2),
    "a1x": (0, 1),
    "a2": (2, 0),
    "a2a": (1, 0),
    "b": (0, 2),
    "bx": (0, 1),
}


def as_pairs(counts: dict[str, CladeCount]) -> dict[str, tuple[int, int]]:
    """Counts as (successes, failures) pairs."""
    return {node_id: (count.successes, count.failures) for node_id, count in counts.items()}


def test_hand_built_tree() -> None:
    assert as_pairs(count_clades(hand_tree())) == HAND_COUNTS


def test_counts_do_not_depend_on_input_order() -> None:
    nodes = hand_tree()
    for seed in range(5):
        order = np.random.default_rng(seed).permutation(len(nodes))
        assert as_pairs(count_clades([nodes[i] for i in order])) == HAND_COUNTS


def test_untried_nodes_count_for_nothing() -> None:
    counts = count_clades([node("r", None, U), node("c", "r", U), node("d", "c", U)])
    assert all(count == CladeCount(successes=0, failures=0) for count in counts.values())


def test_forest_of_two_roots() -> None:
    nodes = [node("r1", None, U), node("x", "r1", S), node("r2", None, F), node("y", "r2", S)]
    assert as_pairs(count_clades(nodes)) == {
        "r1": (1, 0),
        "x": (1, 0),
        "r2": (1, 1),
        "y": (1, 0),
    }


def test_empty_lineage_has_no_counts() -> None:
    assert count_clades([]) == {}


@pytest.mark.parametrize("reverse", [False, True])
def test_ten_thousand_deep_chain_is_fast(reverse: bool) -> None:
    depth = 10_000
    nodes = [node("n0", None, U)] + [
        node(f"n{i}", f"n{i - 1}", S if i % 3 == 0 else F) for i in range(1, depth)
    ]
    if reverse:
        nodes.reverse()
    start = time.perf_counter()
    counts = count_clades(nodes)
    elapsed = time.perf_counter() - start
    # Quadratic ancestor walks would take ~5e7 steps here (tens of seconds in Python).
    assert elapsed < 1.0
    successes = sum(1 for i in range(1, depth) if i % 3 == 0)
    assert counts["n0"] == CladeCount(successes=successes, failures=depth - 1 - successes)
    assert counts["n9998"] == CladeCount(successes=1, failures=1)  # n9998 fails, n9999 succeeds
    assert counts["n9990"] == CladeCount(successes=4, failures=6)  # 9990, 9993, 9996, 9999


def test_unknown_parent_is_named() -> None:
    with pytest.raises(ValueError, match=r"node 'orphan' names unknown parent 'ghost'"):
        count_clades([node("root", None, U), node("orphan", "ghost", S)])


def test_cycle_is_named() -> None:
    nodes = [node("root", None, U), node("p", "q", S), node("q", "p", F), node("c", "q", S)]
    with pytest.raises(ValueError, match=r"parent cycle through node 'p' \(2 nodes"):
        count_clades(nodes)


def test_self_parent_is_a_cycle() -> None:
    with pytest.raises(ValueError, match=r"parent cycle through node 'loop'"):
        count_clades([node("loop", "loop", S)])


def test_duplicate_id_is_named() -> None:
    with pytest.raises(ValueError, match=r"'a' appears twice"):
        count_clades([node("a", None, U), node("a", None, S)])


def test_the_vectorized_clade_counts_agree_with_the_linear_walk() -> None:
    import numpy as np

    from search.lineage import clade_arrays

    rng = np.random.default_rng(3)
    outcomes = list(NodeOutcome)
    trees = []
    for size in (1, 2, 50, 2000):
        nodes = [LineageNode(node_id="r", parent_id=None, expandable=True, outcome=outcomes[0])]
        for i in range(1, size):
            parent = nodes[int(rng.integers(0, i))].node_id
            outcome = outcomes[int(rng.integers(0, len(outcomes)))]
            nodes.append(
                LineageNode(node_id=f"x{i}", parent_id=parent, expandable=True, outcome=outcome)
            )
        trees.append(nodes[::-1])  # children before parents: order must not matter
    chain = [
        LineageNode(
            node_id=f"c{i}",
            parent_id=f"c{i - 1}" if i else None,
            expandable=True,
            outcome=NodeOutcome.SUCCESS,
        )
        for i in range(5000)
    ]
    for nodes in [*trees, chain]:
        expected = count_clades(nodes)
        successes, failures = clade_arrays(nodes)
        assert [(c.successes, c.failures) for c in expected.values()] == [
            (int(s), int(f)) for s, f in zip(successes, failures, strict=True)
        ]
    assert int(clade_arrays(chain)[0][0]) == 5000
    cycle = [
        LineageNode(node_id="a", parent_id="b", expandable=True, outcome=NodeOutcome.FAILURE),
        LineageNode(node_id="b", parent_id="a", expandable=True, outcome=NodeOutcome.FAILURE),
    ]
    with pytest.raises(ValueError, match="parent cycle"):
        clade_arrays(cycle)
