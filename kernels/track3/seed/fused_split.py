"""The fused layer cut at its attention/FFN boundary (fused_boundary=separate): two launches per
pre-LN layer built from layer_kernel's helpers, the residual stream passing through memory
between them. Each kernel is compiled (registers, occupancy) for its own half of the layer, at
the price of one more launch per layer and a round trip of the [rows x width] residual; which
wins is the search's to measure."""

from __future__ import annotations

from typing import Any

from .fused_kernels import _ffn_rows, _store_kv
from .fused_ops import _attention_rows, _layer_norm

# Word for word fused_kernels' statement: ratchet export merges only identical bindings.
try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # CPU-only installs: the torch path serves every shape
    HAVE_TRITON = False

if HAVE_TRITON:

    @triton.jit
    def attention_kernel(
        src,
        dst,
        mask_ptr,
        kv_in,
        vec,
        mat,
        S,
        scale,
        eps,
        D: tl.constexpr,
        H_PAD: tl.constexpr,
        DH_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        BM: tl.constexpr,
        BN: tl.constexpr,
        HAS_MASK: tl.constexpr,
        PREC_QKV: tl.constexpr,
        PREC_ATT: tl.constexpr,
        NORM: tl.constexpr,
        LOOP: tl.constexpr,
    ):
        """x + out_proj(attention(LN1(x))) for BM rows of one sequence (padded rows keep x, as
        in layer_kernel), over the K/V the previous launch stored; packs as layer_kernel's."""
        HP: tl.constexpr = H_PAD * DH_PAD
        seq = tl.program_id(1).to(tl.int64)
        m0 = tl.program_id(0) * BM
        rows = m0 + tl.arange(0, BM)
        cols = tl.arange(0, D_PAD)
        live = (rows[:, None] < S) & (cols[None, :] < D)
        at = seq * S * D + rows[:, None] * D + cols[None, :]
        x = tl.load(src + at, mask=live, other=0.0)
        valid = tl.load(mask_ptr + seq * S + rows, mask=(rows < S) & HAS_MASK, other=1) != 0
        h = _layer_norm(x, vec, vec + D, cols, D, eps)
        kv = kv_in + seq * H_PAD * 2 * S * DH_PAD
        attn = _attention_rows(
            h,
            kv,
            mat,
            vec,
            rows,
            m0,
            S,
            scale,
            D,
            H_PAD,
            DH_PAD,
            D_PAD,
            BM,
            BN,
            PREC_QKV,
            PREC_ATT,
            NORM,
            LOOP,
        )
        b_o = tl.load(vec + 2 * D + 3 * HP + cols, mask=cols < D, other=0.0)
        x = x + tl.where(valid[:, None], attn + b_o[None, :], 0.0)
        tl.store(dst + at, x, mask=live)

    @triton.jit
    def ffn_kernel(
        src,
        dst,
        mask_ptr,
        kv_out,
        vec,
        mat,
        next_vec,
        next_mat,
        S,
        eps,
        D: tl.constexpr,
        F: tl.constexpr,
        H_PAD: tl.constexpr,
        DH_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        BM: tl.constexpr,
        BF: tl.constexpr,
        HAS_MASK: tl.constexpr,
        LAST: tl.constexpr,
        PREC_QKV: tl.constexpr,
        PREC_FFN: tl.constexpr,
        PIPE: tl.constexpr,
    ):
        """x + FFN(LN2(x)) for BM rows, padded rows zeroed, then (as layer_kernel) the next
        layer's K/V of these rows or, after the last layer, the final LayerNorm."""
        HP: tl.constexpr = H_PAD * DH_PAD
        seq = tl.program_id(1).to(tl.int64)
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.arange(0, D_PAD)
        live = (rows[:, None] < S) & (cols[None, :] < D)
        at = seq * S * D + rows[:, None] * D + cols[None, :]
        x = tl.load(src + at, mask=live, other=0.0)
        valid = tl.load(mask_ptr + seq * S + rows, mask=(rows < S) & HAS_MASK, other=1) != 0
        h = _layer_norm(x, vec + 3 * D + 3 * HP, vec + 4 * D + 3 * HP, cols, D, eps)
        ffn = _ffn_rows(h, mat, vec, D, F, HP, D_PAD, BM, BF, PREC_FFN, PIPE)
        b_2 = tl.load(vec + 5 * D + 3 * HP + F + cols, mask=cols < D, other=0.0)
        x = tl.where(valid[:, None], x + (ffn + b_2[None, :]), 0.0)
        if LAST:
            x = tl.where(valid[:, None], _layer_norm(x, next_vec, next_vec + D, cols, D, eps), 0.0)
        else:
            h = _layer_norm(x, next_vec, next_vec + D, cols, D, eps)
            nkv = kv_out + seq * H_PAD * 2 * S * DH_PAD
            _store_kv(h, next_mat, next_vec, nkv, rows, S, D, HP, DH_PAD, D_PAD, PREC_QKV, PIPE)
        tl.store(dst + at, x, mask=live)


else:  # the names exist either way; kernels_runnable() says whether they can run
    attention_kernel = ffn_kernel = None


def split_layer(meta: dict[str, Any], layer: dict[str, Any]) -> None:
    """One layer as its two launches, fused_meta's schedule and operands in both.

    ``layer`` holds layer_kernel's arguments by name. The residual goes through ``dst`` in
    place: each program reads and writes only its own rows, and attention reads other rows
    only as the K/V the previous launch stored."""
    shape, blocks, operands = meta["shape"], meta["blocks"], meta["operands"]
    both = {"S": layer["S"], "eps": meta["eps"], "HAS_MASK": layer["HAS_MASK"], **shape}
    both.update(BM=blocks["BM"], num_warps=meta["warps"], **meta["stages"])
    attention_kernel[meta["grid"]](
        layer["src"],
        layer["dst"],
        layer["mask_ptr"],
        layer["kv_in"],
        layer["vec"],
        layer["mat"],
        scale=meta["scale"],
        BN=blocks["BN"],
        PREC_QKV=operands["PREC_QKV"],
        PREC_ATT=operands["PREC_ATT"],
        NORM=meta["norm"],
        LOOP=meta["loop"],
        **both,
    )
    ffn_kernel[meta["grid"]](
        layer["dst"],
        layer["dst"],
        layer["mask_ptr"],
        layer["kv_out"],
        layer["vec"],
        layer["mat"],
        layer["next_vec"],
        layer["next_mat"],
        F=blocks["F"],
        BF=blocks["BF"],
        LAST=layer["LAST"],
        PREC_QKV=operands["PREC_QKV"],
        PREC_FFN=operands["PREC_FFN"],
        PIPE=meta["pipe"],
        **both,
    )
