"""Track3: the organizer's transformer reference, its inputs and its 14 configurations."""

from __future__ import annotations

from typing import Any

from kernels.track3.configs import CONFIGS, CPU_CONFIGS, OFFICIAL_CONFIGS, Track3Config
from kernels.track3.workload import track3_workload

__all__ = [
    "CONFIGS",
    "CPU_CONFIGS",
    "OFFICIAL_CONFIGS",
    "Track3Config",
    "Transformer",
    "generate_inputs",
    "track3_workload",
]


def __getattr__(name: str) -> Any:
    # torch is imported on first use, so the CLI and the search stay torch-free.
    if name == "Transformer":
        from kernels.track3.reference import Transformer

        return Transformer
    if name == "generate_inputs":
        from kernels.track3.inputs import generate_inputs

        return generate_inputs
    raise AttributeError(f"module 'kernels.track3' has no attribute {name!r}")
