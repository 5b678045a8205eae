"""What dispatch predicates read (the sizes) and the validation of every tunable set."""

from __future__ import annotations

from typing import Any

import torch


class Sizes:
    """What a dispatch predicate may read: the input's and the model's sizes, named as the
    workload's configurations name them, and the device's streaming multiprocessors."""

    def __init__(self, model: Any, x: torch.Tensor) -> None:
        self.batch_size, self.seq_len = int(x.shape[0]), int(x.shape[1])
        self.d_model, self.num_heads = model.d_model, model.num_heads
        self.ffn_dim, self.num_layers = model.ffn_dim, len(model.layers)
        self.multiprocessors = (
            torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 0
        )


def select_regime(model: Any, x: torch.Tensor, choose: Any) -> None:
    """Point the model's tunables at the regime ``choose(Sizes)`` picks for this input: a
    pure function of sizes, so it is asked once per shape."""
    if not model._regimes:
        return
    key = (tuple(x.shape), str(x.device))
    if key not in model._regime_for:
        model._regime_for[key] = choose(Sizes(model, x))
    regime = model._regime_for[key]
    if regime is not None and regime not in model._regimes:
        raise ValueError(f"choose_regime gave {regime!r}; REGIMES has {sorted(model._regimes)}")
    if regime != model._regime:
        model.tunables.clear()
        model.tunables.update(model._defaults if regime is None else model._regimes[regime])
        model._regime = regime


def checked(tunables: dict[str, str], space: dict[str, Any], where: str) -> dict[str, str]:
    """The tunables, or a ValueError naming the one outside the declared space."""
    for key, value in tunables.items():
        if key not in space:
            raise ValueError(f"{where}: unknown tunable {key!r}; known: {sorted(space)}")
        allowed = space[key]["values"]
        if value not in allowed:
            raise ValueError(f"{where}: tunable {key}={value!r} is not one of {allowed}")
    return tunables
