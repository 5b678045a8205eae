"""The track3 reference model against the spec: module tree, weights and a float64 forward."""

from __future__ import annotations

import math
from types import ModuleType

import pytest
import torch
from torch import nn

from kernels.track3 import CONFIGS, Track3Config, Transformer, generate_inputs
from kernels.track3.reference import build_reference_model

CPU_IDS = ["cpu-1", "cpu-2", "cpu-3", "cpu-4", "cpu-5"]
# float32 vs float64 of LayerNorm-ed outputs: observed < 1e-6; tanh GELU alone moves ~3e-4.
ATOL = 5e-6


def expected_keys(num_layers: int) -> list[str]:
    """The state_dict keys the spec's module tree implies, in registration order."""
    keys: list[str] = []
    for i in range(num_layers):
        block = f"layers.{i}."
        keys += [block + "norm1.weight", block + "norm1.bias"]
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            keys += [f"{block}attention.{proj}.weight", f"{block}attention.{proj}.bias"]
        keys += [block + "norm2.weight", block + "norm2.bias"]
        keys += [block + "ffn_in.weight", block + "ffn_in.bias"]
        keys += [block + "ffn_out.weight", block + "ffn_out.bias"]
    return [*keys, "final_norm.weight", "final_norm.bias"]


def spec_weights(cfg: Track3Config, seed: int) -> dict[str, torch.Tensor]:
    """Weights built independently in the spec's order: seed, then Linears q,k,v,out,in,out."""
    torch.manual_seed(seed)
    d, f = cfg.d_model, cfg.ffn_dim
    state: dict[str, torch.Tensor] = {}
    for i in range(cfg.num_layers):
        block = f"layers.{i}."
        # LayerNorm consumes no RNG: weight 1, bias 0.
        state[block + "norm1.weight"] = torch.ones(d)
        state[block + "norm1.bias"] = torch.zeros(d)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            linear = nn.Linear(d, d, bias=True)
            state[f"{block}attention.{proj}.weight"] = linear.weight.detach()
            state[f"{block}attention.{proj}.bias"] = linear.bias.detach()
        state[block + "norm2.weight"] = torch.ones(d)
        state[block + "norm2.bias"] = torch.zeros(d)
        ffn_in, ffn_out = nn.Linear(d, f), nn.Linear(f, d)
        state[block + "ffn_in.weight"] = ffn_in.weight.detach()
        state[block + "ffn_in.bias"] = ffn_in.bias.detach()
        state[block + "ffn_out.weight"] = ffn_out.weight.detach()
        state[block + "ffn_out.bias"] = ffn_out.bias.detach()
    state["final_norm.weight"] = torch.ones(d)
    state["final_norm.bias"] = torch.zeros(d)
    return state


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias


def _linear(x: torch.Tensor, p: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    return torch.einsum("bsi,oi->bso", x, p[name + ".weight"]) + p[name + ".bias"]


def _gelu_erf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _zero_rows(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return x if mask is None else torch.where(mask[..., None], x, torch.zeros_like(x))


def spec_forward64(
    state: dict[str, torch.Tensor], cfg: Track3Config, x: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """The spec's forward pass in float64, written without the reference's code."""
    p = {k: v.detach().double() for k, v in state.items()}
    h = x.double()
    b, s, d = h.shape
    heads = cfg.num_heads
    dh = d // heads
    pos = torch.arange(s)
    blocked = (pos[None, :] > pos[:, None])[None, None]  # key j after query i
    if mask is not None:
        blocked = blocked | ~mask[:, None, None, :]

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(b, s, heads, dh).permute(0, 2, 1, 3)

    for i in range(cfg.num_layers):
        block = f"layers.{i}."
        a = _layer_norm(h, p[block + "norm1.weight"], p[block + "norm1.bias"])
        q = split(_linear(a, p, block + "attention.q_proj"))
        k = split(_linear(a, p, block + "attention.k_proj"))
        v = split(_linear(a, p, block + "attention.v_proj"))
        scores = torch.einsum("bhid,bhjd->bhij", q, k) * dh**-0.5
        scores = scores.masked_fill(blocked, float("-inf"))
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        probs = e / e.sum(dim=-1, keepdim=True)
        context = torch.einsum("bhij,bhjd->bhid", probs, v).permute(0, 2, 1, 3).reshape(b, s, d)
        h = h + _zero_rows(_linear(context, p, block + "attention.out_proj"), mask)
        n = _layer_norm(h, p[block + "norm2.weight"], p[block + "norm2.bias"])
        h = h + _linear(_gelu_erf(_linear(n, p, block + "ffn_in")), p, block + "ffn_out")
        h = _zero_rows(h, mask)
    out = _layer_norm(h, p["final_norm.weight"], p["final_norm.bias"])
    return _zero_rows(out, mask)


def test_module_tree_and_state_dict_names_match_the_spec() -> None:
    cfg = CONFIGS["cpu-5"]
    model = Transformer(cfg)
    state = model.state_dict()
    assert list(state) == expected_keys(cfg.num_layers)
    d, f = cfg.d_model, cfg.ffn_dim
    assert state["layers.0.attention.q_proj.weight"].shape == (d, d)
    assert state["layers.0.attention.out_proj.bias"].shape == (d,)
    assert state["layers.0.ffn_in.weight"].shape == (f, d)
    assert state["layers.0.ffn_out.weight"].shape == (d, f)
    assert state["final_norm.weight"].shape == (d,)
    assert isinstance(model.layers, nn.ModuleList) and len(model.layers) == cfg.num_layers
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 2 * cfg.num_layers + 1
    assert all(m.eps == 1e-5 and m.elementwise_affine for m in norms)
    assert not list(model.buffers()), "the reference has no buffers"


def test_layer_count_follows_the_config() -> None:
    cfg = CONFIGS["cpu-5"].model_copy(update={"num_layers": 2, "ffn_dim": 48})
    keys = list(Transformer(cfg).state_dict())
    assert keys == expected_keys(2)
    assert Transformer(cfg).state_dict()["layers.1.ffn_in.weight"].shape == (48, cfg.d_model)


@pytest.mark.parametrize("config_id", ["cpu-4", "cpu-5"])
def test_weights_follow_the_spec_init_order(config_id: str) -> None:
    cfg = CONFIGS[config_id]
    built = build_reference_model(cfg, seed=1234).state_dict()
    again = build_reference_model(cfg, seed=1234).state_dict()
    independent = spec_weights(cfg, 1234)
    assert list(built) == list(independent)
    for key, value in built.items():
        assert value.dtype == torch.float32, key
        assert torch.equal(value, independent[key]), key
        assert torch.equal(value, again[key]), key
    other = build_reference_model(cfg, seed=1235).state_dict()
    assert not torch.equal(
        other["layers.0.attention.q_proj.weight"], built["layers.0.attention.q_proj.weight"]
    )


def test_reference_is_in_eval_mode_on_the_requested_dtype() -> None:
    model = build_reference_model(CONFIGS["cpu-5"], dtype=torch.float64)
    assert not model.training
    assert all(p.dtype == torch.float64 for p in model.parameters())


@pytest.mark.parametrize("padding", [0.0, 0.5])
@pytest.mark.parametrize("config_id", CPU_IDS)
def test_reference_matches_an_independent_float64_forward(config_id: str, padding: float) -> None:
    cfg = CONFIGS[config_id]
    model = build_reference_model(cfg, seed=1234)
    x, mask = generate_inputs(cfg, seed=7, padding_ratio=padding)
    with torch.no_grad():
        out = model(x, valid_token_mask=mask)
    expected = spec_forward64(model.state_dict(), cfg, x, mask)
    assert out.dtype == torch.float32 and out.shape == x.shape
    assert torch.allclose(out.double(), expected, atol=ATOL, rtol=0.0), float(
        (out.double() - expected).abs().max()
    )
    padded = ~mask
    if padding > 0:
        assert bool(padded.any()), "padding 0.5 must pad some position"
    assert bool((out[padded] == 0).all())
    assert bool((out[mask].abs().sum(dim=-1) > 0).all())


def test_float64_forward_is_sensitive_to_the_details_it_checks(track3_seed: ModuleType) -> None:
    """The tolerance above is tight enough to see a missing causal mask or tanh GELU."""
    cfg = CONFIGS["cpu-5"]
    model = build_reference_model(cfg, seed=1234)
    x, mask = generate_inputs(cfg, seed=7, padding_ratio=0.5)
    non_causal = Transformer(cfg.model_copy(update={"causal": False}))
    non_causal.load_state_dict(model.state_dict())
    tunables = {**track3_seed.TUNABLES, "gelu": "tanh"}
    tanh = track3_seed.OptimizedTransformer(cfg, tunables=tunables)
    tanh.load_state_dict(model.state_dict())
    expected = spec_forward64(model.state_dict(), cfg, x, mask)
    with torch.no_grad():
        assert torch.allclose(model(x, mask).double(), expected, atol=ATOL, rtol=0.0)
        for wrong in (non_causal, tanh):
            assert not torch.allclose(wrong(x, mask).double(), expected, atol=ATOL, rtol=0.0)


def test_without_a_mask_nothing_is_masked() -> None:
    cfg = CONFIGS["cpu-4"]
    model = build_reference_model(cfg, seed=1234)
    x, mask = generate_inputs(cfg, seed=11, padding_ratio=0.5)
    assert bool((~mask).any())
    with torch.no_grad():
        out = model(x)
        masked = model(x, valid_token_mask=mask)
    expected = spec_forward64(model.state_dict(), cfg, x, None)
    assert torch.allclose(out.double(), expected, atol=ATOL, rtol=0.0)
    # The "padded" rows (zero input) still attend to earlier tokens and are not zeroed.
    assert bool((out[~mask].abs().sum(dim=-1) > 0).all())
    assert bool((masked[~mask] == 0).all())
    # Causality: valid rows only see valid (earlier) keys, so they agree with the masked run
    # everywhere except where the mask zeroes intermediate padded rows (which later rows never see).
    assert torch.allclose(out[mask], masked[mask], atol=1e-6)


def test_all_true_mask_equals_no_mask_bit_for_bit() -> None:
    cfg = CONFIGS["cpu-2"]
    model = build_reference_model(cfg, seed=1234)
    x, mask = generate_inputs(cfg, seed=3, padding_ratio=0.0)
    with torch.no_grad():
        assert torch.equal(model(x), model(x, valid_token_mask=mask))
