"""The torch side of the softmax workload, as the judge calls it."""

from __future__ import annotations

from typing import Any

import torch

from kernels.workload import TrialSpec, declared_reads


class NaiveSoftmax(torch.nn.Module):
    """The reference: subtract the row max, exponentiate twice, divide."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifted = x - x.max(dim=-1, keepdim=True).values
        return torch.exp(shifted) / torch.exp(shifted).sum(dim=-1, keepdim=True)


def prepare_process(device: str) -> None:
    """No process-wide policy: the reference is plain float32."""


def build_reference(config: Any, device: str) -> torch.nn.Module:
    """The naive reference (it has no weights)."""
    return NaiveSoftmax().to(device).eval()


def build_candidate(entry: type, reference: Any, config: Any, device: str) -> Any:
    """Instantiate the candidate; there are no weights to copy."""
    model = entry(config)
    return model.to(device).eval() if isinstance(model, torch.nn.Module) else model


def generate_inputs(config: Any, trial: TrialSpec, device: str) -> tuple[torch.Tensor, ...]:
    """Standard-normal rows times the trial's scale (padding does not apply)."""
    g = torch.Generator(device=device).manual_seed(trial.seed)
    x = torch.randn(config.rows, config.cols, generator=g, device=device) * trial.input_scale
    return (x,)


def build_oracle(reference: Any, config: Any, device: str) -> Any:
    """Every softmax config runs through the reference: no oracle needed."""
    return reference


def cost(config: Any) -> tuple[float, float]:
    """max, exp, sum and divide per element; read once, write once."""
    elements = config.rows * config.cols
    return float(4 * elements), float(2 * elements * 4)


def call(model: Any, inputs: tuple[Any, ...]) -> Any:
    """forward(x) without autograd."""
    with torch.no_grad():
        return model(*inputs)


def settings_read(model: Any) -> list[str] | None:
    """The tunables the candidate's code read, by its own recorder (None: it keeps none)."""
    return declared_reads(model)
