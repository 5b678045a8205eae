"""Batch chunking: run groups of sequences whose activations fit the device's free memory."""

from __future__ import annotations

from typing import Any

import torch


def sequences_per_chunk(model: Any, x: torch.Tensor) -> int | None:
    """None: run the batch whole. Otherwise the sequences per pass that keep one pass's
    activations within half the device's free memory (or the fixed count chosen)."""
    mode = model.tunables["batch_chunk"]
    batch, seq, width = x.shape
    if mode == "none" or (mode == "auto" and not x.is_cuda):
        return None
    if mode != "auto":
        return max(1, min(batch, int(mode)))
    first = model.layers[0]
    # Live bytes of one sequence through a block, temporaries included, generously counted;
    # explicit attention also holds scores, probabilities and masks per head.
    per_sequence = seq * (40 * width + 8 * first.ffn_in.out_features)
    if model.tunables["attention"] == "explicit":
        per_sequence += 12 * first.attention.num_heads * seq * seq
    free, _ = torch.cuda.mem_get_info(x.device)
    fits = (free // 2) // per_sequence
    return None if fits >= batch else max(1, fits)
