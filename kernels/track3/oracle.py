"""A memory-bounded float64 oracle of the reference arithmetic, for configs the reference
cannot run (track3 config 14: its score tensor alone would be ~18.6 TiB)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F


class BlockedOracle:
    """The reference forward evaluated one sequence at a time in float64, with attention over
    query blocks x key blocks (online softmax); peak memory is a few sequence-sized tensors."""

    def __init__(self, reference: Any, query_block: int = 1024, key_block: int = 4096) -> None:
        self.causal = bool(reference.causal)
        self.query_block = query_block
        self.key_block = key_block
        self.params = {
            name: p.detach().to(torch.float64) for name, p in reference.state_dict().items()
        }
        self.num_layers = len(reference.layers)
        self.num_heads = reference.layers[0].attention.num_heads

    def _p(self, name: str) -> torch.Tensor:
        return self.params[name]

    def _linear(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return torch.addmm(self._p(f"{prefix}.bias"), x, self._p(f"{prefix}.weight").t())

    def _norm(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        shape = (x.shape[-1],)
        return F.layer_norm(x, shape, self._p(f"{prefix}.weight"), self._p(f"{prefix}.bias"), 1e-5)

    def _attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, valid: torch.Tensor
    ) -> torch.Tensor:
        """softmax((q k^T) * scale, masked) v for [H, S, Dh] float64, block by block.

        Memory-bound in float64 (a score block is 16 x 1,024 x 4,096 on config 14), so each
        block is passed over as few times as the arithmetic allows: the scale goes on q, masks
        only on blocks that have a masked key, exp in place, and the row sums come out of the
        P @ V product through a column of ones appended to v."""
        heads, seq, head_dim = q.shape
        q = q * head_dim**-0.5  # (D / H) ** -0.5, as the reference writes it
        v_ones = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
        out = torch.zeros_like(q)
        for q0 in range(0, seq, self.query_block):
            q1 = min(seq, q0 + self.query_block)
            running_max = torch.full((heads, q1 - q0, 1), -math.inf, dtype=q.dtype, device=q.device)
            acc = torch.zeros(heads, q1 - q0, head_dim + 1, dtype=q.dtype, device=q.device)
            for k0 in range(0, q1 if self.causal else seq, self.key_block):
                k1 = min(q1 if self.causal else seq, k0 + self.key_block)
                scores = q[:, q0:q1] @ k[:, k0:k1].transpose(1, 2)
                blocked = self._masked(valid, (q0, q1), (k0, k1))
                if blocked is not None:
                    scores.masked_fill_(blocked, -math.inf)
                block_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
                safe_max = torch.where(torch.isfinite(block_max), block_max, 0.0)
                correction = torch.exp(
                    torch.where(torch.isfinite(running_max), running_max - safe_max, -math.inf)
                )
                acc = acc * correction + scores.sub_(safe_max).exp_() @ v_ones[:, k0:k1]
                running_max = block_max
            out[:, q0:q1] = acc[..., :head_dim] / acc[..., head_dim:]
        return out

    def _masked(
        self, valid: torch.Tensor, rows: tuple[int, int], cols: tuple[int, int]
    ) -> torch.Tensor | None:
        """The [1, rows, cols] mask of scores a query may not see (padded keys; keys after the
        query), or None for a block with none (most blocks: no pass over it is needed)."""
        (q0, q1), (k0, k1) = rows, cols
        diagonal = self.causal and k1 - 1 > q0
        padded = not bool(valid[k0:k1].all())
        if not diagonal and not padded:
            return None
        hidden = ~valid[k0:k1][None, :].expand(q1 - q0, k1 - k0)
        if diagonal:
            positions = torch.arange(max(q1, k1), device=valid.device)
            hidden = hidden | (positions[k0:k1][None, :] > positions[q0:q1][:, None])
        return hidden[None]

    def _block(self, h: torch.Tensor, valid: torch.Tensor, i: int) -> torch.Tensor:
        seq, width = h.shape
        heads = self.num_heads
        a = self._norm(h, f"layers.{i}.norm1")
        q, k, v = (
            self._linear(a, f"layers.{i}.attention.{n}_proj").view(seq, heads, -1).transpose(0, 1)
            for n in ("q", "k", "v")
        )
        context = self._attention(q, k, v, valid).transpose(0, 1).reshape(seq, width)
        attn = self._linear(context, f"layers.{i}.attention.out_proj").masked_fill(
            ~valid[:, None], 0
        )
        h = h + attn
        hidden = F.gelu(self._linear(self._norm(h, f"layers.{i}.norm2"), f"layers.{i}.ffn_in"))
        h = h + self._linear(hidden, f"layers.{i}.ffn_out")
        return h.masked_fill(~valid[:, None], 0)

    def __call__(
        self, x: torch.Tensor, valid_token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        out = torch.empty_like(x)
        for b in range(x.shape[0]):
            valid = (
                valid_token_mask[b]
                if valid_token_mask is not None
                else torch.ones(x.shape[1], dtype=torch.bool, device=x.device)
            )
            h = x[b].to(torch.float64)
            for i in range(self.num_layers):
                h = self._block(h, valid, i)
            h = self._norm(h, "final_norm").masked_fill(~valid[:, None], 0)
            out[b] = h.to(x.dtype)
        return out
