"""The offline search operator: idea-guided mutation, recombination and forbidden settings."""

from __future__ import annotations

import numpy as np
import pytest

from agents.mutation import (
    ChangeReason,
    OperatorSettings,
    SearchSpace,
    describe_changes,
    enforce_forbidden,
    propose_variant,
)
from agents.tunables import read_requirements, read_space, read_tunables

NO_EXTRAS = OperatorSettings(p_recombine=0.0, p_extra_mutation=0.0)


@pytest.fixture(scope="module")
def space(track3_source: str) -> dict[str, list[str]]:
    """The track3 seed candidate's tunable space."""
    return read_space(track3_source)


@pytest.fixture(scope="module")
def parent(track3_source: str) -> dict[str, str]:
    """The track3 seed candidate's tunables (the reference behaviour)."""
    return read_tunables(track3_source)


def test_idea_targets_are_applied(space: dict[str, list[str]], parent: dict[str, str]) -> None:
    targets: dict[str, str | None] = {"attention": "sdpa", "matmul_precision": "fp16"}
    for seed in range(50):
        variant = propose_variant(parent, space, targets, [], np.random.default_rng(seed))
        assert variant.tunables["attention"] == "sdpa"
        assert variant.tunables["matmul_precision"] == "fp16"
        assert variant.reasons["attention"] == ChangeReason.IDEA
        assert set(variant.tunables) == set(parent)
        assert all(variant.tunables[n] in space[n] for n in space)
    exact = propose_variant(parent, space, targets, [], np.random.default_rng(0), NO_EXTRAS)
    assert exact.tunables == {**parent, **targets}


def test_none_target_changes_that_tunable(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    seen = set()
    for seed in range(60):
        rng = np.random.default_rng(seed)
        variant = propose_variant(parent, space, {"score_scale": None}, [], rng, NO_EXTRAS)
        new = variant.tunables["score_scale"]
        assert new != parent["score_scale"] and new in space["score_scale"]
        assert {n for n in parent if variant.tunables[n] != parent[n]} == {"score_scale"}
        seen.add(new)
    assert seen == {"baddbmm", "prescale_q"}


def test_open_targets_step_from_the_parent(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    """An idea naming several tunables without values (a kernel's schedule) moves one or a
    few of them, keeping the parent's other values: a step, not a random restart."""
    schedule = ["fused_rows", "fused_keys", "fused_warps", "fused_stages", "fused_boundary"]
    targets: dict[str, str | None] = dict.fromkeys(schedule)
    fused_parent = {**parent, "fused_kernel": "triton"}
    counts, moved_names = [], set()
    for seed in range(200):
        rng = np.random.default_rng(seed)
        variant = propose_variant(fused_parent, space, targets, [], rng, NO_EXTRAS)
        moved = {n for n in fused_parent if variant.tunables[n] != fused_parent[n]}
        assert moved and moved <= set(schedule), moved
        assert all(variant.reasons[n] is ChangeReason.IDEA for n in moved)
        counts.append(len(moved))
        moved_names |= moved
    assert moved_names == set(schedule), "every open target is sometimes the one that moves"
    assert counts.count(1) > 100, "mostly a single step"
    assert max(counts) > 1, "sometimes a larger step"
    settings = OperatorSettings(p_recombine=0.0, p_extra_mutation=0.0, p_further_open_move=1.0)
    restart = propose_variant(fused_parent, space, targets, [], np.random.default_rng(1), settings)
    assert all(restart.tunables[n] != fused_parent[n] for n in schedule)


def test_unknown_targets_are_ignored(space: dict[str, list[str]], parent: dict[str, str]) -> None:
    rng = np.random.default_rng(3)
    targets: dict[str, str | None] = {"no_such_tunable": "x", "gelu": "not-a-value"}
    variant = propose_variant(parent, space, targets, [], rng, NO_EXTRAS)
    assert "no_such_tunable" not in variant.tunables
    assert variant.tunables["gelu"] == parent["gelu"]
    # Nothing the idea asked for was possible, so the operator explored elsewhere.
    assert variant.tunables != parent


def test_idea_already_in_parent_still_moves(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    sdpa_parent = {**parent, "attention": "sdpa"}
    for seed in range(40):
        rng = np.random.default_rng(seed)
        variant = propose_variant(sdpa_parent, space, {"attention": "sdpa"}, [], rng, NO_EXTRAS)
        changed = {n for n in sdpa_parent if variant.tunables[n] != sdpa_parent[n]}
        assert len(changed) == 1, changed
        (name,) = changed
        assert name != "attention", "the exploration move avoids the idea's own tunables"
        assert variant.reasons[name] == ChangeReason.EXPLORE
        assert variant.tunables["attention"] == "sdpa"


def test_recombination_copies_about_half_of_the_donor(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    donor = {name: values[1] for name, values in space.items()}
    assert all(donor[n] != parent[n] for n in parent)
    settings = OperatorSettings(p_recombine=1.0, p_extra_mutation=0.0)
    rng = np.random.default_rng(2024)
    targets: dict[str, str | None] = {"gelu": "tanh"}
    others = [n for n in space if n not in targets]
    copied = 0
    draws = 400
    for _ in range(draws):
        variant = propose_variant(parent, space, targets, [donor], rng, settings)
        assert variant.tunables["gelu"] == "tanh"
        for name in others:
            value = variant.tunables[name]
            assert value in (parent[name], donor[name]), name
            if value == donor[name]:
                copied += 1
                assert variant.reasons[name] == ChangeReason.RECOMBINE
    rate = copied / (draws * len(others))
    # Expected 0.5 with sd ~0.0095 for 2800 draws: this band is over 5 sd wide either way.
    assert 0.45 < rate < 0.55, rate


def test_no_recombination_without_donors_or_probability(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    donor = {name: values[1] for name, values in space.items()}
    settings = OperatorSettings(p_recombine=0.0, p_extra_mutation=0.0)
    rng = np.random.default_rng(5)
    for _ in range(50):
        variant = propose_variant(parent, space, {"gelu": "tanh"}, [donor], rng, settings)
        assert variant.tunables == {**parent, "gelu": "tanh"}


def test_same_seed_same_child(space: dict[str, list[str]], parent: dict[str, str]) -> None:
    donor = {name: values[-1] for name, values in space.items()}
    settings = OperatorSettings(p_recombine=0.5, p_extra_mutation=0.5)

    def child(seed: int) -> dict[str, str]:
        rng = np.random.default_rng(seed)
        return propose_variant(
            parent, space, {"head_layout": None}, [donor], rng, settings
        ).tunables

    assert child(17) == child(17)
    assert len({tuple(sorted(child(seed).items())) for seed in range(30)}) > 3


def test_enforce_forbidden_prefers_the_parent(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    child = {**parent, "attention": "sdpa", "gelu": "tanh"}
    fixed = enforce_forbidden(child, parent, space, {("attention", "sdpa")})
    assert fixed == {**parent, "gelu": "tanh"}
    # The parent's own value is forbidden too: the first allowed value is used.
    fp16_parent = {**parent, "matmul_precision": "fp16"}
    child = {**parent, "matmul_precision": "bf16"}
    forbidden = {("matmul_precision", "bf16"), ("matmul_precision", "fp16")}
    assert enforce_forbidden(child, fp16_parent, space, forbidden)["matmul_precision"] == "fp32"
    forbidden = {("matmul_precision", "bf16"), ("matmul_precision", "fp32")}
    assert enforce_forbidden(child, fp16_parent, space, forbidden)["matmul_precision"] == "fp16"
    # A child without forbidden settings is returned unchanged (as a copy).
    clean = {**parent, "gelu": "tanh"}
    result = enforce_forbidden(clean, parent, space, {("attention", "sdpa")})
    assert result == clean and result is not clean


def test_enforce_forbidden_never_leaves_a_forbidden_pair(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    rng = np.random.default_rng(11)
    pairs = [(n, v) for n, values in space.items() for v in values]
    for _ in range(300):
        chosen = rng.choice(len(pairs), size=int(rng.integers(1, 6)), replace=False)
        forbidden = {pairs[int(i)] for i in chosen}
        # Keep at least one allowed value per tunable (otherwise nothing can be enforced).
        forbidden = {(n, v) for n, v in forbidden if any((n, o) not in forbidden for o in space[n])}
        child = {n: str(rng.choice(values)) for n, values in space.items()}
        start = {n: str(rng.choice(values)) for n, values in space.items()}
        fixed = enforce_forbidden(child, start, space, forbidden)
        assert not {(n, v) for n, v in fixed.items()} & forbidden
        for name in space:
            if (name, child[name]) not in forbidden:
                assert fixed[name] == child[name]
            elif (name, start[name]) not in forbidden:
                assert fixed[name] == start[name]
            else:
                assert fixed[name] == next(v for v in space[name] if (name, v) not in forbidden)


def test_describe_changes_lists_moved_tunables_with_reasons(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    rng = np.random.default_rng(1)
    variant = propose_variant(parent, space, {"gelu": "tanh"}, [], rng, NO_EXTRAS)
    changes = describe_changes(parent, variant.tunables, variant.reasons)
    assert [(c.name, c.old, c.new, c.reason) for c in changes] == [
        ("gelu", "erf", "tanh", ChangeReason.IDEA)
    ]
    forced = describe_changes(parent, {**parent, "attention": "sdpa"}, {})
    assert [(c.name, c.reason) for c in forced] == [("attention", ChangeReason.CONSTRAINT)]
    assert describe_changes(parent, dict(parent), {}) == []


@pytest.fixture(scope="module")
def search_space(track3_source: str) -> SearchSpace:
    """The track3 seed's space with its declared requirements (fused tunables need the kernel)."""
    return SearchSpace(values=read_space(track3_source), requires=read_requirements(track3_source))


def test_an_idea_on_a_fused_tunable_switches_the_fused_kernel_on(
    search_space: SearchSpace, parent: dict[str, str]
) -> None:
    assert parent["fused_kernel"] == "none"
    targets: dict[str, str | None] = {"fused_rows": None, "fused_warps": None}
    for seed in range(30):
        variant = propose_variant(parent, search_space, targets, [], np.random.default_rng(seed))
        assert variant.tunables["fused_kernel"] == "triton"
        assert variant.reasons["fused_kernel"] == ChangeReason.CONSTRAINT
        # One factor at a time: the block sizes act for the first time at the parent's values.
        assert {n: variant.tunables[n] for n in targets} == {n: parent[n] for n in targets}


def test_an_open_target_that_acts_moves(search_space: SearchSpace, parent: dict[str, str]) -> None:
    # The check above can fail: once the fused kernels are on, the same idea moves a block size.
    fused = {**parent, "fused_kernel": "triton"}
    targets: dict[str, str | None] = {"fused_rows": None, "fused_warps": None}
    for seed in range(30):
        variant = propose_variant(fused, search_space, targets, [], np.random.default_rng(seed))
        assert {n for n in targets if variant.tunables[n] != fused[n]}


def test_without_requirements_the_same_idea_stays_inert(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    # The check can fail: a plain values mapping declares no requirement, so nothing turns on.
    targets: dict[str, str | None] = {"fused_rows": None}
    variant = propose_variant(parent, space, targets, [], np.random.default_rng(0), NO_EXTRAS)
    assert variant.tunables["fused_kernel"] == "none"


def test_an_idea_setting_the_requirement_otherwise_wins(
    search_space: SearchSpace, parent: dict[str, str]
) -> None:
    targets: dict[str, str | None] = {"fused_rows": "32", "fused_kernel": "none"}
    variant = propose_variant(parent, search_space, targets, [], np.random.default_rng(0))
    assert variant.tunables["fused_kernel"] == "none"


def test_exploration_moves_only_tunables_that_act(
    search_space: SearchSpace, parent: dict[str, str]
) -> None:
    explore = OperatorSettings(p_recombine=0.0, p_extra_mutation=1.0)
    inert = {n for n in search_space.values if not search_space.acts(n, parent)}
    assert "fused_rows" in inert
    for seed in range(200):
        variant = propose_variant(
            parent, search_space, {}, [], np.random.default_rng(seed), explore
        )
        moved = {n for n, r in variant.reasons.items() if r is ChangeReason.EXPLORE}
        assert moved and not moved & inert
        assert search_space.effective(variant.tunables) != search_space.effective(parent)


def test_effective_settings_ignore_tunables_that_do_not_act(search_space: SearchSpace) -> None:
    tunables = {"fused_kernel": "none", "fused_rows": "32", "gelu": "erf"}
    assert search_space.effective(tunables) == {"fused_kernel": "none", "gelu": "erf"}
    on = {**tunables, "fused_kernel": "triton"}
    assert search_space.effective(on) == on


def test_a_donor_never_gives_back_the_reference_setting(
    space: dict[str, list[str]], parent: dict[str, str]
) -> None:
    # The parent moved every tunable off the reference; a donor that kept the reference
    # everywhere has nothing to give (it would only undo the parent's changes).
    moved = {name: values[1] for name, values in space.items()}
    reference = {name: values[0] for name, values in space.items()}
    settings = OperatorSettings(p_recombine=1.0, p_extra_mutation=0.0)
    rng = np.random.default_rng(7)
    for _ in range(50):
        variant = propose_variant(moved, space, {"gelu": "erf"}, [reference], rng, settings)
        assert variant.tunables == {**moved, "gelu": "erf"}
        assert ChangeReason.RECOMBINE not in variant.reasons.values()


def test_exploration_never_moves_a_setting_the_parent_chose(
    search_space: SearchSpace, parent: dict[str, str]
) -> None:
    """The extra move explores what the lineage left at the reference's setting; the graph
    the parent switched on stays on whatever the idea does."""
    explore = OperatorSettings(p_recombine=0.0, p_extra_mutation=1.0)
    graphed = {**parent, "graph_capture": "cuda_graph"}
    targets: dict[str, str | None] = {"fused_rows": None}
    explored = set()
    for seed in range(200):
        variant = propose_variant(
            graphed, search_space, targets, [], np.random.default_rng(seed), explore
        )
        assert variant.tunables["graph_capture"] == "cuda_graph"
        explored |= {n for n, r in variant.reasons.items() if r is ChangeReason.EXPLORE}
        assert variant.tunables["fused_kernel"] == "triton"  # set by the idea's requirement
    assert explored and "graph_capture" not in explored
    # From the seed itself the same move does reach the graph (the check above can fail).
    reached = {
        n
        for seed in range(200)
        for n, r in propose_variant(
            parent, search_space, targets, [], np.random.default_rng(seed), explore
        ).reasons.items()
        if r is ChangeReason.EXPLORE
    }
    assert "graph_capture" in reached


def test_an_ideas_tunables_include_what_they_need_to_act() -> None:
    """Transitively: a block size needs the fused kernel, which needs graph capture here."""
    space = SearchSpace(
        values={"block": ["16", "32"], "fused": ["off", "on"], "graph": ["no", "yes"]},
        requires={"block": {"fused": "on"}, "fused": {"graph": "yes"}},
    )
    assert space.with_requirements(["block"]) == {"block", "fused", "graph"}
    assert space.with_requirements(["graph"]) == {"graph"}
    assert space.with_requirements([]) == set()
    # Requirements the settings already meet are not the idea's to change.
    assert space.with_requirements(["block"], {"fused": "on", "graph": "yes"}) == {"block"}
    assert space.with_requirements(["block"], {"fused": "off", "graph": "yes"}) == {
        "block",
        "fused",
    }
