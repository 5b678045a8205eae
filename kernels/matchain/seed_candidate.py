"""Matrix-chain candidate: the reference product behind declared tunables and a dispatch block."""

from __future__ import annotations

import torch
from torch import nn

TUNABLE_SPACE = {
    "association": {
        "values": ["left", "right"],
        "doc": "(A @ B) @ C like the reference, or A @ (B @ C)",
    },
    "middle_layout": {
        "values": ["as_given", "contiguous"],
        "doc": "use B as given, or make it contiguous first",
    },
}

# --- ratchet:tunables (the offline expander rewrites this block) ---
TUNABLES = {
    "association": "left",
    "middle_layout": "as_given",
}
# --- end ratchet:tunables ---

# --- ratchet:dispatch (the composition step rewrites this block) ---
REGIMES: dict[str, dict[str, str]] = {}


def choose_regime(sizes):
    """The REGIMES entry that serves inputs of these sizes (None: TUNABLES)."""
    return None


# --- end ratchet:dispatch ---


class Sizes:
    """What a dispatch predicate may read: the factors' sizes, named as the configs name them."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        self.m, self.k = int(a.shape[0]), int(a.shape[1])
        self.n, self.p = int(b.shape[1]), int(c.shape[1])


def _checked(tunables: dict[str, str], where: str) -> dict[str, str]:
    for key, value in tunables.items():
        if value not in TUNABLE_SPACE.get(key, {}).get("values", ()):
            raise ValueError(f"{where}: tunable {key}={value!r} is not declared in TUNABLE_SPACE")
    return tunables


class OptimizedChain(nn.Module):
    """A @ B @ C with tunable internals."""

    def __init__(self, config: object, tunables: dict[str, str] | None = None) -> None:
        super().__init__()
        self.tunables = _checked({**TUNABLES, **(tunables or {})}, "TUNABLES")
        self.regimes = {
            name: _checked({**self.tunables, **values}, f"REGIMES[{name!r}]")
            for name, values in REGIMES.items()
        }

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        chosen = self.tunables
        if self.regimes:
            regime = choose_regime(Sizes(a, b, c))
            chosen = self.tunables if regime is None else self.regimes[regime]
        if chosen["middle_layout"] == "contiguous":
            b = b.contiguous()
        if chosen["association"] == "right":
            return a @ (b @ c)
        return (a @ b) @ c
