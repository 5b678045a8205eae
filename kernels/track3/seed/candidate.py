"""Track3 candidate: the reference arithmetic behind declared, composable tunables.

A drop-in for the organizer's ``UserOptimizedTransformer`` (same constructor and parameter
names, strict ``load_state_dict``, ``forward(x, valid_token_mask=None)``), importing only torch
(and triton where installed). Sibling modules hold the parts by concern (attention, blocks, the
fused Triton kernels and their host side, CUDA graphs, chunking); ``ratchet export`` bundles
them. The search edits the ``TUNABLES`` block or the code; the defaults are the reference.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .block import TransformerBlock
from .capture import GraphCache
from .chunking import run_chunked, sequences_per_chunk
from .common import DerivedCache, SettingsRead, weight_key, zero_padded
from .fused import fused_fits, fused_packs, pack_dtype, try_fused_forward
from .regimes import checked, select_regime

# Every choice the offline expander may make: values[0] is the reference behaviour.
# 'requires': what a tunable needs elsewhere before it changes any code (the operator sets it).
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
        "doc": "torch path GEMM operands in fp32, fp16 or bf16; fp32 accumulation, LayerNorm, "
        "softmax, residual and results fp32 work reads (the fused kernels fix their own)",
    },
    "gelu": {
        "values": ["erf", "tanh"],
        "doc": "exact erf GELU, or the tanh approximation",
    },
    "fused_kernel": {
        "values": ["none", "triton"],
        "doc": "torch operators per layer, or (CUDA, narrow models) fused Triton kernels per "
        "layer as fused_boundary cuts it: LayerNorms, projections, causal attention, out_proj, "
        "exact-GELU FFN and residuals in registers, the next layer's K/V written by the layer's "
        "kernel, operands as fused_*_operands say; shapes the kernels do not serve keep torch",
    },
    "fused_boundary": {
        "requires": {"fused_kernel": "triton"},
        "values": ["layer", "separate"],
        "doc": "one fused kernel per layer, or two (the attention half, then the FFN half and "
        "the next K/V), the residual through memory: fewer live registers, one more launch",
    },
    "fused_min_width": {
        "requires": {"fused_kernel": "triton"},
        "values": ["16", "32", "64", "128"],
        "doc": "narrowest model the fused kernels serve (16: every width their tiles allow); "
        "narrower ones take the torch path",
    },
    "fused_projection_operands": {
        "requires": {"fused_kernel": "triton"},
        "values": ["fp16", "fp32_ieee", "tf32x3"],
        "doc": "operands of the fused kernels' Q/K/V and out_proj GEMMs: fp16 with fp32 "
        "accumulation, fp32 with IEEE products (exact, slower), or fp32 as three TF32 "
        "products on the tensor cores (near-fp32 error)",
    },
    "fused_attention_operands": {
        "requires": {"fused_kernel": "triton"},
        "values": ["fp16", "fp32_ieee", "tf32x3"],
        "doc": "operands of the fused attention's QK^T and PV products (and the stored K/V): "
        "fp16, fp32 with IEEE products, or fp32 as three TF32 products",
    },
    "fused_ffn_operands": {
        "requires": {"fused_kernel": "triton"},
        "values": ["fp16", "fp32_ieee", "tf32x3"],
        "doc": "operands of the fused FFN's two GEMMs: fp16, fp32 with IEEE products, or fp32 "
        "as three TF32 products",
    },
    "fused_rows": {
        "requires": {"fused_kernel": "triton"},
        "values": ["auto", "16", "32", "64", "128"],
        "doc": "query rows per program of the fused kernels: auto picks the most the registers "
        "allow, fewer when SMs would idle or a normalized softmax could then take one pass",
    },
    "fused_warps": {
        "requires": {"fused_kernel": "triton"},
        "values": ["auto", "4", "8"],
        "doc": "warps per program of the fused kernels (auto: 4)",
    },
    "fused_keys": {
        "requires": {"fused_kernel": "triton"},
        "values": ["auto", "16", "32", "64", "128"],
        "doc": "keys per block of the fused attention's loop (auto: up to 64, fewer when the "
        "score tile would spill; a normalized softmax's every key when they fit: one pass)",
    },
    "fused_ffn_block": {
        "requires": {"fused_kernel": "triton"},
        "values": ["auto", "16", "32", "64", "128"],
        "doc": "FFN columns per block of the fused FFN loop (auto: up to 64)",
    },
    "fused_stages": {
        "requires": {"fused_kernel": "triton"},
        "values": ["auto", "1", "2", "3", "4"],
        "doc": "software-pipelining stages of the fused kernels' loops (auto: Triton's default)",
    },
    "fused_softmax": {
        "requires": {"fused_kernel": "triton"},
        "values": ["online", "normalized"],
        "doc": "fused attention's softmax: one pass, normalized after the PV product, or each "
        "row's max and sum first, then probabilities normalized before PV (QK^T twice)",
    },
    "fused_heads": {
        "requires": {"fused_kernel": "triton"},
        "values": ["batched", "looped"],
        "doc": "fused attention's heads: all in one [heads x rows x keys] score tile, or one "
        "after another in [rows x keys] tiles (fewer live registers, more steps)",
    },
    "fused_weight_loads": {
        "requires": {"fused_kernel": "triton"},
        "values": ["in_order", "pipelined_2", "pipelined_3"],
        "doc": "fused FFN and K/V weights: each loaded just before its GEMM, or loops "
        "pipelined 2 or 3 deep that load the next weights while this GEMM runs",
    },
    "batch_chunk": {
        "values": ["none", "auto", "1"],
        "doc": "run the batch whole, or in groups of sequences whose activations fit half the "
        "free device memory (auto, CUDA; what a 100k-token config needs), or one at a time",
    },
    "whole_model_compile": {
        "values": ["none", "default", "max-autotune-no-cudagraphs"],
        "doc": "torch.compile the unfused forward (CUDA only; reuses the shared Inductor cache)",
    },
    "graph_capture": {
        "values": ["none", "cuda_graph"],
        "doc": "launch every kernel from Python, or replay a CUDA graph per shape (CUDA only)",
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
    "fused_kernel": "none",
    "fused_boundary": "layer",
    "fused_rows": "auto",
    "fused_warps": "auto",
    "fused_keys": "auto",
    "fused_ffn_block": "auto",
    "fused_stages": "auto",
    "fused_min_width": "16",
    "fused_projection_operands": "fp16",
    "fused_attention_operands": "fp16",
    "fused_ffn_operands": "fp16",
    "fused_weight_loads": "in_order",
    "fused_softmax": "online",
    "fused_heads": "batched",
    "batch_chunk": "none",
    "whole_model_compile": "none",
    "graph_capture": "none",
}
# --- end ratchet:tunables ---

# --- ratchet:dispatch (the composition step rewrites this block) ---
REGIMES: dict[str, dict[str, str]] = {}


def choose_regime(sizes):
    """The REGIMES entry that serves inputs of these sizes (None: TUNABLES)."""
    return None


# --- end ratchet:dispatch ---


class OptimizedTransformer(nn.Module):
    """Drop-in for the reference ``Transformer(config)`` with tunable internals."""

    def __init__(self, config: object, tunables: dict[str, str] | None = None) -> None:
        super().__init__()
        chosen = checked({**TUNABLES, **(tunables or {})}, TUNABLE_SPACE, "TUNABLES")
        # Regimes override the defaults in place: every module reads this one dict.
        self._regimes = {
            name: checked({**chosen, **values}, TUNABLE_SPACE, f"REGIMES[{name!r}]")
            for name, values in REGIMES.items()
        }
        self._defaults = dict(chosen)
        self._regime: str | None = None
        self._regime_for: dict[tuple[object, ...], str | None] = {}
        self.tunables = SettingsRead(chosen)  # every module reads this one object
        self.causal = bool(getattr(config, "causal", True))
        d_model, heads = config.d_model, config.num_heads  # type: ignore[attr-defined]
        ffn_dim, num_layers = config.ffn_dim, config.num_layers  # type: ignore[attr-defined]
        self.d_model, self.num_heads, self.ffn_dim = d_model, heads, ffn_dim
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, heads, ffn_dim, self.tunables) for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model, eps=1e-5)
        self._graphs = GraphCache()
        self._fused = DerivedCache()
        self.fused_refused: set[tuple[object, ...]] = set()  # (sizes, regime) Triton refused
        self.fused_key_caps: dict[tuple[object, ...], int] = {}  # auto key blocks it took
        self._compiled: Any = None

    def _packs(self) -> tuple[torch.Tensor, torch.Tensor]:
        params = list(self.parameters())
        dtype = pack_dtype(self.tunables)
        key = (*weight_key(*params), dtype)
        return self._fused.get(key, lambda: fused_packs(self, dtype))

    def _forget_derived(self) -> None:
        """Drop captured graphs, compiled code and every derived-weight cache: after new
        weights they are stale (inference tensors carry no version that would show it)."""
        self._graphs.clear()
        self._compiled = None
        for module in self.modules():
            for cache in (getattr(module, "_weights", None), getattr(module, "_fused", None)):
                if isinstance(cache, DerivedCache):
                    cache.key = None

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        result = super().load_state_dict(*args, **kwargs)
        self._forget_derived()
        return result

    def _apply(self, *args: Any, **kwargs: Any) -> Any:
        result = super()._apply(*args, **kwargs)  # .to() / .half() move what graphs point at
        self._forget_derived()
        return result

    def _eager(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if self.tunables["fused_kernel"] == "triton" and fused_fits(self, x):
            fused = try_fused_forward(self, self._packs, x, mask)
            if fused is not None:
                return fused
        mode = self.tunables["whole_model_compile"]
        if mode != "none" and x.is_cuda:
            self.tunables.mark_unknown()  # the trace reads tunables out of the recorder's sight
            if self._compiled is None:
                self._compiled = torch.compile(self._layers, mode=mode, dynamic=False)
            return self._compiled(x, mask)
        return self._layers(x, mask)

    def _layers(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, self.causal)
        x = self.final_norm(x)
        return zero_padded(x, mask, self.tunables["padding_mask"])

    def _graphed(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        key = (tuple(x.shape), x.dtype, x.device, mask is None, self._regime)
        return self._graphs.replay(key, self._eager, x, mask)

    def forward(
        self, x: torch.Tensor, valid_token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        if not torch.is_grad_enabled():
            captured = self._graphs.served(x, valid_token_mask)
            if captured is not None:  # this input's sizes chose a graph before: replay it
                return captured.run(x, valid_token_mask)
        select_regime(self, x, choose_regime)
        chunk = sequences_per_chunk(self, x)
        if chunk is not None:  # memory-bounded: whole model per group of sequences, no graph
            return run_chunked(self._eager, x, valid_token_mask, chunk)
        graphed = self.tunables["graph_capture"] == "cuda_graph"
        if graphed and x.is_cuda and not torch.is_grad_enabled():
            return self._graphed(x, valid_token_mask)
        return self._eager(x, valid_token_mask)


UserOptimizedTransformer = OptimizedTransformer
