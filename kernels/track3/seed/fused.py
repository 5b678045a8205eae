"""Host side of the fused Triton path: parameter packs, launch shapes, dispatch, launches."""

from __future__ import annotations

from typing import Any

import torch

from .fused_kernels import kernels_runnable, kv_kernel, layer_kernel

# The fused kernels keep [block rows x width] fp32 tiles in registers: wider models take the
# GEMM-library path.
MAX_FUSED_WIDTH = 256
MAX_FUSED_HEAD = 128
# Narrower models take the torch path too: at width 32 the fp16 operands' rounding left the
# fused path 0.0021-0.0023 from the TF32 reference at input scale 0.5, failing the gate by one
# element in 2 of 2 H200 evaluations (width 128 passed every trial); it is launch-bound
# either way. An fp16x3 split of every projection was closer to exact but further from the
# TF32 reference (0.0032) and half as fast on 10,000 x 128 (docs/results/track3-h200-progress.md).
MIN_FUSED_WIDTH = 64
# Score values per program ([heads x rows x keys]): more spills registers.
SCORE_TILE = 16384
# The fused kernels' operand type, whatever matmul_precision says (it governs the torch path):
# fp32 operands run as TF32 inside Triton and failed the gate on every config on the H200, and
# bf16 operands fail it too; fp16 with fp32 accumulation, LayerNorm, softmax and residual pass.
# Tying the two made the torch fallback (width 1024) fp16 as well, which fails the gate at input
# scale 0.5.
FUSED_OPERANDS = torch.float16


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _pad_heads(
    t: torch.Tensor, heads: int, head_pad: int, heads_pad: int, dim: int
) -> torch.Tensor:
    """Split dimension ``dim`` into [heads, head_dim], zero-pad both, and flatten it back."""
    shape = list(t.shape)
    split = t.reshape(*shape[:dim], heads, shape[dim] // heads, *shape[dim + 1 :])
    padded = split.new_zeros(*shape[:dim], heads_pad, head_pad, *shape[dim + 1 :])
    padded.narrow(dim, 0, heads).narrow(dim + 1, 0, split.shape[dim + 1]).copy_(split)
    return padded.reshape(*shape[:dim], heads_pad * head_pad, *shape[dim + 1 :])


def fused_packs(model: Any, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-layer parameter packs for the fused kernels (head dimension zero-padded to powers of
    two): fp32 vectors [L+1, 6D+3HP+F] (the last row holds the final LayerNorm) and weights
    [L, 4HP*D+2FD] in the compute dtype."""
    heads = model.layers[0].attention.num_heads
    width = model.layers[0].attention.d_model
    pads = (heads, max(16, _next_pow2(width // heads)), _next_pow2(heads))
    vecs, mats = [], []
    with torch.no_grad():
        for layer in model.layers:
            att = layer.attention
            in_proj = [att.q_proj, att.k_proj, att.v_proj]
            vecs.append(
                torch.cat(
                    [layer.norm1.weight, layer.norm1.bias]
                    + [_pad_heads(p.bias, *pads, dim=0) for p in in_proj]
                    + [att.out_proj.bias, layer.norm2.weight, layer.norm2.bias]
                    + [layer.ffn_in.bias, layer.ffn_out.bias]
                ).float()
            )
            weights = [_pad_heads(p.weight, *pads, dim=0) for p in in_proj]
            weights += [_pad_heads(att.out_proj.weight, *pads, dim=1)]
            weights += [layer.ffn_in.weight, layer.ffn_out.weight]
            mats.append(torch.cat([w.reshape(-1) for w in weights]).to(dtype))
        final = torch.cat([model.final_norm.weight, model.final_norm.bias]).float()
        vecs.append(torch.cat([final, final.new_zeros(vecs[0].numel() - final.numel())]))
    return torch.stack(vecs).contiguous(), torch.stack(mats).contiguous()


def block_rows(model: Any, x: torch.Tensor, heads_pad: int) -> int:
    """Rows per program: as many as the registers allow, fewer when that would leave SMs idle
    (dispatch on the input's size and the device's SM count, never on configuration ids)."""
    batch, seq, width = x.shape
    chosen = model.tunables["fused_rows"]
    # Score tiles [heads x rows x keys] of at most SCORE_TILE values with >= 16 keys.
    most = max(16, min(128 if width <= 128 else 32, SCORE_TILE // (16 * heads_pad)))
    if chosen != "auto":
        return min(int(chosen), most)
    rows = min(most, 64, max(16, _next_pow2(seq)))
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 1
    while rows > 16 and batch * -(-seq // rows) < sms:
        rows //= 2
    return rows


def fused_meta(model: Any, x: torch.Tensor) -> dict[str, Any]:
    """Compile-time shape of the fused kernels and their launch shape for this input."""
    batch, seq, width = x.shape
    first = model.layers[0]
    heads, ffn = first.attention.num_heads, first.ffn_in.out_features
    heads_pad, head_pad = _next_pow2(heads), max(16, _next_pow2(width // heads))
    width_pad = max(16, _next_pow2(width))
    rows = block_rows(model, x, heads_pad)
    chosen_warps = model.tunables["fused_warps"]
    # auto: 4 warps, measured faster than 8 on every config swept (H200, 2026-11-30).
    warps = 4 if chosen_warps == "auto" else int(chosen_warps)
    return {
        "shape": {"D": width, "H_PAD": heads_pad, "DH_PAD": head_pad, "D_PAD": width_pad},
        "blocks": {
            "BM": rows,
            "BN": max(16, min(64, _next_pow2(seq), SCORE_TILE // (heads_pad * rows))),
            "BF": min(64, max(16, _next_pow2(ffn))),
            "F": ffn,
        },
        "grid": (-(-seq // rows), batch),
        # 8 warps over narrow tiles made Triton 3.6 read out of bounds on the H200 (rows 64,
        # 16-wide head tiles) and were slower where they ran: keep those at 4.
        "warps": 4 if width_pad <= 64 or head_pad <= 16 else warps,
        "scale": (width // heads) ** -0.5,
        "eps": first.norm1.eps,
    }


def fused_forward(
    model: Any, packs: tuple[torch.Tensor, torch.Tensor], x: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """The whole forward as L+1 Triton launches (first K/V, then one per layer)."""
    vec, mat = packs
    meta = fused_meta(model, x)
    shape, blocks, grid, warps = meta["shape"], meta["blocks"], meta["grid"], meta["warps"]
    batch, seq, _ = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    kv_shape = (2, batch, shape["H_PAD"], 2, seq, shape["DH_PAD"])
    kv = torch.empty(kv_shape, device=x.device, dtype=mat.dtype)
    kv_kernel[grid](
        x, kv[0], vec[0], mat[0], seq, meta["eps"], BM=blocks["BM"], num_warps=warps, **shape
    )
    key_mask = x if mask is None else mask.contiguous().view(torch.uint8)
    layers = len(model.layers)
    for i in range(layers):
        layer_kernel[grid](
            x if i < 1 else out,
            out,
            key_mask,
            kv[i % 2],
            kv[(i + 1) % 2],
            vec[i],
            mat[i],
            vec[i + 1],
            mat[min(i + 1, layers - 1)],
            seq,
            meta["scale"],
            meta["eps"],
            HAS_MASK=mask is not None,
            LAST=i + 1 >= layers,
            num_warps=warps,
            **shape,
            **blocks,
        )
    return out


def fused_fits(model: Any, x: torch.Tensor) -> bool:
    """Whether the fused kernels serve this input: Triton present, CUDA (or the Triton
    interpreter on any device), causal, narrow enough for register tiles, wide enough for
    their fp16 rounding to pass the gate."""
    if not model.causal or x.dim() != 3:
        return False
    first = model.layers[0]
    width, heads = x.shape[-1], first.attention.num_heads
    narrow = MIN_FUSED_WIDTH <= width <= MAX_FUSED_WIDTH and width // heads <= MAX_FUSED_HEAD
    return (
        narrow and first.ffn_in.out_features <= 4 * MAX_FUSED_WIDTH and kernels_runnable(x.is_cuda)
    )
