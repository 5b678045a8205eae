"""Track3 candidate: the reference arithmetic behind declared, composable tunables.

A drop-in for the organizer's ``UserOptimizedTransformer``: same constructor, same parameter
names (strict ``load_state_dict`` of the reference weights works), ``forward(x,
valid_token_mask=None)``. It imports nothing but torch, so it runs standalone.

The search edits only the ``TUNABLES`` block (offline expander) or the code itself (LLM
expanders). With the default tunables the forward pass is the reference, bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# Every choice the offline expander may make: values[0] is the reference behaviour.
TUNABLE_SPACE = {
    "qkv_projection": {
        "values": ["separate", "packed"],
        "doc": "three Q/K/V projection GEMMs, or one GEMM over packed QKV weights",
    },
    "head_layout": {
        "values": ["contiguous", "strided"],
        "doc": "copy heads to contiguous memory like the reference, or keep strided views",
    },
    "attention": {
        "values": ["explicit", "sdpa"],
        "doc": "explicit scores and fp32 softmax, or fused scaled_dot_product_attention "
        "(causal flash; right-padding mask elided because valid tokens form a prefix)",
    },
    "causal_mask": {
        "values": ["rebuild", "cached"],
        "doc": "build the causal mask every forward, or cache it per sequence length and device",
    },
    "score_scale": {
        "values": ["after_matmul", "baddbmm", "prescale_q"],
        "doc": "scale scores after the QK^T matmul, fold the scale into the GEMM, or scale q",
    },
    "padding_mask": {
        "values": ["masked_fill", "multiply", "skip_if_full"],
        "doc": "zero padded rows with masked_fill, multiply by the mask, or skip the "
        "masking when every token is valid",
    },
    "matmul_precision": {
        "values": ["fp32", "fp16", "bf16"],
        "doc": "precision islands: GEMM and attention operands in fp32, fp16 or bf16 with "
        "fp32 LayerNorm, softmax and residual",
    },
    "gelu": {
        "values": ["erf", "tanh"],
        "doc": "exact erf GELU, or the tanh approximation",
    },
    "graph_capture": {
        "values": ["none", "cuda_graph"],
        "doc": "launch every kernel from Python, or capture the whole forward in a CUDA graph "
        "per input shape and replay it (CUDA only; removes the per-launch host overhead)",
    },
}

# --- ratchet:tunables (the offline expander rewrites this block) ---
TUNABLES = {
    "qkv_projection": "separate",
    "head_layout": "contiguous",
    "attention": "explicit",
    "causal_mask": "rebuild",
    "score_scale": "after_matmul",
    "padding_mask": "masked_fill",
    "matmul_precision": "fp32",
    "gelu": "erf",
    "graph_capture": "none",
}
# --- end ratchet:tunables ---

_LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _zero_padded(x: torch.Tensor, mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """Zero the rows of padded positions (the reference's masked_fill, or an equivalent)."""
    if mask is None:
        return x
    if mode == "multiply":
        return x * mask[..., None].to(x.dtype)
    capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
    if mode == "skip_if_full" and not capturing and bool(mask.all()):
        return x
    return x.masked_fill(~mask[..., None], 0)


class _Cache:
    """Derived tensors (packed or low-precision weights, masks) rebuilt when weights change."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.value: dict[str, torch.Tensor] = {}

    def get(self, key: tuple[object, ...], build: object) -> dict[str, torch.Tensor]:
        if key != self.key:
            self.value = build()  # type: ignore[operator]
            self.key = key
        return self.value


def _weight_key(*tensors: torch.Tensor) -> tuple[object, ...]:
    return tuple((t.data_ptr(), t._version, t.dtype, str(t.device)) for t in tensors)


class MultiHeadAttention(nn.Module):
    """Attention with the reference's parameter names and tunable internals."""

    def __init__(self, d_model: int, num_heads: int, tunables: dict[str, str]) -> None:
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.tunables = tunables
        self.q_proj = nn.Linear(d_model, d_model, bias=True)
        self.k_proj = nn.Linear(d_model, d_model, bias=True)
        self.v_proj = nn.Linear(d_model, d_model, bias=True)
        self.out_proj = nn.Linear(d_model, d_model, bias=True)
        self._weights = _Cache()
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

        return self._weights.get((*_weight_key(*params), compute_dtype, packed), build)

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
        if mode == "baddbmm":
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
        compute_dtype = _LOW_PRECISION.get(self.tunables["matmul_precision"], x.dtype)
        w = self._derived(compute_dtype)
        q, k, v = self._project_qkv(x.to(compute_dtype), w)
        if self.tunables["attention"] == "sdpa":
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
        out = F.linear(merged, w["o_w"], w["o_b"]).to(x.dtype)
        return _zero_padded(out, mask, self.tunables["padding_mask"])


class TransformerBlock(nn.Module):
    """Pre-LN block with fp32 LayerNorm and residual around the tunable islands."""

    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, tunables: dict[str, str]):
        super().__init__()
        self.tunables = tunables
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attention = MultiHeadAttention(d_model, num_heads, tunables)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.ffn_in = nn.Linear(d_model, ffn_dim)
        self.ffn_out = nn.Linear(ffn_dim, d_model)
        self._weights = _Cache()

    def _ffn_weights(self, compute_dtype: torch.dtype) -> dict[str, torch.Tensor]:
        params = (self.ffn_in.weight, self.ffn_in.bias, self.ffn_out.weight, self.ffn_out.bias)
        if compute_dtype == self.ffn_in.weight.dtype:
            return dict(zip(("in_w", "in_b", "out_w", "out_b"), params, strict=True))

        def build() -> dict[str, torch.Tensor]:
            with torch.no_grad():
                return {
                    "in_w": self.ffn_in.weight.to(compute_dtype),
                    "in_b": self.ffn_in.bias.to(compute_dtype),
                    "out_w": self.ffn_out.weight.to(compute_dtype),
                    "out_b": self.ffn_out.bias.to(compute_dtype),
                }

        return self._weights.get((*_weight_key(*params), compute_dtype), build)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = True
    ) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), mask, causal)
        compute_dtype = _LOW_PRECISION.get(self.tunables["matmul_precision"], x.dtype)
        w = self._ffn_weights(compute_dtype)
        approximate = "tanh" if self.tunables["gelu"] == "tanh" else "none"
        # Pre-GELU accumulation stays fp32: GELU reads the fp32 GEMM result.
        hidden = F.linear(self.norm2(x).to(compute_dtype), w["in_w"], w["in_b"]).float()
        hidden = F.gelu(hidden, approximate=approximate).to(compute_dtype)
        x = x + F.linear(hidden, w["out_w"], w["out_b"]).to(x.dtype)
        return _zero_padded(x, mask, self.tunables["padding_mask"])


class _Captured:
    """A captured forward: the graph and the static tensors it reads and writes."""

    def __init__(
        self,
        graph: torch.cuda.CUDAGraph,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        out: torch.Tensor,
    ) -> None:
        self.graph, self.x, self.mask, self.out = graph, x, mask, out


class OptimizedTransformer(nn.Module):
    """Drop-in for the reference ``Transformer(config)`` with tunable internals."""

    def __init__(self, config: object, tunables: dict[str, str] | None = None) -> None:
        super().__init__()
        chosen = dict(TUNABLES)
        chosen.update(tunables or {})
        for name, value in chosen.items():
            if name not in TUNABLE_SPACE:
                raise ValueError(f"unknown tunable {name!r}; known: {sorted(TUNABLE_SPACE)}")
            allowed = TUNABLE_SPACE[name]["values"]
            if value not in allowed:
                raise ValueError(f"tunable {name}={value!r} is not one of {allowed}")
        self.tunables = chosen
        self.causal = bool(getattr(config, "causal", True))
        d_model, heads = config.d_model, config.num_heads  # type: ignore[attr-defined]
        ffn_dim, num_layers = config.ffn_dim, config.num_layers  # type: ignore[attr-defined]
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, heads, ffn_dim, chosen) for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model, eps=1e-5)
        self._graphs: dict[tuple[object, ...], _Captured] = {}

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        self._graphs.clear()  # captured graphs hold derived weights of the old state
        return super().load_state_dict(*args, **kwargs)

    def _apply(self, *args: Any, **kwargs: Any) -> Any:
        self._graphs.clear()  # .to() / .half() move the tensors a graph points at
        return super()._apply(*args, **kwargs)

    def _eager(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, self.causal)
        x = self.final_norm(x)
        return _zero_padded(x, mask, self.tunables["padding_mask"])

    def _graphed(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        key = (tuple(x.shape), x.dtype, x.device, mask is None)
        if key not in self._graphs:
            static_x = x.clone()
            static_mask = None if mask is None else mask.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):  # warm up caches and kernels outside the capture
                    self._eager(static_x, static_mask)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = self._eager(static_x, static_mask)
            self._graphs[key] = _Captured(graph, static_x, static_mask, static_out)
        captured = self._graphs[key]
        captured.x.copy_(x)
        if mask is not None and captured.mask is not None:
            captured.mask.copy_(mask)
        captured.graph.replay()
        return captured.out.clone()  # never hand out the graph's own buffer

    def forward(
        self, x: torch.Tensor, valid_token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        graphed = self.tunables["graph_capture"] == "cuda_graph"
        if graphed and x.is_cuda and not torch.is_grad_enabled():
            return self._graphed(x, valid_token_mask)
        return self._eager(x, valid_token_mask)


UserOptimizedTransformer = OptimizedTransformer
