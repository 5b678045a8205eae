"""Host side of the fused Triton path: parameter packs, launch shapes, dispatch, launches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .common import SettingsRead
from .fused_kernels import kernels_runnable, kv_kernel, layer_kernel
from .fused_split import split_layer

try:
    from triton.runtime.errors import OutOfResources

    # A schedule whose tiles need more shared memory or registers than the device has is
    # refused at its first launch, before anything is enqueued.
    LAUNCH_REFUSALS: tuple[type[BaseException], ...] = (OutOfResources,)
except ImportError:  # CPU-only installs never launch Triton
    LAUNCH_REFUSALS = ()

# The fused kernels keep [block rows x width] fp32 tiles in registers: wider models take the
# GEMM-library path. Below 16 columns Triton's dot has no tile.
MAX_FUSED_WIDTH = 256
MAX_FUSED_HEAD = 128
MIN_TILE = 16
# Score values per program ([heads x rows x keys]): more spills registers.
SCORE_TILE = 16384
# Each GEMM group's operands: fp16 with fp32 accumulation, fp32 with IEEE products, or fp32
# split into three TF32 products (fp32 operands would otherwise run as plain TF32 inside
# Triton, reported to err more than fp16 at the same mantissa width, as if truncated; a
# truncating TF32 errs about twice the tolerance against a reference that rounds to nearest,
# by benchmarks/precision_emulation.py). LayerNorm, softmax, GELU and the residual stay fp32
# either way; matmul_precision governs only the torch path.
OPERAND_TUNABLES = {
    "PREC_QKV": "fused_projection_operands",
    "PREC_ATT": "fused_attention_operands",
    "PREC_FFN": "fused_ffn_operands",
}
# A tunable's value -> the kernels' PREC code (fused_kernels._dot).
OPERAND_MODES = {"fp16": 0, "fp32_ieee": 1, "tf32x3": 2}
# fused_weight_loads -> the kernels' PIPE: 0 unrolled, else the software-pipelining depth of the
# loops over the FFN blocks' and K/V's weights.
WEIGHT_LOADS = {"in_order": 0, "pipelined_2": 2, "pipelined_3": 3}
# fused_softmax -> the kernels' NORM: 0 online (one pass), 1 normalized before the PV product.
SOFTMAX = {"online": 0, "normalized": 1}
# fused_heads -> the kernels' LOOP: 0 every head in one [heads x rows x keys] tile, 1 one head
# after another in [rows x keys] tiles.
HEAD_TILES = {"batched": 0, "looped": 1}


def operand_modes(tunables: SettingsRead | dict[str, str]) -> dict[str, int]:
    """The PREC code of each GEMM group of the fused kernels."""
    return {flag: OPERAND_MODES[tunables[name]] for flag, name in OPERAND_TUNABLES.items()}


def pack_dtype(tunables: SettingsRead | dict[str, str]) -> torch.dtype:
    """Weights are packed fp32 when a weight GEMM takes fp32 operands, else fp16."""
    modes = operand_modes(tunables)
    return torch.float32 if modes["PREC_QKV"] or modes["PREC_FFN"] else torch.float16


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


def _chosen(tunable: str, automatic: int, most: int) -> int:
    """A block-size tunable ('auto' or a power of two), never beyond what the shape allows."""
    return automatic if tunable == "auto" else max(MIN_TILE, min(int(tunable), most))


def block_rows(model: Any, x: torch.Tensor, tile_heads: int) -> int:
    """Rows per program: as many as the registers allow, fewer when that would leave SMs idle
    (dispatch on the input's size and the device's SM count, never on configuration ids)."""
    batch, seq, width = x.shape
    chosen = model.tunables["fused_rows"]
    # Score tiles [heads x rows x keys] of at most SCORE_TILE values with >= 16 keys.
    most = max(16, min(128 if width <= 128 else 32, SCORE_TILE // (16 * tile_heads)))
    if chosen != "auto":
        return min(int(chosen), most)
    rows = min(most, 64, max(16, _next_pow2(seq)))
    # The normalized softmax computes QK^T twice unless one key block holds a row block's
    # whole causal range: auto then keeps rows few enough for such a block to fit.
    covering = SCORE_TILE // (tile_heads * _next_pow2(seq))
    if model.tunables["fused_softmax"] == "normalized" and covering >= MIN_TILE:
        rows = min(rows, covering)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 1
    while rows > 16 and batch * -(-seq // rows) < sms:
        rows //= 2
    return rows


def fused_meta(model: Any, x: torch.Tensor, keys_cap: int | None = None) -> dict[str, Any]:
    """Compile-time shape of the fused kernels and their launch shape for this input (an
    auto key block at most keys_cap: what a device that refused a larger one takes)."""
    batch, seq, width = x.shape
    first = model.layers[0]
    heads, ffn = first.attention.num_heads, first.ffn_in.out_features
    heads_pad, head_pad = _next_pow2(heads), max(16, _next_pow2(width // heads))
    width_pad = max(16, _next_pow2(width))
    tunables = model.tunables
    # A score tile holds every head's scores, or (looped heads) one head's.
    tile_heads = 1 if tunables["fused_heads"] == "looped" else heads_pad
    rows = block_rows(model, x, tile_heads)
    # auto: Triton's defaults (4 warps; the launcher's stages).
    warps = 4 if tunables["fused_warps"] == "auto" else int(tunables["fused_warps"])
    keys_most = max(MIN_TILE, min(_next_pow2(seq), SCORE_TILE // (tile_heads * rows)))
    keys_auto = min(64, keys_most)
    if tunables["fused_softmax"] == "normalized" and keys_most >= _next_pow2(seq):
        keys_auto = keys_most  # every key in one block: the normalized softmax in one pass
    keys_auto = keys_auto if keys_cap is None else min(keys_auto, keys_cap)
    ffn_most = max(MIN_TILE, _next_pow2(ffn))
    return {
        "shape": {"D": width, "H_PAD": heads_pad, "DH_PAD": head_pad, "D_PAD": width_pad},
        "blocks": {
            "BM": rows,
            "BN": _chosen(tunables["fused_keys"], keys_auto, keys_most),
            "BF": _chosen(tunables["fused_ffn_block"], min(64, ffn_most), ffn_most),
            "F": ffn,
        },
        "grid": (-(-seq // rows), batch),
        # 8 warps over narrow tiles made Triton 3.6 read out of bounds on the H200 (rows 64,
        # 16-wide head tiles): a launch that cannot work keeps 4 warps.
        "warps": 4 if width_pad <= 64 or head_pad <= 16 else warps,
        "stages": {}
        if tunables["fused_stages"] == "auto"
        else {"num_stages": int(tunables["fused_stages"])},
        "operands": operand_modes(tunables),
        "pipe": WEIGHT_LOADS[tunables["fused_weight_loads"]],
        "norm": SOFTMAX[tunables["fused_softmax"]],
        "loop": HEAD_TILES[tunables["fused_heads"]],
        "scale": (width // heads) ** -0.5,
        "eps": first.norm1.eps,
    }


def _layer_args(
    packs: tuple[torch.Tensor, torch.Tensor],
    i: int,
    src: torch.Tensor,
    dst: torch.Tensor,
    kv: torch.Tensor,
    key_mask: torch.Tensor,
    has_mask: bool,
) -> dict[str, Any]:
    """Layer i's tensors and flags, named as layer_kernel's parameters: K/V alternate between
    two buffers (read this layer's, write the next one's)."""
    vec, mat = packs
    layers = mat.shape[0]
    return {
        "src": src,
        "dst": dst,
        "mask_ptr": key_mask,
        "kv_in": kv[i % 2],
        "kv_out": kv[(i + 1) % 2],
        "vec": vec[i],
        "mat": mat[i],
        "next_vec": vec[i + 1],
        "next_mat": mat[min(i + 1, layers - 1)],
        "S": src.shape[1],
        "HAS_MASK": has_mask,
        "LAST": i + 1 >= layers,
    }


def fused_forward(
    model: Any,
    packs: tuple[torch.Tensor, torch.Tensor],
    x: torch.Tensor,
    mask: torch.Tensor | None,
    keys_cap: int | None = None,
) -> torch.Tensor:
    """The whole forward as L+1 Triton launches (first K/V, then one per layer), or 2L+1 with
    fused_boundary=separate (two per layer)."""
    vec, mat = packs
    meta = fused_meta(model, x, keys_cap)
    shape, blocks, grid, warps = meta["shape"], meta["blocks"], meta["grid"], meta["warps"]
    launch, operands = {"num_warps": warps, **meta["stages"]}, meta["operands"]
    batch, seq, _ = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    kv_shape = (2, batch, shape["H_PAD"], 2, seq, shape["DH_PAD"])
    kv_dtype = torch.float32 if operands["PREC_ATT"] else torch.float16
    kv = torch.empty(kv_shape, device=x.device, dtype=kv_dtype)
    kv_kernel[grid](
        x,
        kv[0],
        vec[0],
        mat[0],
        seq,
        meta["eps"],
        BM=blocks["BM"],
        PREC_QKV=operands["PREC_QKV"],
        PIPE=meta["pipe"],
        **launch,
        **shape,
    )
    key_mask = x if mask is None else mask.contiguous().view(torch.uint8)
    split = model.tunables["fused_boundary"] == "separate"
    for i in range(len(model.layers)):
        args = _layer_args(packs, i, x if i < 1 else out, out, kv, key_mask, mask is not None)
        if split:
            split_layer(meta, args)
            continue
        layer_kernel[grid](
            **args,
            scale=meta["scale"],
            eps=meta["eps"],
            PIPE=meta["pipe"],
            NORM=meta["norm"],
            LOOP=meta["loop"],
            **operands,
            **launch,
            **shape,
            **blocks,
        )
    return out


def try_fused_forward(
    model: Any,
    packs: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    x: torch.Tensor,
    mask: torch.Tensor | None,
) -> torch.Tensor | None:
    """fused_forward, or None (the caller takes the torch path, and these sizes under this
    regime are not tried again) when the device refuses the launch (tiles beyond its shared
    memory). A refused auto key block is halved until one launches, kept for these sizes: auto
    bounds registers, not shared memory (an H100 refused 1,024 keys in one block)."""
    refused: set[tuple[object, ...]] = model.fused_refused
    key = (tuple(x.shape), mask is None, model._regime)
    if key in refused:
        return None
    caps: dict[tuple[object, ...], int] = model.fused_key_caps
    while True:
        try:
            return fused_forward(model, packs(), x, mask, caps.get(key))
        except LAUNCH_REFUSALS:
            keys = fused_meta(model, x, caps.get(key))["blocks"]["BN"]
            if model.tunables["fused_keys"] != "auto" or keys <= MIN_TILE:
                refused.add(key)
                return None
            caps[key] = keys // 2


def fused_fits(model: Any, x: torch.Tensor) -> bool:
    """Whether the fused kernels serve this input: Triton present, CUDA (or the Triton
    interpreter on any device), causal, narrow enough for register tiles, and at least as wide
    as both the smallest tile and the fused_min_width tunable (narrower inputs fall back to the
    torch path)."""
    if not model.causal or x.dim() != 3:
        return False
    first = model.layers[0]
    width, heads = x.shape[-1], first.attention.num_heads
    least = max(MIN_TILE, int(model.tunables["fused_min_width"]))
    narrow = least <= width <= MAX_FUSED_WIDTH and width // heads <= MAX_FUSED_HEAD
    return (
        narrow and first.ffn_in.out_features <= 4 * MAX_FUSED_WIDTH and kernels_runnable(x.is_cuda)
    )
