"""The track3 input generator against a hand-written re-implementation of the spec."""

from __future__ import annotations

import pytest
import torch

from kernels.track3 import CONFIGS, Track3Config, generate_inputs
from kernels.track3.runtime import generate_inputs as runtime_generate
from kernels.workload import TrialSpec

CPU_IDS = ["cpu-1", "cpu-2", "cpu-3", "cpu-4", "cpu-5"]


def spec_generate(
    cfg: Track3Config, seed: int, padding_ratio: float, input_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """docs/track3-workload.md 'Inputs', line by line."""
    b, s, d = cfg.batch_size, cfg.seq_len, cfg.d_model
    g = torch.Generator("cpu").manual_seed(seed)
    x = torch.randn(b, s, d, generator=g) * input_scale
    if padding_ratio <= 0:
        return x, torch.ones(b, s, dtype=torch.bool)
    min_valid = max(1, round(s * (1 - padding_ratio)))  # round() of a float is an int
    lengths = torch.randint(min_valid, s + 1, (b,), generator=g)
    mask = torch.arange(s)[None, :] < lengths[:, None]
    x = x.clone()
    x[~mask] = 0.0
    return x, mask


@pytest.mark.parametrize("padding", [0.0, 0.25, 0.5, 0.99])
@pytest.mark.parametrize("config_id", CPU_IDS)
def test_matches_the_spec(config_id: str, padding: float) -> None:
    cfg = CONFIGS[config_id]
    x, mask = generate_inputs(cfg, 1234, padding, 1.5, "cpu")
    ex, emask = spec_generate(cfg, 1234, padding, 1.5)
    assert x.dtype == torch.float32 and mask.dtype == torch.bool
    assert x.shape == (cfg.batch_size, cfg.seq_len, cfg.d_model)
    assert mask.shape == (cfg.batch_size, cfg.seq_len)
    assert torch.equal(x, ex)
    assert torch.equal(mask, emask)


def test_runtime_passes_the_trial_through() -> None:
    cfg = CONFIGS["cpu-1"]
    trial = TrialSpec(seed=1236, padding_ratio=0.5, input_scale=2.0)
    x, mask = runtime_generate(cfg, trial, "cpu")
    ex, emask = spec_generate(cfg, 1236, 0.5, 2.0)
    assert torch.equal(x, ex) and torch.equal(mask, emask)


def test_no_padding_gives_an_all_true_mask_and_untouched_x() -> None:
    cfg = CONFIGS["cpu-1"]
    x, mask = generate_inputs(cfg, 5, 0.0)
    plain = torch.randn(
        cfg.batch_size, cfg.seq_len, cfg.d_model, generator=torch.Generator().manual_seed(5)
    )
    assert bool(mask.all())
    assert torch.equal(x, plain)
    assert not bool((x == 0).all(dim=-1).any()), "no row is zeroed without padding"


def test_padding_draws_lengths_after_x_from_the_same_generator() -> None:
    cfg = CONFIGS["cpu-1"]
    x, mask = generate_inputs(cfg, 5, 0.5)
    x0, _ = generate_inputs(cfg, 5, 0.0)
    # x itself is the same draw; only the padded positions are zeroed.
    assert torch.equal(x[mask], x0[mask])
    assert bool((x[~mask] == 0).all())
    assert bool((~mask).any()), "padding 0.5 on S=128 pads at least one row here"


@pytest.mark.parametrize("padding", [0.1, 0.5, 0.9, 0.999])
def test_masks_are_prefixes_with_at_least_one_valid_token(padding: float) -> None:
    cfg = CONFIGS["cpu-5"].model_copy(update={"batch_size": 64})
    for seed in range(20):
        _, mask = generate_inputs(cfg, seed, padding)
        lengths = mask.sum(dim=1)
        assert bool((lengths >= 1).all())
        prefix = torch.arange(cfg.seq_len)[None, :] < lengths[:, None]
        assert torch.equal(mask, prefix)
        min_valid = max(1, round(cfg.seq_len * (1 - padding)))
        assert bool((lengths >= min_valid).all())


def test_extreme_padding_still_leaves_one_token_and_varies_lengths() -> None:
    cfg = CONFIGS["cpu-5"].model_copy(update={"batch_size": 256})
    _, mask = generate_inputs(cfg, 1, 0.999)
    lengths = mask.sum(dim=1)
    assert int(lengths.min()) == 1
    assert len(set(lengths.tolist())) > 1


def test_input_scale_scales() -> None:
    cfg = CONFIGS["cpu-4"]
    x1, m1 = generate_inputs(cfg, 9, 0.25, 1.0)
    x3, m3 = generate_inputs(cfg, 9, 0.25, 3.0)
    assert torch.equal(m1, m3)
    assert torch.allclose(x3, 3.0 * x1, rtol=1e-6, atol=0.0)
    assert not torch.allclose(x3, x1)


def test_seeds_differ_and_repeat() -> None:
    cfg = CONFIGS["cpu-4"]
    a, ma = generate_inputs(cfg, 1234, 0.5)
    b, mb = generate_inputs(cfg, 1234, 0.5)
    c, _ = generate_inputs(cfg, 1235, 0.5)
    assert torch.equal(a, b) and torch.equal(ma, mb)
    assert not torch.equal(a, c)
