"""The blocked float64 oracle agrees with the plain reference where the reference can run."""

from __future__ import annotations

import pytest
import torch

from kernels.track3 import CONFIGS, Track3Config, generate_inputs
from kernels.track3.oracle import BlockedOracle
from kernels.track3.reference import build_reference_model

REDUCED = [
    CONFIGS["cpu-3"],
    CONFIGS["cpu-4"],
    # Config 14's structure (16 heads, D = FFN, 2 layers) at a size the reference can run,
    # with blocks that do not divide the sequence.
    Track3Config(batch_size=2, seq_len=300, d_model=64, num_heads=16, ffn_dim=64, num_layers=2),
]


@pytest.mark.parametrize("config", REDUCED, ids=lambda c: f"S{c.seq_len}D{c.d_model}H{c.num_heads}")
@pytest.mark.parametrize("padding", [0.0, 0.5])
def test_oracle_matches_the_reference(config: Track3Config, padding: float) -> None:
    reference = build_reference_model(config)
    oracle = BlockedOracle(reference, query_block=64, key_block=96)
    x, mask = generate_inputs(config, 21, padding)
    with torch.no_grad():
        expected = reference(x, mask)
        got = oracle(x, mask)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    assert (got - expected).abs().max().item() < 1e-5
    assert bool((got[~mask] == 0).all())


def test_oracle_is_sensitive_to_the_weights() -> None:
    config = CONFIGS["cpu-5"]
    reference = build_reference_model(config)
    x, mask = generate_inputs(config, 3, 0.25)
    with torch.no_grad():
        expected = reference(x, mask)
        reference.state_dict()["layers.0.ffn_in.bias"].add_(0.01)
        drifted = BlockedOracle(reference)(x, mask)
    assert (drifted - expected).abs().max().item() > 1e-4


def test_oracle_masks_padded_keys_anywhere_in_the_sequence() -> None:
    """Right padding never reaches a valid query under the causal mask; holes do."""
    config = REDUCED[2]
    reference = build_reference_model(config)
    x, _ = generate_inputs(config, 5, 0.0)
    mask = torch.rand(x.shape[:2], generator=torch.Generator().manual_seed(2)) > 0.3
    x = x.masked_fill(~mask[..., None], 0.0)
    with torch.no_grad():
        expected = reference(x, mask)
        got = BlockedOracle(reference, query_block=64, key_block=96)(x, mask)
    assert (got - expected).abs().max().item() < 1e-5
