"""Softmax candidate: the naive reference arithmetic behind declared tunables."""

from __future__ import annotations

import torch
from torch import nn

TUNABLE_SPACE = {
    "exp_passes": {
        "values": ["twice", "once"],
        "doc": "exponentiate the shifted rows twice like the reference, or once and reuse",
    },
    "normalize": {
        "values": ["divide", "reciprocal_multiply", "fused_softmax"],
        "doc": "divide by the row sum, multiply by its reciprocal, or call the fused softmax",
    },
    "row_chunking": {
        "values": ["none", "chunks_of_64"],
        "doc": "process all rows at once, or in chunks of 64 rows",
    },
}

# --- ratchet:tunables (the offline expander rewrites this block) ---
TUNABLES = {
    "exp_passes": "twice",
    "normalize": "divide",
    "row_chunking": "none",
}
# --- end ratchet:tunables ---


class OptimizedSoftmax(nn.Module):
    """Row softmax with tunable internals."""

    def __init__(self, config: object, tunables: dict[str, str] | None = None) -> None:
        super().__init__()
        chosen = dict(TUNABLES)
        chosen.update(tunables or {})
        for name, value in chosen.items():
            if value not in TUNABLE_SPACE.get(name, {}).get("values", ()):
                raise ValueError(f"tunable {name}={value!r} is not declared in TUNABLE_SPACE")
        self.tunables = chosen

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        if self.tunables["normalize"] == "fused_softmax":
            return torch.softmax(x, dim=-1)
        shifted = x - x.max(dim=-1, keepdim=True).values
        if self.tunables["exp_passes"] == "once":
            e = torch.exp(shifted)
            total = e.sum(dim=-1, keepdim=True)
        else:
            e = torch.exp(shifted)
            total = torch.exp(shifted).sum(dim=-1, keepdim=True)
        if self.tunables["normalize"] == "reciprocal_multiply":
            return e * total.reciprocal()
        return e / total

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tunables["row_chunking"] == "chunks_of_64":
            return torch.cat([self._rows(part) for part in x.split(64, dim=0)])
        return self._rows(x)
