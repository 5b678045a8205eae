"""The torch side of the matchain workload, as the judge calls it."""

from __future__ import annotations

import math
from typing import Any

import torch

from kernels.workload import TrialSpec, declared_reads


class LeftToRight(torch.nn.Module):
    """The reference: (A @ B) @ C."""

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a @ b) @ c


def prepare_process(device: str) -> None:
    """No process-wide policy: plain float32."""


def build_reference(config: Any, device: str) -> torch.nn.Module:
    """The left-to-right reference (no weights)."""
    return LeftToRight().to(device).eval()


def build_candidate(entry: type, reference: Any, config: Any, device: str) -> Any:
    """Instantiate the candidate; there are no weights to copy."""
    model = entry(config)
    return model.to(device).eval() if isinstance(model, torch.nn.Module) else model


def generate_inputs(config: Any, trial: TrialSpec, device: str) -> tuple[torch.Tensor, ...]:
    """Standard-normal factors scaled by 1/sqrt(inner size), so the product stays O(1)."""
    g = torch.Generator(device=device).manual_seed(trial.seed)
    shapes = ((config.m, config.k), (config.k, config.n), (config.n, config.p))
    scale = trial.input_scale
    return tuple(
        torch.randn(*shape, generator=g, device=device) * (scale / math.sqrt(shape[0]))
        for shape in shapes
    )


def build_oracle(reference: Any, config: Any, device: str) -> Any:
    """Every config runs through the reference: no oracle needed."""
    return reference


def cost(config: Any) -> tuple[float, float]:
    """The cheaper association's multiply-adds (x2 flops); the three inputs and the output."""
    m, k, n, p = config.m, config.k, config.n, config.p
    macs = min(m * k * n + m * n * p, k * n * p + m * k * p)
    return float(2 * macs), float(4 * (m * k + k * n + n * p + m * p))


def call(model: Any, inputs: tuple[Any, ...]) -> Any:
    """forward(a, b, c) without autograd."""
    with torch.no_grad():
        return model(*inputs)


def settings_read(model: Any) -> list[str] | None:
    """The tunables the candidate's code read, by its own recorder (None: it keeps none)."""
    return declared_reads(model)
