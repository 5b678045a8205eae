"""The organizer's input generator for track3 (hidden states and a right-padding mask)."""

from __future__ import annotations

from typing import Any

import torch


def generate_inputs(
    config: Any,
    seed: int,
    padding_ratio: float = 0.0,
    input_scale: float = 1.0,
    device: str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (x, valid_token_mask) exactly as the organizer draws them."""
    b, s, d = config.batch_size, config.seq_len, config.d_model
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(b, s, d, generator=g, device=device) * input_scale
    if padding_ratio <= 0:
        return x, torch.ones(b, s, dtype=torch.bool, device=device)
    min_valid = max(1, round(s * (1 - padding_ratio)))
    lengths = torch.randint(min_valid, s + 1, (b,), generator=g, device=device)
    mask = torch.arange(s, device=device)[None, :] < lengths[:, None]
    x = x.masked_fill(~mask[..., None], 0.0)
    return x, mask
