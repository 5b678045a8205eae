"""Shared helpers of the candidate: padded-row masking and caches of derived tensors."""

from __future__ import annotations

from typing import Any

import torch

LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}


def zero_padded(x: torch.Tensor, mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """Zero the rows of padded positions (the reference's masked_fill, or an equivalent)."""
    if mask is None:
        return x
    if mode == "multiply":
        return x * mask[..., None].to(x.dtype)
    capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
    if mode == "skip_if_full" and not capturing and bool(mask.all()):
        return x
    return x.masked_fill(~mask[..., None], 0)


class DerivedCache:
    """Derived tensors (packed or low-precision weights, masks) rebuilt when weights change."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.value: Any = None

    def get(self, key: tuple[object, ...], build: object) -> Any:
        if key != self.key:
            self.value = build()  # type: ignore[operator]
            self.key = key
        return self.value


def weight_key(*tensors: torch.Tensor) -> tuple[object, ...]:
    """Identity and version of each tensor: derived tensors are rebuilt when any changes.
    Inference tensors (made under torch.inference_mode()) keep no version counter; theirs is
    -1, so an in-place update of one in inference mode is not seen (load_state_dict and .to()
    clear the caches whatever the mode)."""
    return tuple(
        (t.data_ptr(), -1 if t.is_inference() else t._version, t.dtype, str(t.device))
        for t in tensors
    )
