"""The fused kernels' building blocks: dots in each operand mode, LayerNorm, linear layers, and
causal attention of a block of query rows over stored K/V (online or normalized softmax)."""

from __future__ import annotations

# Word for word fused_kernels' statement: ratchet export merges only identical bindings.
try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # CPU-only installs: the torch path serves every shape
    HAVE_TRITON = False

if HAVE_TRITON:

    @triton.jit
    def _dot(a, b, PREC: tl.constexpr):
        """a @ b with fp32 accumulation. PREC (fused.OPERAND_MODES): 0 fp16 operands; 1 fp32
        operands with IEEE products (Triton would otherwise round fp32 operands to TF32);
        2 fp32 operands as three TF32 products (hi*hi + hi*lo + lo*hi: near-fp32 error on
        the tensor cores)."""
        if PREC == 1:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        if PREC == 2:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="tf32x3")
        return tl.dot(a.to(tl.float16), b.to(tl.float16))

    @triton.jit
    def _layer_norm(x, w_ptr, b_ptr, cols, D: tl.constexpr, eps):
        """Row LayerNorm of an fp32 tile whose columns >= D are zero."""
        live = cols < D
        mean = tl.sum(x, axis=1) / D
        centred = tl.where(live[None, :], x - mean[:, None], 0.0)
        var = tl.sum(centred * centred, axis=1) / D
        w = tl.load(w_ptr + cols, mask=live, other=0.0)
        b = tl.load(b_ptr + cols, mask=live, other=0.0)
        return centred * (1.0 / tl.sqrt(var + eps))[:, None] * w[None, :] + b[None, :]

    @triton.jit
    def _linear(
        h,
        w_ptr,
        b_ptr,
        N: tl.constexpr,
        K: tl.constexpr,
        N_PAD: tl.constexpr,
        K_PAD: tl.constexpr,
        PREC: tl.constexpr,
    ):
        """h @ W^T + b in fp32 for a row-major W [N, K]; columns >= N are exactly 0."""
        ks = tl.arange(0, K_PAD)
        ns = tl.arange(0, N_PAD)
        live = (ks[:, None] < K) & (ns[None, :] < N)
        wt = tl.load(w_ptr + ns[None, :] * K + ks[:, None], mask=live, other=0.0)
        bias = tl.load(b_ptr + ns, mask=ns < N, other=0.0)
        return _dot(h, wt, PREC) + bias[None, :]

    @triton.jit
    def _key_block(
        q,
        kv_ptr,
        heads,
        ds,
        rows,
        n0,
        S,
        scale,
        BN: tl.constexpr,
        DH_PAD: tl.constexpr,
        PREC_ATT: tl.constexpr,
    ):
        """The query rows' causal scores against keys n0..n0+BN, all heads, and those keys'
        values (masked scores are -inf)."""
        keys = n0 + tl.arange(0, BN)
        at = kv_ptr + heads + keys[None, :, None] * DH_PAD + ds
        kmask = (keys < S)[None, :, None]
        k = tl.load(at, mask=kmask, other=0.0)
        v = tl.load(at + S * DH_PAD, mask=kmask, other=0.0)
        s = _dot(q, tl.permute(k, (0, 2, 1)), PREC_ATT) * scale
        seen = (keys[None, :] <= rows[:, None]) & (keys[None, :] < S)
        return tl.where(seen[None, :, :], s, -float("inf")), v

    @triton.jit
    def _online_pass(
        q,
        kv_ptr,
        heads,
        ds,
        rows,
        m0,
        S,
        scale,
        H_PAD: tl.constexpr,
        BM: tl.constexpr,
        BN: tl.constexpr,
        DH_PAD: tl.constexpr,
        PREC_ATT: tl.constexpr,
        ACC: tl.constexpr,
    ):
        """One pass over the rows' causal keys: each row's running max and sum, and with ACC 1
        the unnormalized PV product rescaled as the max grows (ACC 0: zeros)."""
        m_i = tl.full((H_PAD, BM), float("-inf"), dtype=tl.float32)
        l_i = tl.zeros((H_PAD, BM), dtype=tl.float32)
        ctx = tl.zeros((H_PAD, BM, DH_PAD), dtype=tl.float32)
        for n0 in range(0, m0 + BM, BN):  # causal: no key beyond the block's last row
            s, v = _key_block(q, kv_ptr, heads, ds, rows, n0, S, scale, BN, DH_PAD, PREC_ATT)
            m_new = tl.maximum(m_i, tl.max(s, axis=2))
            p = tl.exp(s - m_new[:, :, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=2)
            if ACC == 1:
                ctx = ctx * alpha[:, :, None] + _dot(p, v, PREC_ATT)
            m_i = m_new
        return m_i, l_i, ctx

    @triton.jit
    def _head_keys(
        q, kvh, ds, rows, n0, S, scale, BN: tl.constexpr, DH_PAD: tl.constexpr, PREC: tl.constexpr
    ):
        """One head's causal scores [rows x keys] against keys n0..n0+BN, and their values."""
        keys = n0 + tl.arange(0, BN)
        at = kvh + keys[:, None] * DH_PAD + ds[None, :]
        k = tl.load(at, mask=(keys < S)[:, None], other=0.0)
        v = tl.load(at + S * DH_PAD, mask=(keys < S)[:, None], other=0.0)
        s = _dot(q, tl.trans(k), PREC) * scale
        seen = (keys[None, :] <= rows[:, None]) & (keys[None, :] < S)
        return tl.where(seen, s, -float("inf")), v

    @triton.jit
    def _head_pass(
        q,
        kvh,
        ds,
        rows,
        m0,
        S,
        scale,
        BM: tl.constexpr,
        BN: tl.constexpr,
        DH_PAD: tl.constexpr,
        PREC_ATT: tl.constexpr,
        ACC: tl.constexpr,
    ):
        """_online_pass for one head's [rows x keys] tiles."""
        m_i = tl.full((BM,), float("-inf"), dtype=tl.float32)
        l_i = tl.zeros((BM,), dtype=tl.float32)
        ctx = tl.zeros((BM, DH_PAD), dtype=tl.float32)
        for n0 in range(0, m0 + BM, BN):  # causal: no key beyond the block's last row
            s, v = _head_keys(q, kvh, ds, rows, n0, S, scale, BN, DH_PAD, PREC_ATT)
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            if ACC == 1:
                ctx = ctx * alpha[:, None] + _dot(p, v, PREC_ATT)
            m_i = m_new
        return m_i, l_i, ctx

    @triton.jit
    def _head_rows(
        h,
        kv_ptr,
        mat,
        vec,
        head,
        rows,
        m0,
        S,
        scale,
        D: tl.constexpr,
        H_PAD: tl.constexpr,
        DH_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        BM: tl.constexpr,
        BN: tl.constexpr,
        PREC_QKV: tl.constexpr,
        PREC_ATT: tl.constexpr,
        NORM: tl.constexpr,
    ):
        """One head of _attention_rows in [rows x keys] tiles: its query projection, causal
        softmax (online, or NORM 1 normalized before PV from a first pass for max and sum) and
        its share of out_proj, ctx_head @ W_o[:, head]^T."""
        HP: tl.constexpr = H_PAD * DH_PAD
        c0 = head * DH_PAD
        q = _linear(h, mat + c0 * D, vec + 2 * D + c0, DH_PAD, D, DH_PAD, D_PAD, PREC_QKV)
        q = q.to(kv_ptr.dtype.element_ty)
        kvh = kv_ptr + head * 2 * S * DH_PAD
        ds = tl.arange(0, DH_PAD)
        if NORM == 0:
            _, l_i, ctx = _head_pass(q, kvh, ds, rows, m0, S, scale, BM, BN, DH_PAD, PREC_ATT, 1)
            ctx = ctx / l_i[:, None]
        elif m0 + BM <= BN:
            # One key block holds the causal range: QK^T once, as in the batched form.
            s, v = _head_keys(q, kvh, ds, rows, 0, S, scale, BN, DH_PAD, PREC_ATT)
            e = tl.exp(s - tl.max(s, axis=1)[:, None])
            ctx = _dot(e / tl.sum(e, axis=1)[:, None], v, PREC_ATT)
        else:
            m_i, l_i, ctx = _head_pass(q, kvh, ds, rows, m0, S, scale, BM, BN, DH_PAD, PREC_ATT, 0)
            for n0 in range(0, m0 + BM, BN):
                s, v = _head_keys(q, kvh, ds, rows, n0, S, scale, BN, DH_PAD, PREC_ATT)
                ctx += _dot(tl.exp(s - m_i[:, None]) / l_i[:, None], v, PREC_ATT)
        ns = tl.arange(0, D_PAD)
        wo = mat + 3 * HP * D + c0
        wt = tl.load(wo + ns[None, :] * HP + ds[:, None], mask=(ns < D)[None, :], other=0.0)
        return _dot(ctx, wt, PREC_QKV)

    @triton.jit
    def _attention_rows(
        h,
        kv_ptr,
        mat,
        vec,
        rows,
        m0,
        S,
        scale,
        D: tl.constexpr,
        H_PAD: tl.constexpr,
        DH_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        BM: tl.constexpr,
        BN: tl.constexpr,
        PREC_QKV: tl.constexpr,
        PREC_ATT: tl.constexpr,
        NORM: tl.constexpr,
        LOOP: tl.constexpr,
    ):
        """Causal attention of these query rows over the stored K/V, all heads batched (LOOP 1,
        fused_heads=looped: one head after another), through out_proj without its bias. Padded
        heads and head columns carry zero weights. NORM 0 (fused_softmax=online): one pass,
        probabilities normalized after the PV product. NORM 1 (normalized): a first pass for
        each row's max and sum, then normalized probabilities times V, rounded for the PV
        product as the reference rounds them; one pass when a single key block covers the rows'
        causal range.

        Right padding needs no key mask: a valid query i sees keys j <= i, all valid."""
        HP: tl.constexpr = H_PAD * DH_PAD
        if LOOP == 1:
            out = tl.zeros((BM, D_PAD), dtype=tl.float32)
            for head in range(H_PAD):
                out += _head_rows(
                    h, kv_ptr, mat, vec, head, rows, m0, S, scale, D, H_PAD, DH_PAD, D_PAD, BM,
                    BN, PREC_QKV, PREC_ATT, NORM,
                )  # fmt: skip
            return out
        q = _linear(h, mat, vec + 2 * D, HP, D, HP, D_PAD, PREC_QKV).to(kv_ptr.dtype.element_ty)
        q = tl.permute(tl.reshape(q, (BM, H_PAD, DH_PAD)), (1, 0, 2))
        heads = tl.arange(0, H_PAD)[:, None, None] * 2 * S * DH_PAD
        ds = tl.arange(0, DH_PAD)[None, None, :]
        if NORM == 0:
            _, l_i, ctx = _online_pass(
                q, kv_ptr, heads, ds, rows, m0, S, scale, H_PAD, BM, BN, DH_PAD, PREC_ATT, 1
            )
            ctx = ctx / l_i[:, :, None]
        elif m0 + BM <= BN:
            # One key block holds the whole causal range: its scores give each row's max and
            # sum, so the normalized probabilities need no second QK^T.
            s, v = _key_block(q, kv_ptr, heads, ds, rows, 0, S, scale, BN, DH_PAD, PREC_ATT)
            e = tl.exp(s - tl.max(s, axis=2)[:, :, None])
            ctx = _dot(e / tl.sum(e, axis=2)[:, :, None], v, PREC_ATT)
        else:
            m_i, l_i, ctx = _online_pass(
                q, kv_ptr, heads, ds, rows, m0, S, scale, H_PAD, BM, BN, DH_PAD, PREC_ATT, 0
            )
            for n0 in range(0, m0 + BM, BN):
                s, v = _key_block(q, kv_ptr, heads, ds, rows, n0, S, scale, BN, DH_PAD, PREC_ATT)
                p = tl.exp(s - m_i[:, :, None]) / l_i[:, :, None]
                ctx += _dot(p, v, PREC_ATT)
        ctx = tl.reshape(tl.permute(ctx, (1, 0, 2)), (BM, HP))
        cs = tl.arange(0, HP)
        ns = tl.arange(0, D_PAD)
        wo = mat + 3 * HP * D
        wt = tl.load(wo + ns[None, :] * HP + cs[:, None], mask=(ns < D)[None, :], other=0.0)
        return _dot(ctx, wt, PREC_QKV)


else:  # the names exist either way; fused_kernels.kernels_runnable() says whether they run
    _dot = _layer_norm = _linear = _attention_rows = _head_rows = _head_keys = _head_pass = None
