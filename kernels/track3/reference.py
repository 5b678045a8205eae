"""The organizer's reference model for track3, written from docs/track3-workload.md."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    """Separate Q/K/V projections, explicit scores, FP32 softmax (the reference arithmetic)."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=True)
        self.k_proj = nn.Linear(d_model, d_model, bias=True)
        self.v_proj = nn.Linear(d_model, d_model, bias=True)
        self.out_proj = nn.Linear(d_model, d_model, bias=True)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, d = t.shape
        return t.view(b, s, self.num_heads, d // self.num_heads).transpose(1, 2).contiguous()

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = True
    ) -> torch.Tensor:
        b, s, d = x.shape
        q = self._split(self.q_proj(x))
        k = self._split(self.k_proj(x))
        v = self._split(self.v_proj(x))
        scores = (q @ k.transpose(-2, -1)) * (d / self.num_heads) ** -0.5
        if causal:
            future = torch.ones(s, s, device=x.device, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        probs = torch.softmax(scores.float(), dim=-1).to(x.dtype)
        context = (probs @ v).transpose(1, 2).contiguous().view(b, s, d)
        out = self.out_proj(context)
        if mask is not None:
            out = out.masked_fill(~mask[..., None], 0)
        return out


class TransformerBlock(nn.Module):
    """Pre-LN block: attention then exact-GELU feed-forward, padded rows zeroed."""

    def __init__(self, d_model: int, num_heads: int, ffn_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.ffn_in = nn.Linear(d_model, ffn_dim)
        self.ffn_out = nn.Linear(ffn_dim, d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = True
    ) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), mask, causal)
        x = x + self.ffn_out(F.gelu(self.ffn_in(self.norm2(x)), approximate="none"))
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0)
        return x


class Transformer(nn.Module):
    """The track3 reference: L pre-LN blocks and a final LayerNorm over hidden states."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.causal = bool(getattr(config, "causal", True))
        self.layers = nn.ModuleList(
            TransformerBlock(config.d_model, config.num_heads, config.ffn_dim)
            for _ in range(config.num_layers)
        )
        self.final_norm = nn.LayerNorm(config.d_model, eps=1e-5)

    def forward(
        self, x: torch.Tensor, valid_token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, valid_token_mask, self.causal)
        x = self.final_norm(x)
        if valid_token_mask is not None:
            x = x.masked_fill(~valid_token_mask[..., None], 0)
        return x


def build_reference_model(
    config: Any, device: str = "cpu", dtype: torch.dtype = torch.float32, seed: int = 1234
) -> Transformer:
    """Weights exactly as the organizer makes them: seeded default init on CPU, then moved."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    model = Transformer(config)
    return model.to(device=device, dtype=dtype).eval()
