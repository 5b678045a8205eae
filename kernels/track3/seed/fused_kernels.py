"""The fused Triton kernels: one launch per pre-LN layer, each program owning a block of query
rows of one sequence, LayerNorms, projections, causal online-softmax attention over all heads,
out_proj, exact-GELU FFN and residuals in registers (fused_split cuts a layer in two)."""

from __future__ import annotations

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # CPU-only installs: the torch path serves every shape
    HAVE_TRITON = False

from .fused_ops import _attention_rows, _dot, _layer_norm, _linear

if HAVE_TRITON:

    @triton.jit
    def _store_kv(
        h,
        mat,
        vec,
        kv_ptr,
        rows,
        S,
        D: tl.constexpr,
        HP: tl.constexpr,
        DH_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        PREC_QKV: tl.constexpr,
        PIPE: tl.constexpr,
    ):
        """K and V of these rows, every head at once, into kv[head, 0|1, row, :DH_PAD]. PIPE > 0
        (fused_weight_loads): one loop over the two weights, software-pipelined PIPE stages
        deep, so V's weight loads while K's GEMM runs."""
        cs = tl.arange(0, HP)
        at = kv_ptr + (cs // DH_PAD)[None, :] * 2 * S * DH_PAD + rows[:, None] * DH_PAD
        at += (cs % DH_PAD)[None, :]
        live = (rows < S)[:, None]
        if PIPE > 0:
            for j in tl.range(0, 2, num_stages=PIPE):
                w, b = mat + (1 + j) * HP * D, vec + 2 * D + (1 + j) * HP
                kv = _linear(h, w, b, HP, D, HP, D_PAD, PREC_QKV)
                tl.store(at + j * S * DH_PAD, kv.to(kv_ptr.dtype.element_ty), mask=live)
        else:
            k = _linear(h, mat + HP * D, vec + 2 * D + HP, HP, D, HP, D_PAD, PREC_QKV)
            tl.store(at, k.to(kv_ptr.dtype.element_ty), mask=live)
            v = _linear(h, mat + 2 * HP * D, vec + 2 * D + 2 * HP, HP, D, HP, D_PAD, PREC_QKV)
            tl.store(at + S * DH_PAD, v.to(kv_ptr.dtype.element_ty), mask=live)

    @triton.jit
    def kv_kernel(
        x_ptr,
        kv_ptr,
        vec,
        mat,
        S,
        eps,
        D: tl.constexpr,
        H_PAD: tl.constexpr,
        DH_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        BM: tl.constexpr,
        PREC_QKV: tl.constexpr,
        PIPE: tl.constexpr,
    ):
        """The first layer's K and V (later layers' come out of the previous layer's kernel)."""
        seq = tl.program_id(1).to(tl.int64)
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.arange(0, D_PAD)
        live = (rows[:, None] < S) & (cols[None, :] < D)
        x = tl.load(x_ptr + seq * S * D + rows[:, None] * D + cols[None, :], mask=live, other=0.0)
        h = _layer_norm(x, vec, vec + D, cols, D, eps)
        kv = kv_ptr + seq * H_PAD * 2 * S * DH_PAD
        _store_kv(h, mat, vec, kv, rows, S, D, H_PAD * DH_PAD, DH_PAD, D_PAD, PREC_QKV, PIPE)

    @triton.jit
    def _ffn_rows(
        h,
        mat,
        vec,
        D: tl.constexpr,
        F: tl.constexpr,
        HP: tl.constexpr,
        D_PAD: tl.constexpr,
        BM: tl.constexpr,
        BF: tl.constexpr,
        PREC_FFN: tl.constexpr,
        PIPE: tl.constexpr,
    ):
        """gelu(h W1^T + b1) W2^T without W2's bias, pre-GELU values in fp32; the loop over FFN
        blocks unrolled (PIPE 0) or software-pipelined PIPE stages deep (fused_weight_loads)."""
        acc = tl.zeros((BM, D_PAD), dtype=tl.float32)
        if PIPE > 0:
            for f0 in tl.range(0, F, BF, num_stages=PIPE):
                acc += _ffn_block(h, mat, vec, f0, D, F, HP, D_PAD, BF, PREC_FFN)
        else:
            for f0 in tl.static_range(0, F, BF):
                acc += _ffn_block(h, mat, vec, f0, D, F, HP, D_PAD, BF, PREC_FFN)
        return acc

    @triton.jit
    def _ffn_block(
        h,
        mat,
        vec,
        f0,
        D: tl.constexpr,
        F: tl.constexpr,
        HP: tl.constexpr,
        D_PAD: tl.constexpr,
        BF: tl.constexpr,
        PREC_FFN: tl.constexpr,
    ):
        """FFN columns f0..f0+BF: gelu(h W1[f]^T + b1[f]) W2[:, f]^T."""
        ks = tl.arange(0, D_PAD)
        w1 = mat + 4 * HP * D
        w2 = w1 + F * D
        fs = f0 + tl.arange(0, BF)
        live = (ks[:, None] < D) & (fs[None, :] < F)
        wt = tl.load(w1 + fs[None, :] * D + ks[:, None], mask=live, other=0.0)
        bias = tl.load(vec + 5 * D + 3 * HP + fs, mask=fs < F, other=0.0)
        t = _dot(h, wt, PREC_FFN) + bias[None, :]
        t = 0.5 * t * (1.0 + tl.math.erf(t * 0.7071067811865476))
        live2 = (fs[:, None] < F) & (ks[None, :] < D)
        w2t = tl.load(w2 + ks[None, :] * F + fs[:, None], mask=live2, other=0.0)
        return _dot(t, w2t, PREC_FFN)

    @triton.jit
    def layer_kernel(
        src,
        dst,
        mask_ptr,
        kv_in,
        kv_out,
        vec,
        mat,
        next_vec,
        next_mat,
        S,
        scale,
        eps,
        D: tl.constexpr,
        F: tl.constexpr,
        H_PAD: tl.constexpr,
        DH_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BF: tl.constexpr,
        HAS_MASK: tl.constexpr,
        LAST: tl.constexpr,
        PREC_QKV: tl.constexpr,
        PREC_ATT: tl.constexpr,
        PREC_FFN: tl.constexpr,
        PIPE: tl.constexpr,
        NORM: tl.constexpr,
        LOOP: tl.constexpr,
    ):
        """One pre-LN block for BM rows of one sequence, then either the next layer's K/V of
        these rows or (after the last layer) the final LayerNorm.

        ``vec`` is the layer's fp32 pack [ln1 w, ln1 b, b_q, b_k, b_v, b_o, ln2 w, ln2 b, b1, b2]
        and ``mat`` its weights [W_q, W_k, W_v, W_o, W1, W2] in the compute dtype, the head
        dimension padded to [H_PAD x DH_PAD] with zeros."""
        HP: tl.constexpr = H_PAD * DH_PAD
        seq = tl.program_id(1).to(tl.int64)
        m0 = tl.program_id(0) * BM
        rows = m0 + tl.arange(0, BM)
        cols = tl.arange(0, D_PAD)
        live = (rows[:, None] < S) & (cols[None, :] < D)
        at = seq * S * D + rows[:, None] * D + cols[None, :]
        x = tl.load(src + at, mask=live, other=0.0)
        # Without a mask every row is valid: the load is masked off and yields the 1s.
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
    kv_kernel = layer_kernel = None
    _store_kv = _ffn_rows = _ffn_block = None  # fused_split's


def kernels_runnable(on_cuda: bool) -> bool:
    """Whether the kernels can run: Triton present, and a CUDA input or Triton's interpreter
    (which runs them on any device)."""
    if not HAVE_TRITON:
        return False
    return on_cuda or not isinstance(layer_kernel, triton.runtime.JITFunction)
