"""Free idea text onto declared tunables, and 'forbid NAME=VALUE' constraints."""

from __future__ import annotations

import numpy as np
import pytest

from agents.mutation import OperatorSettings, propose_variant
from agents.offline import forbidden_settings, interpret_idea
from agents.tunables import read_space, read_tunables


@pytest.fixture(scope="module")
def space(track3_source: str) -> dict[str, list[str]]:
    """The track3 seed candidate's tunable space."""
    return read_space(track3_source)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("use fused sdpa attention", {"attention": "sdpa"}),
        ("cache the causal mask", {"causal_mask": "cached"}),
        ("fp16 islands", {"matmul_precision": "fp16"}),
        ("bf16 islands for the GEMMs", {"matmul_precision": "bf16"}),
        ("Use the tanh approximation of GELU", {"gelu": "tanh"}),
        ("Keep the head split as strided views", {"head_layout": "strided"}),
        ("Fold the softmax scale into the QK^T GEMM with baddbmm", {"score_scale": "baddbmm"}),
        ("Skip the padding mask fills when every token is valid", {"padding_mask": "skip_if_full"}),
        ("Zero padded rows by multiplying with the mask", {"padding_mask": "multiply"}),
        ("Run attention and the FFN as separate kernels", {"fused_boundary": "separate"}),
    ],
)
def test_texts_map_to_tunables_and_values(
    space: dict[str, list[str]], text: str, expected: dict[str, str]
) -> None:
    assert interpret_idea(text, space) == expected


def test_pack_the_qkv_projection_targets_qkv_projection(
    space: dict[str, list[str]], track3_source: str
) -> None:
    """'Pack' does not stem to 'packed', so the value is 'change it' (None), which is packed."""
    targets = interpret_idea("Pack the QKV projection", space)
    assert set(targets) == {"qkv_projection"}
    assert targets["qkv_projection"] in (None, "packed")
    parent = read_tunables(track3_source)
    settings = OperatorSettings(p_recombine=0.0, p_extra_mutation=0.0)
    for seed in range(10):
        child = propose_variant(parent, space, targets, [], np.random.default_rng(seed), settings)
        assert child.tunables == {**parent, "qkv_projection": "packed"}


@pytest.mark.parametrize(
    "text", ["", "make the coffee stronger", "the and with for", "buy a faster computer"]
)
def test_unrelated_text_maps_to_nothing(space: dict[str, list[str]], text: str) -> None:
    assert interpret_idea(text, space) == {}


def test_softmax_space(softmax_source: str) -> None:
    space = read_space(softmax_source)
    assert interpret_idea("exponentiate once", space) == {"exp_passes": "once"}
    assert interpret_idea("chunks of 64 rows", space) == {"row_chunking": "chunks_of_64"}
    assert interpret_idea("attention", space) == {}


def test_forbidden_settings_parses_only_exact_constraints() -> None:
    constraints = [
        "forbid gelu=tanh",
        "  forbid attention=sdpa  ",
        "forbid matmul_precision=bf16",
        "never use bf16",
        "forbid gelu",
        "forbid a = b",
        "please forbid score_scale=baddbmm",
    ]
    assert forbidden_settings(constraints) == {
        ("gelu", "tanh"),
        ("attention", "sdpa"),
        ("matmul_precision", "bf16"),
    }
    assert forbidden_settings([]) == set()


def test_every_named_value_is_taken(space: dict[str, list[str]]) -> None:
    text = "Keep Q, K and V as strided views and pack the QKV projection"
    assert interpret_idea(text, space) == {"head_layout": "strided", "qkv_projection": "packed"}


def test_without_a_value_the_best_named_tunables_change(space: dict[str, list[str]]) -> None:
    assert interpret_idea("rethink the attention", space) == {"attention": None}


def test_idea_applied() -> None:
    from agents.tunables import idea_applied

    parent = {"attention": "sdpa", "gelu": "erf"}
    assert idea_applied({"attention": "sdpa"}, parent)
    assert not idea_applied({"attention": "sdpa", "gelu": "tanh"}, parent)
    assert not idea_applied({"attention": None}, parent)
    assert not idea_applied({}, parent)


def test_stems_meet_across_suffixes_but_not_across_words(space: dict[str, list[str]]) -> None:
    assert interpret_idea("compile the whole model", space) == {"whole_model_compile": None}
    assert interpret_idea("cached causal masks", space) == {"causal_mask": "cached"}
    assert interpret_idea("a computer", space) == {}
