"""Multi-head attention with the reference's parameter names and tunable internals."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .chunking import explicit_scores_exceed
from .common import (
    LOW_PRECISION,
    DerivedCache,
    Fp32Results,
    SettingsRead,
    linear_fp32,
    matmul_fp32,
    weight_key,
    zero_padded,
)


class MultiHeadAttention(nn.Module):
    """Attention with the reference's parameter names and tunable internals."""

    def __init__(self, d_model: int, num_heads: int, tunables: SettingsRead) -> None:
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.tunables = tunables
        self.q_proj = nn.Linear(d_model, d_model, bias=True)
        self.k_proj = nn.Linear(d_model, d_model, bias=True)
        self.v_proj = nn.Linear(d_model, d_model, bias=True)
        self.out_proj = nn.Linear(d_model, d_model, bias=True)
        self._weights = DerivedCache()
        self._forms = Fp32Results()
        self._masks: dict[tuple[int, str], torch.Tensor] = {}

    def _derived(self, compute_dtype: torch.dtype) -> dict[str, torch.Tensor]:
        params = [self.q_proj.weight, self.q_proj.bias, self.k_proj.weight, self.k_proj.bias]
        params += [self.v_proj.weight, self.v_proj.bias, self.out_proj.weight, self.out_proj.bias]
        packed = self.tunables["qkv_projection"] == "packed"
        if not packed and compute_dtype == self.q_proj.weight.dtype:
            # Nothing derived: use the parameters themselves (no per-call cache check).
            names = ("q_w", "q_b", "k_w", "k_b", "v_w", "v_b", "o_w", "o_b")
            return dict(zip(names, params, strict=True))

        def build() -> dict[str, torch.Tensor]:
            with torch.no_grad():
                out = {
                    "q_w": self.q_proj.weight.to(compute_dtype),
                    "q_b": self.q_proj.bias.to(compute_dtype),
                    "k_w": self.k_proj.weight.to(compute_dtype),
                    "k_b": self.k_proj.bias.to(compute_dtype),
                    "v_w": self.v_proj.weight.to(compute_dtype),
                    "v_b": self.v_proj.bias.to(compute_dtype),
                    "o_w": self.out_proj.weight.to(compute_dtype),
                    "o_b": self.out_proj.bias.to(compute_dtype),
                }
                if packed:
                    out["qkv_w"] = torch.cat([out["q_w"], out["k_w"], out["v_w"]]).contiguous()
                    out["qkv_b"] = torch.cat([out["q_b"], out["k_b"], out["v_b"]]).contiguous()
            return out

        return self._weights.get((*weight_key(*params), compute_dtype, packed), build)

    def _causal_future(self, s: int, device: torch.device) -> torch.Tensor:
        if self.tunables["causal_mask"] != "cached":
            return torch.ones(s, s, device=device, dtype=torch.bool).triu(1)
        key = (s, str(device))
        if key not in self._masks:
            self._masks[key] = torch.ones(s, s, device=device, dtype=torch.bool).triu(1)
        return self._masks[key]

    def _heads(self, t: torch.Tensor, b: int, s: int) -> torch.Tensor:
        t = t.view(b, s, self.num_heads, self.d_model // self.num_heads).transpose(1, 2)
        return t.contiguous() if self.tunables["head_layout"] == "contiguous" else t

    def _project_qkv(
        self, x: torch.Tensor, w: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, s, _ = x.shape
        if self.tunables["qkv_projection"] == "packed":
            qkv = F.linear(x, w["qkv_w"], w["qkv_b"]).view(b, s, 3, self.num_heads, -1)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            if self.tunables["head_layout"] == "contiguous":
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            return q, k, v
        q = self._heads(F.linear(x, w["q_w"], w["q_b"]), b, s)
        k = self._heads(F.linear(x, w["k_w"], w["k_b"]), b, s)
        v = self._heads(F.linear(x, w["v_w"], w["v_b"]), b, s)
        return q, k, v

    def _explicit(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        causal: bool,
    ) -> torch.Tensor:
        b, h, s, dh = q.shape
        scale = (self.d_model / self.num_heads) ** -0.5
        mode = self.tunables["score_scale"]
        if q.dtype in LOW_PRECISION.values():
            # Low-precision operands, fp32 scores: rounding the scores would cost the softmax
            # more than rounding its operands does (a TF32 reference rounds those too).
            q = q * scale if mode == "prescale_q" else q
            scores = matmul_fp32(q, k.transpose(-2, -1), self._forms)
            scores = scores if mode == "prescale_q" else scores * scale
        elif mode == "baddbmm" and not torch.compiler.is_compiling():
            # Under torch.compile the matmul-then-scale form below is traced instead: Inductor
            # fuses the scale into the GEMM anyway, and its Triton baddbmm template multiplies
            # the uninitialized input by beta=0: NaN or inf left in a reused buffer (a masked
            # score's -inf) makes scores NaN (run 20's config 8: every element, on an H100).
            q3, k3 = q.reshape(b * h, s, dh), k.reshape(b * h, s, dh)
            empty = torch.empty(b * h, s, s, device=q.device, dtype=q.dtype)
            scores = torch.baddbmm(empty, q3, k3.transpose(1, 2), beta=0.0, alpha=scale)
            scores = scores.view(b, h, s, s)
        elif mode == "prescale_q":
            scores = (q * scale) @ k.transpose(-2, -1)
        else:
            scores = (q @ k.transpose(-2, -1)) * scale
        if causal:
            scores = scores.masked_fill(self._causal_future(s, q.device), float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
        return probs @ v

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = True
    ) -> torch.Tensor:
        b, s, d = x.shape
        compute_dtype = LOW_PRECISION.get(self.tunables["matmul_precision"], x.dtype)
        w = self._derived(compute_dtype)
        q, k, v = self._project_qkv(x.to(compute_dtype), w)
        flash = self.tunables["attention"] == "sdpa"
        if flash or explicit_scores_exceed(q.device, self.num_heads, s, b):
            # Right padding + causal: a valid query i only sees keys j <= i, all valid, so the
            # key mask adds nothing; padded query rows are zeroed after out_proj anyway.
            key_mask = None if causal else (None if mask is None else mask[:, None, None, :])
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, is_causal=causal)
        else:
            context = self._explicit(q, k, v, mask, causal)
        merged = context.transpose(1, 2)
        if self.tunables["head_layout"] == "contiguous":
            merged = merged.contiguous().view(b, s, d)
        else:
            merged = merged.reshape(b, s, d)
        if compute_dtype in LOW_PRECISION.values():
            # fp32 result: the residual adds it in fp32, as the reference does.
            out = linear_fp32(merged, w["o_w"], self.out_proj.bias, self._forms).to(x.dtype)
        else:
            out = F.linear(merged, w["o_w"], w["o_b"]).to(x.dtype)
        return zero_padded(out, mask, self.tunables["padding_mask"])
