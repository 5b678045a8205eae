"""A pre-LN transformer block: attention, then the exact-GELU FFN, fp32 LayerNorm and residual."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .common import (
    LOW_PRECISION,
    DerivedCache,
    Fp32Results,
    SettingsRead,
    linear_fp32,
    weight_key,
    zero_padded,
)


class TransformerBlock(nn.Module):
    """Pre-LN block with fp32 LayerNorm and residual around the tunable islands."""

    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, tunables: SettingsRead):
        super().__init__()
        self.tunables = tunables
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attention = MultiHeadAttention(d_model, num_heads, tunables)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.ffn_in = nn.Linear(d_model, ffn_dim)
        self.ffn_out = nn.Linear(ffn_dim, d_model)
        self._weights = DerivedCache()
        self._forms = Fp32Results()

    def _ffn_weights(self, compute_dtype: torch.dtype) -> dict[str, torch.Tensor]:
        params = (self.ffn_in.weight, self.ffn_in.bias, self.ffn_out.weight, self.ffn_out.bias)
        if compute_dtype == self.ffn_in.weight.dtype:
            return dict(zip(("in_w", "in_b", "out_w", "out_b"), params, strict=True))

        def build() -> dict[str, torch.Tensor]:
            with torch.no_grad():  # biases stay as they are: added to fp32 results
                return {
                    "in_w": self.ffn_in.weight.to(compute_dtype),
                    "in_b": self.ffn_in.bias,
                    "out_w": self.ffn_out.weight.to(compute_dtype),
                    "out_b": self.ffn_out.bias,
                }

        return self._weights.get((*weight_key(*params), compute_dtype), build)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = True
    ) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), mask, causal)
        compute_dtype = LOW_PRECISION.get(self.tunables["matmul_precision"], x.dtype)
        w = self._ffn_weights(compute_dtype)
        approximate = "tanh" if self.tunables["gelu"] == "tanh" else "none"
        normed = self.norm2(x)
        if compute_dtype in LOW_PRECISION.values():
            # Low-precision operands, fp32 results: GELU reads the fp32 GEMM result, and the
            # residual adds an fp32 one (only what feeds the next GEMM is rounded).
            hidden = linear_fp32(normed.to(compute_dtype), w["in_w"], w["in_b"], self._forms)
            hidden = F.gelu(hidden, approximate=approximate).to(compute_dtype)
            out = linear_fp32(hidden, w["out_w"], w["out_b"], self._forms)
        else:
            hidden = F.gelu(F.linear(normed, w["in_w"], w["in_b"]), approximate=approximate)
            out = F.linear(hidden, w["out_w"], w["out_b"])
        x = x + out.to(x.dtype)
        return zero_padded(x, mask, self.tunables["padding_mask"])
