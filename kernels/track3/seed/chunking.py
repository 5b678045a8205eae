"""Batch chunking: run groups of sequences whose activations fit the device's free memory."""

from __future__ import annotations

from typing import Any

import torch

from .fused import fused_fits


def sequences_per_chunk(model: Any, x: torch.Tensor) -> int | None:
    """None: run the batch whole. Otherwise the sequences per pass that keep one pass's
    activations within half the device's free memory (auto, and "none" where the whole batch
    would not fit), or the fixed count chosen."""
    mode = model.tunables["batch_chunk"]
    batch = x.shape[0]
    if mode not in ("none", "auto"):
        return max(1, min(batch, int(mode)))
    if not x.is_cuda:
        return None
    per_sequence = _bytes_per_sequence(model, x)
    total = torch.cuda.get_device_properties(x.device).total_memory
    if mode == "none" and batch * per_sequence <= total // 4:
        return None  # fits with room to spare: no need to ask the device (no sync)
    free, _ = torch.cuda.mem_get_info(x.device)
    fits = (free // 2) // per_sequence
    # "none" that cannot fit falls back to chunking rather than running out of memory.
    return None if fits >= batch else max(1, fits)


def _bytes_per_sequence(model: Any, x: torch.Tensor) -> int:
    _, seq, width = x.shape
    first = model.layers[0]
    # Live bytes of one sequence through a block, temporaries included, generously counted;
    # explicit attention also holds scores, probabilities and masks per head.
    per_sequence = seq * (40 * width + 8 * first.ffn_in.out_features)
    # The fused kernels hold no score tensor, so where they serve `attention` is not read:
    # its recorder then shows that a change of it cannot reach these sizes (runs 15 and 16 on
    # the H200 blamed sdpa children for the fused frontier's own misses on config 6).
    if _fused_serves(model, x):
        return int(per_sequence)
    if model.tunables["attention"] == "explicit" and not scores_too_large(model, seq):
        per_sequence += 12 * first.attention.num_heads * seq * seq
    return int(per_sequence)


def _fused_serves(model: Any, x: torch.Tensor) -> bool:
    """Whether the fused kernels will run this input (a launch the device refused for these
    sizes before sends it to the torch path, whose scores then count)."""
    if model.tunables["fused_kernel"] != "triton" or not fused_fits(model, x):
        return False
    refused = model.fused_refused
    return not any((tuple(x.shape), bare, model._regime) in refused for bare in (True, False))


def scores_too_large(model: Any, seq: int) -> bool:
    """Whether one sequence's explicit score tensors would not fit in half the device."""
    first = model.layers[0]
    return explicit_scores_exceed(first.norm1.weight.device, first.attention.num_heads, seq, 1)


def explicit_scores_exceed(device: torch.device, heads: int, seq: int, batch: int) -> bool:
    """Whether explicit attention's scores, probabilities and masks for this batch would not
    fit in half the device's memory: such inputs take the flash path instead (a value that
    cannot apply falls back, never fails). Read from the device's size, never a sync."""
    if device.type != "cuda":
        return False
    total = torch.cuda.get_device_properties(device).total_memory
    return 12 * batch * heads * seq * seq > total // 2


def run_chunked(eager: Any, x: torch.Tensor, mask: torch.Tensor | None, chunk: int) -> torch.Tensor:
    """eager(x, mask) over groups of `chunk` sequences, into one output."""
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], chunk):
        rows = slice(start, start + chunk)
        out[rows] = eager(x[rows], None if mask is None else mask[rows])
    return out
